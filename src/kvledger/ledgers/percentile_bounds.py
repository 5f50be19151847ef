"""How many of n requests meet ``value ≤ threshold`` from one metric's reported percentiles (the rule is in
``kvledger.ledgers.estimate``'s docstring); shared by ``estimate`` and ``tpot_derived``."""

from __future__ import annotations

import math

from kvledger.evidence.aggregate import MetricSummary
from kvledger.units import fmt_duration

__all__ = ["metric_bounds"]


def metric_bounds(m: MetricSummary | None, threshold_s: float, n: int) -> tuple[int, int, str]:
    """(lower, upper) count of the n successful requests meeting ``value ≤ threshold_s``, and the reason."""
    if m is None:
        return 0, n, "the file has no statistics for this metric: unbounded"
    pts = m.points()
    if m.weighting != "request":
        pts = [(p, v) for p, v in pts if p in (0.0, 100.0)]
        if not pts:
            return 0, n, f"distribution is {m.weighting}-weighted and has no min/max: unbounded"
    size = m.count if m.count is not None else n
    per_request = m.weighting == "request"
    lower, upper, why_lo, why_hi = 0, n, "", ""
    for p, v in pts:
        h = p / 100.0 * (size - 1)
        if v <= threshold_s:
            if per_request:
                c = n if p == 100.0 else min(n, math.floor(h) + 1)
            else:
                c = n if p == 100.0 else 0  # every gap/token value ≤ max ≤ SLO
            if c > lower:
                lower, why_lo = c, f"{_label(p)} = {fmt_duration(v)} ≤ SLO"
        else:
            if per_request:
                c = 0 if p == 0.0 else min(n, math.ceil(h))
            else:
                c = 0 if p == 0.0 else n  # every value ≥ min > SLO
            if c < upper:
                upper, why_hi = c, f"{_label(p)} = {fmt_duration(v)} > SLO"
    why = "; ".join(filter(None, [why_lo, why_hi])) or "no reported percentile decides it"
    return lower, max(upper, lower), why


def _label(p: float) -> str:
    return {0.0: "min", 100.0: "max", 50.0: "median"}.get(p, f"p{p:g}")
