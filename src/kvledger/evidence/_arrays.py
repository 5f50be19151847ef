"""Per-request records from the parallel arrays vLLM ``--save-detailed`` and SGLang ``--output-details`` write.

Both tools store, index by index, ``input_lens``, ``output_lens``, ``ttfts`` (s),
``itls`` (list of gaps per request, s), ``errors`` ("" on success) and, in 2026 vLLM,
``latencies`` (E2E, s) and ``start_times`` (s, client ``perf_counter`` clock). Chunk
times are rebuilt the way vLLM's own timeline plot does (``vllm/benchmarks/serve.py``
``calculate_metrics``): first chunk at start + ttft, then one chunk after each gap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.errors import FormatError
from kvledger.evidence._io import count, latency_s
from kvledger.records import RequestRecord

__all__ = ["DETAIL_KEYS", "has_details", "detail_notes", "records_from_arrays", "no_ttft_notes", "length_quantiles"]

DETAIL_KEYS = ("input_lens", "output_lens", "ttfts", "itls")


def has_details(obj: dict[str, Any]) -> bool:
    """True when ``obj`` carries the per-request arrays (vLLM/SGLang detailed output)."""
    return all(isinstance(obj.get(k), list) for k in DETAIL_KEYS)


def _column(path: str, obj: dict[str, Any], key: str, n: int, where: str) -> list[Any] | None:
    col = obj.get(key)
    if col is None:
        return None
    if not isinstance(col, list) or len(col) != n:
        got = len(col) if isinstance(col, list) else type(col).__name__
        raise FormatError(path, f"per-request array {key!r} has {got} entries but input_lens has {n}", f"{where}{key}")
    return col


def detail_notes(has_start_times: bool, has_latencies: bool, has_errors: bool) -> list[str]:
    """How the records of a detailed file were built (shared with the fast path, ``vllm_fast``)."""
    notes = [
        "TTFT and chunk times from ttfts + itls (s); chunk k at start + ttft + Σ itls[:k] (vLLM serve.py timeline)"
    ]
    notes.append(
        "arrival = start_times − min(start_times), s (client perf_counter clock, not Unix time)"
        if has_start_times
        else "no start_times in the file: each request on its own clock (arrival 0); duration taken from 'duration'"
    )
    notes.append("E2E from latencies (s)" if has_latencies else "E2E reconstructed as ttft + Σ itls (file has no "
                                                                "latencies; older vLLM/SGLang)")
    if not has_errors:
        notes.append("no errors array: a request with ttft 0 and output_len 0 is counted as failed")
    return notes


def records_from_arrays(path: str, obj: dict[str, Any], where: str = "") -> tuple[list[RequestRecord], list[str]]:
    """Build one record per index of the detail arrays; returns (records, definition notes).

    ``where`` prefixes field locations in errors (e.g. "line 2: " or "details.").

    Raises:
        FormatError: arrays of different lengths, NaN, negative latencies, a latency shorter than
            the TTFT, naming the array and index.
    """
    n = len(obj["input_lens"])
    cols = {k: _column(path, obj, k, n, where) for k in (*DETAIL_KEYS, "errors", "latencies", "start_times")}
    notes = detail_notes(cols["start_times"] is not None, cols["latencies"] is not None, cols["errors"] is not None)
    starts = cols["start_times"]
    if starts is not None:
        t = [latency_s(path, s, f"{where}start_times[{i}]") for i, s in enumerate(starts)]
        t0 = min(t) if t else 0.0
        arrivals = [x - t0 for x in t]
    else:
        arrivals = [0.0] * n
    records = [_one(path, cols, i, arrivals[i], where) for i in range(n)]
    untimed = [r for r in records if r.ok and r.first_token_s is None]
    notes += no_ttft_notes(len(untimed), sum(1 for r in untimed if r.num_output_tokens == 0))
    return records, notes


def no_ttft_notes(unknown: int, empty: int) -> list[str]:
    """The notes on successful requests with ttft 0: ``empty`` of the ``unknown`` produced no output token (the file
    counts them completed, yet they served nothing: a streamed request with no chunk), the rest have output but no
    first-token time (a non-streaming run). Neither has a TTFT, so neither is ever good under a TTFT SLO."""
    out = []
    if empty:
        out.append(f"{empty} request(s) the file counts as successful produced no output token (output_len 0, ttft 0): "
                   "completed, but with no first token they are never good under a TTFT SLO")
    if unknown - empty:
        out.append(f"{unknown - empty} successful requests have ttft 0 with output (non-streaming): their TTFT is "
                   "unknown and fails any TTFT SLO")
    return out


def _one(path: str, cols: dict[str, list[Any] | None], i: int, arrival: float, where: str) -> RequestRecord:
    n_in = count(path, cols["input_lens"][i], f"{where}input_lens[{i}]")
    n_out = count(path, cols["output_lens"][i], f"{where}output_lens[{i}]")
    ttft = latency_s(path, cols["ttfts"][i], f"{where}ttfts[{i}]")
    gaps_raw = cols["itls"][i]
    if not isinstance(gaps_raw, list):
        raise FormatError(path, f"expected a list of gaps, found {gaps_raw!r}", f"{where}itls[{i}]")
    gaps = [latency_s(path, g, f"{where}itls[{i}][{j}]") for j, g in enumerate(gaps_raw)]
    lat = None if cols["latencies"] is None else latency_s(path, cols["latencies"][i], f"{where}latencies[{i}]")
    err = _error(cols["errors"], i, ttft, n_out)
    rid = str(i)
    if err is not None:
        finish = arrival + lat if lat else None
        return RequestRecord(rid, arrival, n_in, n_out, None, finish, None, error=err)
    if ttft == 0.0 and not gaps:
        finish = arrival + lat if lat else None
        return RequestRecord(rid, arrival, n_in, n_out, None, finish, None)
    first = arrival + ttft
    chunks = first + np.concatenate(([0.0], np.cumsum(gaps)))
    if lat is not None:
        if lat + 1e-9 < ttft:
            raise FormatError(path, f"latency {lat} s is shorter than the TTFT {ttft} s", f"{where}latencies[{i}]")
        finish = arrival + lat
    else:
        finish = float(chunks[-1])
    return RequestRecord(rid, arrival, n_in, n_out, first, finish, chunks)


def _error(errors: list[Any] | None, i: int, ttft: float, n_out: int) -> str | None:
    if errors is None:
        return (
            "no output (ttft 0 and output_len 0; inferred, the file has no errors array)"
            if ttft == 0.0 and n_out == 0
            else None
        )
    e = errors[i]
    if e is None or e == "":
        return None
    return str(e)


#: the quantiles (0–1) a run's per-request lengths are kept at when only its lengths are in the file
_LENGTH_QS = tuple(i / 20 for i in range(21))


def length_quantiles(path: str, obj: dict[str, Any], where: str, completed: int | None) -> dict[str, list[list[float]]]:
    """``{"input_len_quantiles": [[q, tokens], ...], "output_len_quantiles": ...}`` (q = 0, 0.05, …, 1, numpy's linear
    rule) from a result's ``input_lens`` and ``output_lens`` when it keeps them without the rest of the detail arrays
    (InferenceX's bench_serving keeps the lengths, drops ttfts and itls); {} unless both hold one whole count per
    completed request (with failed requests among them and no ``errors`` to tell which, their lengths cannot be
    told from the completed ones').

    Raises:
        FormatError: a length that is not a whole count ≥ 0, naming the entry.
    """
    out: dict[str, list[list[float]]] = {}
    cols = {k: obj.get(k) for k in ("input_lens", "output_lens")}
    if completed is None or not all(isinstance(c, list) and len(c) == completed > 0 for c in cols.values()):
        return out
    for key, col in cols.items():
        vals = np.array([count(path, v, f"{where}{key}[{i}]") for i, v in enumerate(col)], dtype=float)
        qs = np.quantile(vals, _LENGTH_QS)
        out[f"{key[:-5]}_len_quantiles"] = [[q, float(v)] for q, v in zip(_LENGTH_QS, qs)]
    return out
