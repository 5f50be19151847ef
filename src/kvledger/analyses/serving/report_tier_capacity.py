"""The SLO capacity with the KV tiers in ``kvledger report``'s KV tiers section: the capacity search ``cost
--simulate`` runs (``sim_boundary.search_sim_boundary`` on the request rate, the same seeded workload, SLO and target,
from 1 req/s), each probe ``goodput --simulate``'s run with the tier flags (``tier_runs.simulate_with_tier``: the tier
built by ``sim_tiers.host_tier_for`` as ``simulate`` builds it, the step cost and ``--gpu-profile`` the run's own), set
beside the capacity found without the tiers.

The tier flags in ``report`` ask what the tiers would change: the cost, the verdict and the headline stay on the
capacity without them (``cost --simulate``'s); this states the capacity with them, both sized as ``cost`` sizes them
(never above the deployment's capacity bound, ``work_bounds``, read without the tier), the 80% band of each
(``capacity_bands.capacity_band``), the tiers' hit shares at the capacity with them, and whether the difference lies
inside the band of the capacity without them (then the tiers do not change the decision the band allows).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["tier_capacity", "METHOD"]

METHOD = ("kvledger.analyses.serving.sim_boundary.search_sim_boundary on request_rate, each probe goodput --simulate's "
          "run with the tier flags (analyses/serving/tier_runs.py)")


def _band(band: Any) -> dict[str, Any] | None:
    return None if band is None else band.to_dict()


def tier_capacity(args: Any, tier: Any, synthetic: Any, slo: Any, without: Any) -> dict[str, Any]:
    """The ``capacity`` block of the KV tiers section (module docstring).

    Args:
        args: the report's ``SimRequestArgs`` (its ``rate`` is the search's). tier: the ``TierSettings``.
        synthetic / slo: the report's workload and SLO. without: the capacity without the tiers (``SimCapacity``).

    Raises:
        InputError: a simulation that cannot run with the tiers (as ``goodput --simulate`` refuses it).
    """
    from kvledger.analyses.serving.capacity_bands import capacity_band
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary
    from kvledger.analyses.serving.work_bounds import capped

    target = without.search.target
    sb = search_sim_boundary(dataclasses.replace(args, rate=None), slo, target, "request_rate", synthetic=synthetic,
                             tier=tier)
    wo_band = without.error_band
    out: dict[str, Any] = {
        "method": METHOD, "target": target,
        "without_tier": {"slo_capacity_req_per_s": without.rate_req_per_s,
                         "sized_on_req_per_s": without.sizing_req_per_s, "error_band": _band(wo_band)},
        "probes_with_tier": [[p.value, p.attainment, p.meets_target] for p in sb.probes]}
    b = sb.boundary.boundary_value
    if b is None or sb.boundary_run is None:  # no rate met the target with the tiers: no capacity with them
        return out | {"with_tier": None, "inside_band": None}
    sized = capped(float(b), without.bound_req_per_s)
    at = next(p for p in sb.probes if p.value == b)
    rows = [] if sb.tier_report is None else sb.tier_report.per_tier
    out["with_tier"] = {"slo_capacity_req_per_s": float(b), "sized_on_req_per_s": sized,
                        "attainment_at_boundary": at.attainment,
                        "first_failing_req_per_s": sb.boundary.first_failing_value,
                        "error_band": _band(capacity_band(sb.boundary_run.setup, sized, sb, slo)),
                        "hit_share": {r.tier: r.hit_rate for r in rows}}
    out["inside_band"] = None if wo_band is None else bool(wo_band.low <= sized <= wo_band.high)
    return out
