"""The bounded goodput estimate for files that kept only percentiles (no per-request records).

For one metric summarised over n requests with numpy's 'linear' percentile rule, a
reported percentile v_p satisfies x₍ₖ₎ ≤ v_p ≤ x₍ₖ₊₁₎ with k = ⌊p/100·(n−1)⌋ (0-based
order statistics). Hence, for a threshold s:

* v_p ≤ s ⇒ at least ⌊p/100·(n−1)⌋ + 1 requests meet s (min as p0 gives 1, max as p100 gives n);
* v_p > s ⇒ at most ⌈p/100·(n−1)⌉ requests meet s.

Across several SLOs the joint count is bounded by Fréchet's inequalities: at least
n − Σ(n − Lₘ) and at most min Uₘ. Distributions over pooled gaps or tokens bound requests
only through their min and max. Failed requests are never good. Everything here is
flagged ``estimate=True``; ``num_good``/``attainment`` are the lower bounds. A TPOT SLO on a report whose TPOT field
disagrees with its own TTFT and E2E (inference-perf) is bounded from those instead (``ledgers.tpot_derived``).
"""

from __future__ import annotations

from kvledger.errors import FormatError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.goodput_result import GoodputResult, goodput_result
from kvledger.ledgers.percentile_bounds import metric_bounds
from kvledger.ledgers.slo import SLO
from kvledger.ledgers.tpot_derived import derived_tpot_bounds, tpot_derivation
from kvledger.units import fmt_duration

__all__ = ["estimate_goodput", "metric_bounds"]


def estimate_goodput(agg: AggregateRun, slo: SLO) -> GoodputResult:
    """Bounds on goodput from an aggregate-only run; rates use the file's duration.

    ``num_good``/``attainment``/``goodput_req_per_s`` are the lower bounds, ``num_good_upper``
    and ``attainment_upper`` the upper ones; the effective-cost multiplier is then an upper bound.
    """
    notes = list(agg.metadata.definitions)
    n_ok = agg.num_completed
    if n_ok is None:
        raise_unknown(agg)
    n_fail = agg.num_failed or 0
    lo_sum_missing, upper = 0, n_ok
    for metric, threshold in slo.constraints():
        m = agg.metrics.get(metric)
        if metric == "itl" and m is not None and m.weighting == "request":
            m = None  # no tool reports per-request gap statistics
        derived = tpot_derivation(agg) if metric == "tpot" else None
        lo, hi, why = derived_tpot_bounds(agg, derived, threshold, n_ok) if derived else \
            metric_bounds(m, threshold, n_ok)
        lo_sum_missing += n_ok - lo
        upper = min(upper, hi)
        name = slo.itl_key if metric == "itl" else metric
        notes.append(f"{name} ≤ {fmt_duration(threshold)}: between {lo:,} and {hi:,} of {n_ok:,} completed requests "
                     f"({why})")
    lower = max(0, n_ok - lo_sum_missing)
    if len(slo.constraints()) > 1:
        notes.append("joint bound: at least n − Σ(n − lower_m) and at most min(upper_m) requests meet every SLO")
    notes.append("estimate from percentiles only (no per-request data): num_good and attainment are lower bounds")
    duration = agg.duration_s or agg.metadata.duration_s
    res = goodput_result(agg, slo, float(n_ok + n_fail), float(n_ok), float(lower), duration,
                  "stated by the file" if duration else "unknown: the file states no duration", notes, estimate=True)
    res.num_good_upper = upper
    n_all = n_ok + n_fail
    res.attainment_upper = upper / n_all if n_all else 0.0
    res.tool_goodput = agg.tool_goodput
    if duration and agg.total_output_tokens is not None and n_ok:
        res.goodput_output_tok_per_s = agg.total_output_tokens * (lower / n_ok) / duration
        res.throughput_output_tok_per_s = agg.total_output_tokens / duration
        notes.append("token goodput assumes good requests have the mean output length")
    if duration and agg.total_input_tokens is not None and n_ok:
        res.goodput_input_tok_per_s = agg.total_input_tokens * (lower / n_ok) / duration
        res.throughput_input_tok_per_s = agg.total_input_tokens / duration
    if agg.num_failed is None:
        notes.append("the file states no failure count: failures counted as 0")
    if lower == 0:
        notes.append("the lower bound is 0 good requests: the multiplier (throughput ÷ goodput) has no finite upper "
                     "bound")
    return res


def raise_unknown(agg: AggregateRun) -> None:
    notes = "; ".join(agg.metadata.definitions)
    raise FormatError(agg.metadata.source, "the file states neither per-request data nor a completed-request count, so "
                                           "no goodput "
                      f"can be computed or bounded from it (reader notes: {notes}). Use the tool's per-request export "
                      "(vLLM --save-detailed, AIPerf profile_export.jsonl, GenAI-Perf profile_export.json, llmperf "
                      "individual_responses)")
