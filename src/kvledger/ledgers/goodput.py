"""Goodput under latency SLOs: which requests are good, goodput in req/s and tok/s, attainment, effective-cost
multiplier.

Definitions (DistServe, Zhong et al. OSDI 2024 §1–2; vLLM ``benchmarks/serve.py``
``calculate_metrics``; AIPerf goodput docs): a request is **good** when it completed
without error and meets every SLO given (value ≤ threshold). Over a run of duration D:

* goodput_req_per_s = good ÷ D (vLLM ``request_goodput``, AIPerf ``goodput``);
* throughput_req_per_s = completed ÷ D (vLLM ``request_throughput``);
* attainment = good ÷ all requests, failed ones included (AIPerf ``good_request_fraction``);
* effective-cost multiplier = throughput ÷ goodput: what you pay for over what is usable
  (DistServe's blog example: 10 req/s served, 3 within SLO → 3.3×).

This is *benchmark goodput* at one offered load; DistServe's *goodput* (the highest load
meeting an attainment target) is ``kvledger.ledgers.boundary``. Files with only
percentiles go to ``kvledger.ledgers.estimate``; :func:`goodput` dispatches.
"""

from __future__ import annotations

import numpy as np

from kvledger.errors import FormatError, InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.columns import Columns, columns_from
from kvledger.ledgers.estimate import estimate_goodput
from kvledger.ledgers.goodput_result import GoodputResult, goodput_result
from kvledger.ledgers.slo import SLO
from kvledger.records import RunRecords

__all__ = ["GoodputResult", "goodput", "goodput_of_records", "run_duration_s", "metric_values", "clock_slack_s"]


def goodput(run: RunRecords | AggregateRun, slo: SLO) -> GoodputResult:
    """Exact goodput for per-request runs, the bounded estimate for aggregate-only runs."""
    from kvledger.invariants import check_goodput_result

    if isinstance(run, AggregateRun):
        return check_goodput_result(estimate_goodput(run, slo))
    return check_goodput_result(goodput_of_records(run, slo))


def run_duration_s(run: RunRecords) -> tuple[float | None, str]:
    """(duration, how it was obtained): the file's stated duration, else last finish − first arrival.

    Returns None when the records share no clock (llmperf) and the file states no duration,
    or when the span is zero. A stated duration of 0 (no run lasts none) gives way to the records' span, said so.

    Raises:
        FormatError: a stated duration of 0 where the records give no span to take instead (no shared clock, or
            every request at one instant) and some request completed.
    """
    md = run.metadata
    stated = md.duration_s
    if stated and md.extra.get("duration_replaced_s") is not None:  # evidence.plausibility: the file's was too short
        return stated, (f"last finish − first arrival of the records (the file's {md.extra['duration_replaced_s']:g} "
                        "s is shorter than them)")
    if stated:
        return stated, f"stated by the {md.source_format} file"
    said = f"the {md.source_format} file states a duration of {stated:g} s, which no run lasts" if stated == 0 else ""
    span = run.span_s if md.extra.get("shared_clock") is not False else 0.0
    if said and span > 0:
        return span, f"last finish − first arrival of the records ({said})"
    if said and any(r.error is None and r.finish_s is not None for r in run.records):
        raise FormatError(md.source, f"{said}, and its requests give no span to take instead ("
                          + ("they share no clock" if md.extra.get("shared_clock") is False else
                             "they all arrive and finish at one instant")
                          + "): no rate per second can be given. Give the file its run's duration", "duration")
    if md.extra.get("shared_clock") is False:
        return None, "unknown: the requests share no clock and the file states no duration"
    return (span if span > 0 else None), "last finish − first arrival of the records"


def metric_values(cols: Columns, slo: SLO) -> dict[str, np.ndarray]:
    """Per-request value of each constrained metric, s (NaN where unknown)."""
    out = {}
    for metric, _ in slo.constraints():
        if metric == "ttft":
            out[metric] = cols.ttft_s()
        elif metric == "tpot":
            out[metric] = cols.tpot_s()
        elif metric == "e2e":
            out[metric] = cols.e2e_s()
        else:
            out[metric] = cols.itl_stat_s(slo.itl_stat)
    return out


def clock_slack_s(cols: Columns) -> np.ndarray:
    """Per request, the float rounding a latency rebuilt from absolute times can carry, s: 4 ulp of the largest time.

    Records keep arrival, first-token and finish times, so a file's TTFT of 0.3 s sent at 3.7 s comes back as
    (3.7 + 0.3) − 3.7 = 0.30000000000000027. Without this slack a value the file states exactly at the limit fails
    the ≤ that vLLM ``calculate_metrics`` applies to the file's own numbers; the slack (about 1e-15 s at 1 s,
    1e-12 s at an hour) is far below any clock a benchmark reads.
    """
    scale = np.fmax(np.fmax(np.abs(cols.arrival_s), np.abs(cols.finish_s)), np.abs(cols.first_token_s))
    return 4.0 * np.finfo(np.float64).eps * np.nan_to_num(scale, nan=0.0)


def _check(run: RunRecords, cols: Columns, slo: SLO, values: dict[str, np.ndarray], notes: list[str]) -> None:
    ok = cols.ok
    for name, v in (("TTFT", cols.ttft_s()), ("E2E", cols.e2e_s()), ("finish − first token",
                                                                     cols.finish_s - cols.first_token_s)):
        bad = np.flatnonzero(ok & (v < 0))
        if bad.size:
            rid = run.records[int(bad[0])].request_id
            raise InputError(f"{run.metadata.source}: request {rid!r} has a negative {name} ({v[bad[0]]:.6g} s); "
                             f"{bad.size} such requests — the records are inconsistent")
    if slo.itl_s is not None and cols.has_chunks is not None and not cols.has_chunks[ok].any() and ok.any():
        raise InputError(f"{run.metadata.source}: an ITL SLO needs per-chunk times, and this "
                         f"{run.metadata.source_format} run has none; "
                         "use tpot (mean time per output token) instead")
    for metric, v in values.items():
        missing = int(np.count_nonzero(ok & np.isnan(v)))
        if missing and missing == int(ok.sum()):
            raise InputError(f"{run.metadata.source}: no completed request has a {metric} value (e.g. non-streaming "
                             f"runs have no first-token time); drop the {metric} SLO")
        if missing:
            notes.append(f"{missing} completed requests have no {metric} value and count as not good")


def goodput_of_records(run: RunRecords, slo: SLO) -> GoodputResult:
    """Exact goodput of a per-request run (vectorised; one million records well under 3 s).

    Raises:
        InputError: negative latencies, an ITL SLO on a run without chunk times, or an SLO metric
            no completed request has.
    """
    cols = columns_from(run, with_chunks=slo.itl_s is not None)
    values = metric_values(cols, slo)
    notes = list(run.metadata.definitions)
    _check(run, cols, slo, values, notes)
    good = cols.ok.copy()
    missed = {}
    slack = clock_slack_s(cols)
    for metric, threshold in slo.constraints():
        meets = values[metric] <= threshold + slack  # NaN compares False: a missing metric is not good
        missed[metric] = int(np.count_nonzero(cols.ok & ~meets))
        good &= meets
    if not slo.constraints():
        notes.append("no SLO given: every completed request counts as good (goodput = throughput)")
    w = cols.weight
    n_all, n_ok, n_good = float(w.sum()), float(w[cols.ok].sum()), float(w[good].sum())
    duration, dsrc = run_duration_s(run)
    res = goodput_result(run, slo, n_all, n_ok, n_good, duration, dsrc, notes)
    res.num_missed = missed
    res.estimate = "sample_weights" in run.metadata.extra
    res.good_mask = good
    res.request_ids = run.request_ids()
    if duration:
        out_tok, in_tok = cols.num_output_tokens * w, cols.num_prompt_tokens * w
        res.goodput_output_tok_per_s = float(out_tok[good].sum()) / duration
        res.throughput_output_tok_per_s = float(out_tok[cols.ok].sum()) / duration
        res.goodput_input_tok_per_s = float(in_tok[good].sum()) / duration
        res.throughput_input_tok_per_s = float(in_tok[cols.ok].sum()) / duration
    return res
