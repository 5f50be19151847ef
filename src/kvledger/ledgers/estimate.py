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
from kvledger.records import WARNING_PREFIX
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
        if derived is None:
            _judgeable(agg, slo.itl_key if metric == "itl" else metric, metric, notes)
        lo, hi, why = derived_tpot_bounds(agg, derived, threshold, n_ok) if derived else \
            metric_bounds(m, threshold, n_ok)
        if metric == "itl" and slo.itl_stat == "mean":
            lo, hi, why = _mean_gap_bounds(agg, threshold, n_ok, (lo, hi, why))
        if m is None and derived is None and (lo, hi) == (0, n_ok) and n_ok:
            _unjudged(agg, slo.itl_key if metric == "itl" else metric)
        lo_sum_missing += n_ok - lo
        upper = min(upper, hi)
        name = slo.itl_key if metric == "itl" else metric
        if n_ok:  # of no completed request there is nothing to bound (goodput_result says so)
            notes.append(f"{name} ≤ {fmt_duration(threshold)}: between {lo:,} and {hi:,} of {n_ok:,} completed "
                         f"requests ({why})")
    lower = max(0, n_ok - lo_sum_missing)
    if len(slo.constraints()) > 1 and n_ok:
        notes.append("joint bound: at least n − Σ(n − lower_m) and at most min(upper_m) requests meet every SLO")
    notes.append("estimate from percentiles only (no per-request data): num_good and attainment are lower bounds")
    duration = agg.duration_s or agg.metadata.duration_s
    if duration is not None and duration <= 0 and n_ok:
        raise FormatError(agg.metadata.source, f"the file states a duration of {duration:g} s, which no run lasts, and "
                          "keeps no per-request times to take one from: no rate per second can be given. Give the "
                          "file its run's duration", "duration")
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
    if lower == 0 and n_ok:
        notes.append("the lower bound is 0 good requests: the multiplier (throughput ÷ goodput) has no finite upper "
                     "bound")
    return res


def _judgeable(agg: AggregateRun, name: str, metric: str, notes: list[str]) -> None:
    """Refuse an SLO on a metric the reader found missing (``metadata.extra["missing_metrics"]``: metric → the field),
    which would otherwise be bounded at 0 … n, an answer of nothing; warn (first among the notes) when TPOT is judged
    on a TPOT field the reader does not trust (``untrusted_tpot_field``: why) because nothing else is stated.

    Raises:
        FormatError: naming the missing field and what to do.
    """
    missing = agg.metadata.extra.get("missing_metrics") or {}
    if metric in missing:
        raise FormatError(agg.metadata.source, f"missing {missing[metric]}: the SLO's {name} cannot be judged on this "
                          f"file; drop {name} from --slo, or give the run's report with that field")
    why = agg.metadata.extra.get("untrusted_tpot_field")
    if metric == "tpot" and why:
        notes.insert(0, f"{WARNING_PREFIX}TPOT is judged on the file's own TPOT field, as the file states no E2E to "
                        f"judge (E2E − TTFT)/(output − 1) on; that field {why}, so the count meeting TPOT may be too "
                        "high")


_STATISTICS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E latency", "itl": "ITL (gap between chunks)"}


def _unjudged(agg: AggregateRun, name: str) -> None:
    """Refuse an SLO on a metric of which the file states no statistics (nothing bounds it: 0 … n requests, an answer
    of nothing), naming the SLO keys the file can judge.

    Raises:
        FormatError: the metric missing, the keys the file can judge, and what to do.
    """
    metric = "itl" if name.startswith("itl") else name
    can = [k for k in ("ttft", "tpot", "e2e") if k in agg.metrics or (k == "tpot" and tpot_derivation(agg))]
    itl = agg.metrics.get("itl")
    can += ["itl_max", "itl_mean", "itl_pQ"] if itl is not None and itl.weighting != "request" else []
    raise FormatError(agg.metadata.source, f"missing {_STATISTICS[metric]} statistics: the SLO's {name} cannot be "
                      f"judged on this file (it states summaries of {', '.join(agg.metrics) or 'no latency'}); the "
                      f"SLO keys it can judge: {', '.join(can) or 'none'}. Drop {name} from --slo, or give the run's "
                      "per-request export")


def raise_unknown(agg: AggregateRun) -> None:
    notes = "; ".join(agg.metadata.definitions)
    raise FormatError(agg.metadata.source, "the file states neither per-request data nor a completed-request count, so "
                                           "no goodput "
                      f"can be computed or bounded from it (reader notes: {notes}). Use the tool's per-request export "
                      "(vLLM --save-detailed, AIPerf profile_export.jsonl, GenAI-Perf profile_export.json, llmperf "
                      "individual_responses)")


def _mean_gap_bounds(agg: AggregateRun, threshold: float, n_ok: int, gaps: tuple[int, int, str]
                     ) -> tuple[int, int, str]:
    """Bounds on the requests whose mean gap between chunks is ≤ ``threshold``, tightened by a per-request TPOT
    summary (AIPerf's inter_token_latency): a request's mean gap (last − first)/(chunks − 1) is at least its TPOT
    (last − first)/(output − 1), where every chunk carries at least one token (vLLM streams so), equal when each
    carries one. So at most the requests with TPOT ≤ the threshold meet it, and exactly those when the file's chunk
    gaps number its token gaps (Σ(output − 1)); more chunk gaps than token gaps break the premise: no TPOT bound."""
    lo, hi, why = gaps
    tp, pooled = agg.metrics.get("tpot"), agg.metrics.get("itl")
    if tp is None or tp.weighting != "request" or derived_or_none(agg):
        return lo, hi, why
    t_lo, t_hi, t_why = metric_bounds(tp, threshold, n_ok)
    token_gaps = None if agg.total_output_tokens is None else agg.total_output_tokens - n_ok
    chunk_gaps = pooled.count if pooled is not None and pooled.weighting == "gap" else None
    n_chunk, n_token = (f"{x:,}" if x is not None else "unknown" for x in (chunk_gaps, token_gaps))
    if token_gaps is None or chunk_gaps is None or chunk_gaps > token_gaps:
        return lo, hi, (f"pooled gaps: {why}; the per-request TPOT bounds it neither way ({n_chunk} chunk gaps "
                        f"against {n_token} token gaps: some chunks may carry no token)")
    hi = min(hi, t_hi)
    lo = max(lo, t_lo) if chunk_gaps == token_gaps else lo
    said = (f"{n_chunk} chunk gaps for {n_token} token gaps: one token a chunk, so a request's mean gap is its TPOT"
            if chunk_gaps == token_gaps else f"{n_chunk} chunk gaps against {n_token} token gaps: a chunk may carry "
            "several tokens, so the TPOT bounds from above only")
    return lo, hi, f"pooled gaps: {why}; per-request TPOT, a floor under each request's mean gap: {t_why}; {said}"


def derived_or_none(agg: AggregateRun) -> bool:
    """True when the file's TPOT field is not trusted (``tpot_derivation``: it disagrees with its TTFT and E2E)."""
    return tpot_derivation(agg) is not None
