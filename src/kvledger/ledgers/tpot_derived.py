"""Goodput bounds for a TPOT SLO from E2E, TTFT and output-length percentiles, for reports whose own TPOT field is not
to be trusted.

inference-perf's ``time_per_output_token`` disagrees with the same file's TTFT, E2E and output length (kubecon NA 2025
baseline at 1 req/s: 3.47 ms against (480.5 − 31.1)/(63.15 − 1) = 7.23 ms, below the 4.79 ms an H100 needs to read
Llama-3.1-8B's weights once). So a TPOT SLO on such a report is judged on the per-request
(E2E − TTFT)/(output − 1) ≤ s, that is E2E − TTFT ≤ s·(output − 1), from three marginal distributions (their joint one
is not in the file). Union bounds over a split point t of TTFT and o of the output length:

* a request with output ≥ o, TTFT ≥ t and E2E ≤ s·(o − 1) + t meets it (E2E − TTFT ≤ s·(o − 1) ≤ s·(output − 1)), so
  at least #{E2E ≤ s·(o − 1) + t} − #{TTFT < t} − #{output < o} do (o ≥ 1 only);
* a request that meets it has output > o, TTFT > t or E2E ≤ s·(max(o, 1) − 1) + t, so at most
  #{E2E ≤ s·(max(o, 1) − 1) + t} + #{TTFT > t} + #{output > o} do.

t runs over TTFT's stated points (min, percentiles, max) and o over the output length's (the client config's one length
under ignore_eos, else the file's ``output_len`` min, percentiles, max); the best of each is kept. So a file whose
shortest output is 0 tokens (a response the client re-tokenized to nothing) is not thereby bounded at 0 good requests:
with o = p0.1 = 31.7 tokens at most 4 of 3,707 requests are shorter (⌊0.001 × 3,706⌋ + 1), and the rest, with
E2E ≤ max 0.891 s, have TPOT ≤ 0.891/30.7 = 29 ms. With numpy's 'linear' rule a percentile v_p lies between the order
statistics x₍ₖ₎ and x₍ₖ₊₁₎ (k = ⌊p/100·(n − 1)⌋), so at most k + 1 values are below v_p and at most n − k − 1 above
it (none below the min nor above the max). The E2E counts are ``percentile_bounds.metric_bounds``'. A file without
TTFT statistics is bounded with TTFT ≥ 0 alone (t = 0, nothing below it, any number above it): the lower bound uses
E2E/(output − 1), which no request's TPOT exceeds, and the upper bound says nothing.

A percentile of the derived TPOT (the p90 the cost ledger's load check reads, ``ledgers.capacity_basis``) is bounded
by the same counts: with v_p between x₍ₖ₎ and x₍ₖ₊₁₎ as above, v_p ≤ x once at least k + 2 requests (k + 1 when
p/100·(n − 1) is whole) surely meet x, and v_p > x while at most k can. Both counts rise with x and stop changing
once s·(o − 1) + TTFT min reaches the E2E max for the shortest stated output o > 1, so each bound is found by
bisection on x below that.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.percentile_bounds import metric_bounds
from kvledger.units import fmt_duration

__all__ = ["tpot_derivation", "derived_tpot_bounds", "derived_tpot_note", "derived_tpot_percentile", "output_points"]

_BISECTIONS = 60  # halvings of [0, x_max]: the bound is within x_max/2^60 s of the step it brackets


def tpot_derivation(agg: AggregateRun) -> dict[str, Any] | None:
    """The reader's ``metadata.extra["tpot_from_e2e"]`` (output lengths and their source) when ``agg``'s TPOT is to be
    judged as (E2E − TTFT)/(output − 1) instead of its own field (inference-perf), else None; the one test every
    TPOT reader of an aggregate applies (goodput, the load check). TTFT may be missing (then taken as ≥ 0)."""
    d = agg.metadata.extra.get("tpot_from_e2e")
    return d if d and "e2e" in agg.metrics else None


def _terms(points: list[tuple[float, float]], size: int, n: int) -> list[tuple[float, int, int]]:
    """(value, at most this many of the ``n`` below it, at most this many above it) per stated point of a per-request
    distribution summarised over ``size`` requests (module docstring)."""
    out = []
    for p, v in points:
        k = math.floor(p / 100.0 * (size - 1))
        out.append((v, 0 if p == 0.0 else min(n, k + 1), 0 if p == 100.0 else max(n - (k + 1), 0)))
    return out


def output_points(d: dict[str, Any]) -> list[tuple[float, float]]:
    """The output length's stated (percentile, tokens) points: the reader's ``output_points``, else its min … max."""
    pts = d.get("output_points")
    if pts:
        return [(float(p), float(v)) for p, v in pts]
    lo, hi = d["output_tokens"]
    return [(0.0, float(lo)), (100.0, float(hi))]


def derived_tpot_bounds(agg: AggregateRun, d: dict[str, Any], threshold_s: float, n: int) -> tuple[int, int, str]:
    """(lower, upper) count of the ``n`` completed requests whose (E2E − TTFT)/(output − 1) ≤ ``threshold_s``, and
    the reason (module docstring); ``d`` is the reader's ``metadata.extra["tpot_from_e2e"]``."""
    lower, upper = _counts(agg, d, n)(threshold_s)
    return lower, upper, derived_tpot_note(agg, d)


def _counts(agg: AggregateRun, d: dict[str, Any], n: int) -> Callable[[float], tuple[int, int]]:
    """threshold → (lower, upper) count of the ``n`` requests meeting it (module docstring), the stated points read
    once (the percentile bounds evaluate it some hundred times)."""
    e2e, ttft = agg.metrics["e2e"], agg.metrics.get("ttft")
    ts = [(0.0, 0, n)] if ttft is None else _terms(ttft.points(), ttft.count if ttft.count is not None else n, n)
    outs = _terms(output_points(d), n, n)

    def count(threshold_s: float) -> tuple[int, int]:
        lower, upper = 0, n
        for o, o_below, o_above in outs:
            c_lo, c_hi = threshold_s * (o - 1), threshold_s * (max(o, 1.0) - 1)
            for t, t_below, t_above in ts:
                if o >= 1:
                    lower = max(lower, metric_bounds(e2e, c_lo + t, n)[0] - t_below - o_below)
                upper = min(upper, metric_bounds(e2e, c_hi + t, n)[1] + t_above + o_above)
        return lower, max(upper, lower)

    return count


def derived_tpot_note(agg: AggregateRun, d: dict[str, Any]) -> str:
    """What a TPOT judged on (E2E − TTFT)/(output − 1) rests on, with the derived mean and the file's own field
    (goodput's reason for a TPOT SLO, and the load check's note)."""
    e2e, ttft = agg.metrics["e2e"], agg.metrics.get("ttft")
    out_mean = d.get("output_mean") or 0.0
    mean = (e2e.mean_s - ttft.mean_s) / (out_mean - 1) \
        if e2e.mean_s is not None and ttft is not None and ttft.mean_s is not None and out_mean > 1 else None
    shown = agg.metrics.get("tpot")
    parts = ["E2E", *(["TTFT"] if ttft is not None else []), *(["output-length"] if len(output_points(d)) > 2 else [])]
    stated = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
    return (f"TPOT judged as (E2E − TTFT)/(output − 1), output from {d['source']}: bounded from the {stated} "
            "percentiles (ledgers/tpot_derived.py)"
            + ("; the file states no TTFT: each request's TTFT is taken as ≥ 0, so TPOT ≤ E2E/(output − 1) bounds the "
               "good requests from below only" if ttft is None else "")
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
    (module docstring); None where the file's points cannot bound it (no E2E max, or no stated output above one
    token)."""
    if n < 1:
        return None, None
    h = p / 100.0 * (n - 1)
    k = math.floor(h)
    sure = min(n, k + 1 if h == k else k + 2)  # this many meeting x put v_p ≤ x
    e2e, ttft = agg.metrics["e2e"], agg.metrics.get("ttft")
    t_lo = ttft.min_s if ttft is not None and ttft.min_s is not None else 0.0
    longer = [o for _, o in output_points(d) if o > 1]
    if e2e.max_s is None or not longer:
        return None, None
    # both counts stop changing once x·(o − 1) + TTFT min reaches E2E max for the shortest stated output o > 1 (the
    # 1e-9 keeps it reached after rounding)
    x_max = max(e2e.max_s - t_lo, 0.0) / (min(longer) - 1) * (1.0 + 1e-9)
    count = _counts(agg, d, n)
    lo = _edge(lambda x: count(x)[1] > k, x_max)  # below lo[1], v_p > x: v_p ≥ lo[0]
    hi = _edge(lambda x: count(x)[0] >= sure, x_max)  # at hi[1], v_p ≤ hi[1]
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
