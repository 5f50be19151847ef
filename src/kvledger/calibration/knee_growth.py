"""Whether a compared run sat at or past its knee: the rule (``kvledger.analyses.serving.knee_rule``: a later
quarter of the arrivals waited, on average, at least twice as long for a first token as the first quarter; the reasons
are there) read on both sides of a ``validate`` comparison, and which side grew.

A stage known only by aggregates keeps its TTFT quantiles over the whole stage, not in arrival order, so whether its
waits grew cannot be read. Its mean and median still bound every quarter of it: the quarter of requests between the
median and the 75th percentile took at least the median each, so no N/4 requests can have averaged more than
4 × mean − median (``stage_quarter_bound``). Below the replay's peak quarter, that bound says the measured engine
did not queue as the replay did.
"""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.knee_rule import KNEE_GROWTH, KNEE_RULE, quarter_growth

__all__ = ["KNEE_GROWTH", "quarter_growth", "stage_quarter_bound", "at_knee", "KNEE_RULE"]


def stage_quarter_bound(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The most any quarter of a stage's requests can have averaged for a first token (``quarter_ttft_mean_max_s``,
    s: 4 × TTFT mean − TTFT median, module docstring; None when the stage states no mean or no median), with the
    stage's TTFT mean and median (s) it was read from."""
    ttft = (stats or {}).get("ttft") or {}
    mean, p50 = ttft.get("mean"), ttft.get("p50")
    bound = None if mean is None or p50 is None else max(4.0 * float(mean) - float(p50), 0.0)
    return {"ttft_mean_s": mean, "ttft_p50_s": p50, "quarter_ttft_mean_max_s": bound,
            "from": "4 × TTFT mean − TTFT median of the stage file"}


def at_knee(measured: Any, simulated: Any, stage: Any = None) -> dict[str, Any] | None:
    """Which side of a compared run sat at or past its knee (``quarter_growth``), with both sides' figures; None when
    neither did. ``measured``: the measured records (None for a stage known by aggregates: ``stage``, whose
    ``stage_quarter_bound`` is given instead, with whether it lies below the simulated peak quarter). A closed loop of
    at least as many clients as requests (``stage.client_users`` ≥ its count) sent every request at once: its later
    quarters wait longer as one burst drains, which is no knee, so None."""
    users = getattr(stage, "client_users", None)
    if users and users >= getattr(stage, "count", users + 1):
        return None
    sim = quarter_growth(simulated) if simulated is not None and len(simulated.records) else None
    meas = quarter_growth(measured) if measured is not None and len(measured.records) else None
    sides = sorted(name for name, g in (("measured", meas), ("simulated", sim)) if g is not None and g["grew"])
    if not sides:
        return None
    out: dict[str, Any] = {"sides": sides, "rule": KNEE_RULE, "growth_factor": KNEE_GROWTH,
                           "simulated": sim, "measured": meas}
    if measured is None and stage is not None:
        m = stage_quarter_bound(getattr(stage, "stats", None))
        bound = m["quarter_ttft_mean_max_s"]
        out["measured"] = {**m, "below_simulated_peak": None if bound is None or sim is None else bound < sim["peak_s"]}
    return out
