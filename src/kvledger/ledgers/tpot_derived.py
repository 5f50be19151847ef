"""Goodput bounds for a TPOT SLO from E2E and TTFT percentiles, for reports whose own TPOT field is not to be trusted.

inference-perf's ``time_per_output_token`` disagrees with the same file's TTFT, E2E and output length (kubecon NA 2025
baseline at 1 req/s: 3.47 ms against (480.5 − 31.1)/(63.15 − 1) = 7.23 ms, below the 4.79 ms an H100 needs to read
Llama-3.1-8B's weights once; docs/validation.md). So a TPOT SLO on such a report is judged on the per-request
(E2E − TTFT)/(output − 1) ≤ s, that is E2E − TTFT ≤ c with c = s·(output − 1), from the two marginal distributions
(their joint one is not in the file). For any split point t:

* a request with E2E ≤ c + t and TTFT ≥ t meets it, so at least #{E2E ≤ c + t} − #{TTFT < t} do;
* a request that meets it has TTFT > t or E2E ≤ c + t, so at most #{E2E ≤ c + t} + #{TTFT > t} do.

t runs over TTFT's stated points (min, percentiles, max). With numpy's 'linear' rule a percentile v_p lies between
the order statistics x₍ₖ₎ and x₍ₖ₊₁₎ (k = ⌊p/100·(n − 1)⌋), so at most k + 1 values are below v_p and at least
k + 1 are ≤ it. The E2E counts are ``percentile_bounds.metric_bounds``'. With a varying output length, c takes the
shortest output for the lower bound and the longest for the upper one. At t = TTFT min the lower bound is
#{E2E ≤ c + TTFT_min}; at t = TTFT max the upper one is #{E2E ≤ c + TTFT_max}.

A percentile of the derived TPOT (the p90 the cost ledger's load check reads, ``ledgers.capacity_basis``) is bounded
by the same counts: with v_p between x₍ₖ₎ and x₍ₖ₊₁₎ as above, v_p ≤ x once at least k + 2 requests (k + 1 when
p/100·(n − 1) is whole) surely meet x, and v_p > x while at most k can. Both counts rise with x, so each bound is found
by bisection on x.
"""

from __future__ import annotations

import math
from typing import Any

from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.percentile_bounds import metric_bounds
from kvledger.units import fmt_duration

__all__ = ["tpot_derivation", "derived_tpot_bounds", "derived_tpot_note", "derived_tpot_percentile"]

_BISECTIONS = 60  # halvings of [0, x_max]: the bound is within x_max/2^60 s of the step it brackets


def tpot_derivation(agg: AggregateRun) -> dict[str, Any] | None:
    """The reader's ``metadata.extra["tpot_from_e2e"]`` (output lengths and their source) when ``agg``'s TPOT is to be
    judged as (E2E − TTFT)/(output − 1) instead of its own field (inference-perf), else None; the one test every
    TPOT reader of an aggregate applies (goodput, the load check)."""
    d = agg.metadata.extra.get("tpot_from_e2e")
    return d if d and "e2e" in agg.metrics and "ttft" in agg.metrics else None


def derived_tpot_bounds(agg: AggregateRun, d: dict[str, Any], threshold_s: float, n: int) -> tuple[int, int, str]:
    """(lower, upper) count of the ``n`` completed requests whose (E2E − TTFT)/(output − 1) ≤ ``threshold_s``, and
    the reason (module docstring); ``d`` is the reader's ``metadata.extra["tpot_from_e2e"]``."""
    (out_lo, out_hi), e2e, ttft = d["output_tokens"], agg.metrics["e2e"], agg.metrics["ttft"]
    c_lo, c_hi = threshold_s * max(out_lo - 1, 0), threshold_s * max(out_hi - 1, 0)
    size = ttft.count if ttft.count is not None else n
    lower, upper = 0, n
    for p, t in ttft.points():
        k = math.floor(p / 100.0 * (size - 1))
        below = 0 if p == 0.0 else min(n, k + 1)  # at most this many TTFTs < t
        above = 0 if p == 100.0 else max(n - (k + 1), 0)  # at most this many TTFTs > t
        lower = max(lower, metric_bounds(e2e, c_lo + t, n)[0] - below)
        upper = min(upper, metric_bounds(e2e, c_hi + t, n)[1] + above)
    return lower, max(upper, lower), derived_tpot_note(agg, d)


def derived_tpot_note(agg: AggregateRun, d: dict[str, Any]) -> str:
    """What a TPOT judged on (E2E − TTFT)/(output − 1) rests on, with the derived mean and the file's own field
    (goodput's reason for a TPOT SLO, and the load check's note)."""
    e2e, ttft = agg.metrics["e2e"], agg.metrics["ttft"]
    out_mean = d.get("output_mean") or 0.0
    mean = (e2e.mean_s - ttft.mean_s) / (out_mean - 1) \
        if e2e.mean_s is not None and ttft.mean_s is not None and out_mean > 1 else None
    shown = agg.metrics.get("tpot")
    return (f"TPOT judged as (E2E − TTFT)/(output − 1), output from {d['source']}: bounded from the E2E and TTFT "
            "percentiles (ledgers/tpot_derived.py)"
            + (f"; derived mean {fmt_duration(mean)}" if mean is not None else "") + _counted_clause(d)
            + (f"; the file's time_per_output_token (mean {fmt_duration(shown.mean_s)}) is shown only: it disagrees "
               "with its own TTFT and E2E" if shown is not None and shown.mean_s is not None else ""))


def _counted_clause(d: dict[str, Any]) -> str:
    """Where the output length TPOT is derived from (the fixed length generated under ignore_eos) is not the file's
    counted ``output_len`` mean: which figure is used where and why; else ""."""
    counted, out_mean = d.get("counted_mean"), d.get("output_mean") or 0.0
    if not isinstance(counted, (int, float)) or counted <= 0 or abs(out_mean / counted - 1) <= 0.01:
        return ""
    return (f"; the file's output_len (mean {counted:,.2f}) re-tokenizes each response's text, which under-counts what "
            f"the engine generated: TPOT divides by the {out_mean:g} generated, token goodput keeps the file's count")


def derived_tpot_percentile(agg: AggregateRun, d: dict[str, Any], p: float,
                            n: int) -> tuple[float | None, float | None]:
    """(lower, upper) bound, s, on the ``p``-th percentile of the ``n`` completed requests' (E2E − TTFT)/(output − 1)
    (module docstring); None where the file's points cannot bound it (no E2E max, or one-token outputs)."""
    if n < 1:
        return None, None
    h = p / 100.0 * (n - 1)
    k = math.floor(h)
    sure = min(n, k + 1 if h == k else k + 2)  # this many meeting x put v_p ≤ x
    e2e, ttft = agg.metrics["e2e"], agg.metrics["ttft"]
    t_lo = ttft.min_s if ttft.min_s is not None else 0.0
    out_lo = d["output_tokens"][0]
    if e2e.max_s is None or out_lo <= 1:
        return None, None
    # every request's derived TPOT is ≤ x_max (the 1e-9 keeps x·(output − 1) + TTFT min ≥ E2E max after rounding)
    x_max = max(e2e.max_s - t_lo, 0.0) / (out_lo - 1) * (1.0 + 1e-9)
    lo = _edge(lambda x: derived_tpot_bounds(agg, d, x, n)[1] > k, x_max)  # below lo[1], v_p > x: v_p ≥ lo[0]
    hi = _edge(lambda x: derived_tpot_bounds(agg, d, x, n)[0] >= sure, x_max)  # at hi[1], v_p ≤ hi[1]
    return (None if lo is None else lo[0]), (None if hi is None else hi[1])


def _edge(holds: Any, x_max: float) -> tuple[float, float] | None:
    """(a, b): ``holds`` (monotone in x) is false at a and true at b, b − a ≤ x_max/2^60, within [0, x_max]; (0, 0)
    when it holds at 0, None when it never holds."""
    if not holds(x_max):
        return None
    if holds(0.0):
        return 0.0, 0.0
    a, b = 0.0, x_max
    for _ in range(_BISECTIONS):
        mid = (a + b) / 2.0
        if mid in (a, b):
            break
        a, b = (a, mid) if holds(mid) else (mid, b)
    return a, b
