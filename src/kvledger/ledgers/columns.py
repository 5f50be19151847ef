"""Per-request metric columns (numpy) computed once from RunRecords, so goodput over a million requests is vectorised.

Definitions are records.py's: TTFT = first_token − arrival; E2E = finish − arrival;
TPOT = (finish − first_token)/(output − 1), 0 for ≤ 1 output token (vLLM
``calculate_metrics``); ITL statistics over each request's gaps ``diff(chunk_times)``,
0 for a request with fewer than two chunks (no gap to violate). A metric that cannot be
computed (no first token, no chunk times) is NaN, and NaN never meets an SLO.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvledger.records import RunRecords

__all__ = ["Columns", "columns_from"]


@dataclass(slots=True)
class Columns:
    """Struct-of-arrays view of a run, all shape ``(n,)``.

    Attributes:
        ok: request finished without error.
        arrival_s, first_token_s, finish_s: s; NaN where unknown.
        num_prompt_tokens, num_output_tokens: tokens.
        weight: how many requests each record stands for (1 unless the file was sampled).
        chunk_lengths: chunks per request (0 where unknown); None when no chunk times were built.
        chunk_flat: all chunk times concatenated, s; None when not built.
        has_chunks: per request, whether chunk times are known.
    """

    ok: np.ndarray
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    num_prompt_tokens: np.ndarray
    num_output_tokens: np.ndarray
    weight: np.ndarray
    chunk_lengths: np.ndarray | None = None
    chunk_flat: np.ndarray | None = None
    has_chunks: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.ok.size)

    def ttft_s(self) -> np.ndarray:
        """TTFT per request, s (NaN without a first token)."""
        return self.first_token_s - self.arrival_s

    def e2e_s(self) -> np.ndarray:
        """E2E latency per request, s (NaN without a finish time)."""
        return self.finish_s - self.arrival_s

    def tpot_s(self) -> np.ndarray:
        """TPOT excluding the first token per request, s; 0 for ≤ 1 output token."""
        out = self.num_output_tokens.astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = (self.finish_s - self.first_token_s) / (out - 1.0)
        return np.where(out <= 1.0, 0.0, tpot)

    def itl_stat_s(self, stat: str | float) -> np.ndarray:
        """Per-request statistic of the chunk gaps, s: "max", "mean" or a percentile (numpy 'linear' rule).

        Requests with < 2 chunks get 0.0; requests without chunk times get NaN.
        """
        if self.chunk_flat is None or self.chunk_lengths is None or self.has_chunks is None:
            raise ValueError("chunk times were not built (columns_from(..., with_chunks=True))")
        n_gaps = np.maximum(self.chunk_lengths - 1, 0)
        seg = np.repeat(np.arange(self.n), self.chunk_lengths)
        same = seg[1:] == seg[:-1]
        gaps = np.diff(self.chunk_flat)[same]
        out = np.zeros(self.n)
        has = n_gaps > 0
        if gaps.size:
            starts = np.concatenate(([0], np.cumsum(n_gaps)[:-1]))[has]
            counts = n_gaps[has]
            if stat == "max":
                out[has] = np.maximum.reduceat(gaps, starts)
            elif stat == "mean":
                out[has] = np.add.reduceat(gaps, starts) / counts
            else:
                gap_seg = seg[1:][same]
                s = gaps[np.lexsort((gaps, gap_seg))]
                h = float(stat) / 100.0 * (counts - 1)
                lo = np.floor(h).astype(np.int64)
                hi = np.minimum(lo + 1, counts - 1)
                out[has] = s[starts + lo] + (h - lo) * (s[starts + hi] - s[starts + lo])
        out[~self.has_chunks] = np.nan
        return out


def _weights(run: RunRecords, ok: np.ndarray) -> np.ndarray:
    weights = run.metadata.extra.get("sample_weights") if isinstance(run.metadata.extra, dict) else None
    if isinstance(weights, dict):
        return np.where(ok, float(weights.get("ok", 1.0)), float(weights.get("failed", 1.0)))
    return np.ones(ok.size)


def _from_record_columns(run: RunRecords, with_chunks: bool) -> Columns:
    """Columns of a run a reader already holds as arrays (``RunRecords.columns``): no per-record Python work."""
    rc = run.columns
    ok = rc.ok
    cols = Columns(ok, rc.arrival_s, rc.first_token_s, rc.finish_s, rc.num_prompt_tokens, rc.num_output_tokens,
                   _weights(run, ok))
    if with_chunks:
        lengths = np.diff(rc.chunk_offsets)
        cols.has_chunks = rc.has_chunks
        cols.chunk_lengths = np.where(rc.has_chunks, lengths, 0)
        cols.chunk_flat = rc.chunk_flat
    return cols


def columns_from(run: RunRecords, *, with_chunks: bool = False) -> Columns:
    """Columns of ``run``; chunk times are concatenated only when ``with_chunks`` (an ITL SLO needs them)."""
    if run.columns is not None:
        return _from_record_columns(run, with_chunks)
    recs = run.records
    n = len(recs)
    ok = np.fromiter((r.error is None for r in recs), dtype=bool, count=n)
    arrival = np.fromiter((r.arrival_s for r in recs), dtype=np.float64, count=n)
    first = np.array([r.first_token_s for r in recs], dtype=np.float64)
    finish = np.array([r.finish_s for r in recs], dtype=np.float64)
    n_in = np.fromiter((r.num_prompt_tokens for r in recs), dtype=np.int64, count=n)
    n_out = np.fromiter((r.num_output_tokens for r in recs), dtype=np.int64, count=n)
    weights = run.metadata.extra.get("sample_weights") if isinstance(run.metadata.extra, dict) else None
    if isinstance(weights, dict):
        weight = np.where(ok, float(weights.get("ok", 1.0)), float(weights.get("failed", 1.0)))
    else:
        weight = np.ones(n)
    cols = Columns(ok, arrival, first, finish, n_in, n_out, weight)
    if with_chunks:
        chunks = [r.chunk_times_s for r in recs]
        cols.has_chunks = np.fromiter((c is not None for c in chunks), dtype=bool, count=n)
        cols.chunk_lengths = np.fromiter((0 if c is None else c.size for c in chunks), dtype=np.int64, count=n)
        present = [c for c in chunks if c is not None and c.size]
        cols.chunk_flat = np.concatenate(present) if present else np.zeros(0)
    return cols
