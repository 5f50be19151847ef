"""Summary statistics of a run: TTFT, ITL, TPOT and E2E distributions and throughput, computed from RunRecords as
vLLM's benchmark does.

Definitions are those of ``kvledger.records`` (TTFT = first token − arrival, E2E = finish
− arrival, TPOT = (finish − first token)/(output tokens − 1), ITL = every gap between
consecutive output chunks). As in vLLM ``benchmarks/serve.py``: TPOT is taken over
requests with more than one output token; percentiles use numpy's linear interpolation;
duration = last finish − first arrival; throughput counts finished requests only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from kvledger.dynamics.outputs.exact_mean import exact_mean
from kvledger.jsonable import to_jsonable
from kvledger.records import RunRecords

__all__ = ["LatencyStats", "RunFigures", "Summary", "latency_stats", "percentiles", "summarize_records"]


@dataclass(frozen=True)
class LatencyStats:
    """Mean and percentiles of one latency metric, s (None when no request contributes)."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    count: int

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def percentiles(v: np.ndarray, qs: tuple[float, ...], inplace: bool = False) -> list[float]:
    """Percentiles with numpy's default 'linear' method (``a[⌊h⌋] + (h − ⌊h⌋)(a[⌊h⌋+1] − a[⌊h⌋])``, ``h =
    q/100·(n−1)``),
    by one partition (several times faster than ``np.percentile`` on millions of ITLs; ``inplace`` reorders ``v``)."""
    n = v.size
    hs = [q / 100.0 * (n - 1) for q in qs]
    kth = sorted({min(int(h) + d, n - 1) for h in hs for d in (0, 1)})
    if inplace:
        v.partition(kth)
        part = v
    else:
        part = np.partition(v, kth)
    out = []
    for h in hs:
        lo = int(h)
        hi = min(lo + 1, n - 1)
        a, b = float(part[lo]), float(part[hi])
        out.append(a + (h - lo) * (b - a))
    return out


def latency_stats(values: np.ndarray, inplace: bool = False) -> LatencyStats:
    """Mean, p50, p90, p99 of ``values`` (s), numpy linear-interpolation percentiles (``inplace`` reorders them)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return LatencyStats(None, None, None, None, 0)
    p50, p90, p99 = percentiles(v, (50.0, 90.0, 99.0), inplace=inplace)
    return LatencyStats(float(v.mean()), p50, p90, p99, int(v.size))


@dataclass(frozen=True)
class RunFigures:
    """What ``summarize_records`` reads off a run's records: counts, duration, throughput and the four latency
    distributions (the first fields of ``Summary``, same names and units)."""

    num_requests: int
    num_finished: int
    num_rejected: int
    duration_s: float
    throughput_req_per_s: float
    throughput_output_tok_per_s: float
    total_throughput_tok_per_s: float
    ttft_s: LatencyStats
    itl_s: LatencyStats
    tpot_s: LatencyStats
    e2e_s: LatencyStats

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass
class Summary:
    """What one simulated (or measured) run adds up to; units in the names.

    Attributes:
        num_requests: requests in the workload, count.
        num_finished: requests that produced all their output tokens, count.
        num_rejected: requests refused at input validation (prompt + output > max_model_len), count.
        num_preemptions: preemption (recompute) events, count.
        duration_s: last finish − first arrival, s.
        throughput_req_per_s: finished requests / duration, req/s.
        throughput_output_tok_per_s: output tokens of finished requests / duration, tok/s.
        total_throughput_tok_per_s: (prompt + output) tokens of finished requests / duration, tok/s.
        ttft_s, itl_s, tpot_s, e2e_s: distributions, s.
        prefix_cache_hit_rate: cached prompt tokens / prompt tokens looked up at first admission, fraction.
        prefix_cache_hit_tokens, prefix_cache_query_tokens: its numerator and denominator, tokens.
        kv_usage: KV usage over time (see ``KvUsageTracker.summary``).
        num_steps: engine steps simulated, count (summed over replicas).
        gpu_time_split: GPU time by token kind, each step split between its prefill and decode parts by its step-cost
            model's terms (``kvledger.accounting.step_split``); empty for a measured run.
        definitions: where each figure comes from.
    """

    num_requests: int
    num_finished: int
    num_rejected: int
    num_preemptions: int
    duration_s: float
    throughput_req_per_s: float
    throughput_output_tok_per_s: float
    total_throughput_tok_per_s: float
    ttft_s: LatencyStats
    itl_s: LatencyStats
    tpot_s: LatencyStats
    e2e_s: LatencyStats
    prefix_cache_hit_rate: float = 0.0
    prefix_cache_hit_tokens: int = 0
    prefix_cache_query_tokens: int = 0
    kv_usage: dict[str, Any] = field(default_factory=dict)
    num_steps: int = 0
    gpu_time_split: dict[str, Any] = field(default_factory=dict)
    definitions: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, figures: RunFigures, **engine: Any) -> Summary:
        """``figures`` and the engine's own figures (preemptions, prefix cache, KV usage, steps, ...) as one Summary."""
        return cls(**{f.name: getattr(figures, f.name) for f in fields(figures)}, **engine)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


DEFINITIONS = [
    "TTFT = first_token_s - arrival_s; E2E = finish_s - arrival_s; TPOT = (finish_s - first_token_s)/(output-1) over "
    "requests with >1 output token; ITL = gaps between consecutive output tokens (kvledger.records)",
    "percentiles: numpy linear interpolation, as vLLM benchmarks/serve.py",
    "duration_s = last finish - first arrival; throughput counts finished requests",
]


def summarize_records(run: RunRecords, exact_itl_mean: bool = False) -> RunFigures:
    """Counts, duration, throughput and the four latency distributions of a run.

    ``exact_itl_mean``: the ITL mean correctly rounded (exact_mean.py) instead of numpy's pairwise sum, as
    the simulator reports it whether or not it keeps token times.
    """
    if run.columns is not None and not run.columns.has_chunks.any():
        return _summarize_columns(run)
    recs = run.records
    ok = [r for r in recs if r.ok and r.finish_s is not None]
    rejected = sum(1 for r in recs if not r.ok)
    duration = run.duration_s
    out_tok = sum(r.num_output_tokens for r in ok)
    in_tok = sum(r.num_prompt_tokens for r in ok)
    ttft = np.fromiter((r.ttft_s for r in ok if r.first_token_s is not None), np.float64)
    e2e = np.fromiter((r.e2e_s for r in ok), np.float64)
    tpot = np.fromiter((r.tpot_s for r in ok if r.num_output_tokens > 1), np.float64)
    chunks = [r.chunk_times_s for r in ok if r.chunk_times_s is not None and len(r.chunk_times_s) > 1]
    itl = np.empty(sum(len(c) - 1 for c in chunks), dtype=np.float64)  # one array: memory = the gaps, once
    pos = 0
    for c in chunks:
        np.subtract(c[1:], c[:-1], out=itl[pos: pos + len(c) - 1])
        pos += len(c) - 1
    return RunFigures(
        num_requests=len(recs),
        num_finished=len(ok),
        num_rejected=rejected,
        duration_s=duration,
        throughput_req_per_s=len(ok) / duration if duration > 0 else 0.0,
        throughput_output_tok_per_s=out_tok / duration if duration > 0 else 0.0,
        total_throughput_tok_per_s=(in_tok + out_tok) / duration if duration > 0 else 0.0,
        ttft_s=latency_stats(ttft),
        itl_s=_itl_stats(itl, exact_itl_mean),
        tpot_s=latency_stats(tpot),
        e2e_s=latency_stats(e2e),
    )


def _summarize_columns(run: RunRecords) -> RunFigures:
    """``summarize_records`` of a run held as columns without chunk times: the same figures, value for value (the
    per-request differences are the same IEEE operations, over the same requests in the same order)."""
    c = run.columns
    ok = c.ok & ~np.isnan(c.finish_s)
    n_ok = int(ok.sum())
    duration = run.duration_s
    out_tok = int(c.num_output_tokens[ok].sum())
    in_tok = int(c.num_prompt_tokens[ok].sum())
    first, finish, arrival = c.first_token_s[ok], c.finish_s[ok], c.arrival_s[ok]
    has_first = ~np.isnan(first)
    n_out = c.num_output_tokens[ok]
    multi = n_out > 1
    tpot = (finish[multi] - first[multi]) / (n_out[multi] - 1).astype(np.float64)
    return RunFigures(
        num_requests=c.n,
        num_finished=n_ok,
        num_rejected=int((~c.ok).sum()),
        duration_s=duration,
        throughput_req_per_s=n_ok / duration if duration > 0 else 0.0,
        throughput_output_tok_per_s=out_tok / duration if duration > 0 else 0.0,
        total_throughput_tok_per_s=(in_tok + out_tok) / duration if duration > 0 else 0.0,
        ttft_s=latency_stats(first[has_first] - arrival[has_first]),
        itl_s=latency_stats(np.empty(0)),
        tpot_s=latency_stats(tpot),
        e2e_s=latency_stats(finish - arrival),
    )


def _itl_stats(itl: np.ndarray, exact: bool) -> LatencyStats:
    if not exact or itl.size == 0:
        return latency_stats(itl, inplace=True)
    mean = exact_mean(itl)  # before the percentiles reorder the array (the sum is order-free anyway)
    st = latency_stats(itl, inplace=True)
    return LatencyStats(mean, st.p50, st.p90, st.p99, st.count)
