"""The SLO capacity with the KV tiers, beside the one without them: in ``kvledger report``'s KV tiers section and in
``goodput --simulate … --target`` with tier flags. The capacity search ``cost --simulate`` runs
(``sim_boundary.search_sim_boundary`` on the request rate, the same seeded workload, SLO and target, from 1 req/s),
each probe ``goodput --simulate``'s run with the tier flags (``tier_runs.simulate_with_tier``: the tier built by
``sim_tiers.host_tier_for`` as ``simulate`` builds it, the step cost and ``--gpu-profile`` the run's own; the run
with the tier alone, its twin without the tier not run: the probe's attainment is the run with the tier's).

The tier flags in ``report`` ask what the tiers would change: the cost, the verdict and the headline stay on the
capacity without them (``cost --simulate``'s); this states the capacity with them, both sized as ``cost`` sizes them
(never above the deployment's capacity bound, ``work_bounds``, read without the tier), the 80% band of each
(``capacity_bands.capacity_band``), the tiers' hit shares at the capacity with them, and whether the difference lies
inside the band of the capacity without them (then the tiers do not change the decision the band allows).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

__all__ = ["tier_capacity", "capacity_with_tier", "capacity_block", "ttft_at_capacity", "search_with_tier",
           "WithoutTier", "METHOD"]

METHOD = ("kvledger.analyses.serving.sim_boundary.search_sim_boundary on request_rate, each probe goodput --simulate's "
          "run with the tier flags (analyses/serving/tier_runs.py)")

TTFT_SOURCE = ("goodput --simulate --rate R with the tier flags (analyses/serving/tier_runs.py simulate_with_tier): "
               "the run with the tiers and the same requests without them, simulated twice")

#: the first note of ``search_with_tier``'s search: whose capacity its answer is
WITH_TIERS_NOTE = ("every probe runs with the KV tiers the flags give (the run with the tiers alone): the capacity "
                   "above is with them; the same search without them is beside it (KV tiers; JSON kv_tier_capacity)")


@dataclass(frozen=True)
class WithoutTier:
    """The capacity without the tiers the block sets the one with them beside: the target, the rate found and the rate
    sized on (req/s; None: no rate met the target), the 80% band of the rate sized on (None: none stands), and the
    deployment's capacity bound (req/s; None: none proven)."""

    target: float
    rate_req_per_s: float | None
    sizing_req_per_s: float | None
    error_band: Any
    bound_req_per_s: float | None

    @classmethod
    def of_capacity(cls, cap: Any) -> WithoutTier:
        """From ``cost --simulate``'s ``sim_capacity.SimCapacity`` (the report's)."""
        return cls(cap.search.target, cap.rate_req_per_s, cap.sizing_req_per_s, cap.error_band, cap.bound_req_per_s)

    @classmethod
    def of_search(cls, sb: Any) -> WithoutTier:
        """From ``goodput --simulate --target``'s ``sim_boundary.SimBoundary`` (its bound and bands set as
        ``sim_goodput.simulated_goodput_search`` sets them): sized on the bound where it caps the rate found."""
        found, bound = sb.boundary.boundary_value, sb.capacity_bound_req_per_s
        sized = found if found is None or bound is None else bound
        band = sb.sized_error_band if bound is not None else sb.error_band
        return cls(sb.target, found, sized, band, sb.bound_req_per_s)


def _band(band: Any) -> dict[str, Any] | None:
    return None if band is None else band.to_dict()


def tier_capacity(args: Any, tier: Any, synthetic: Any, slo: Any, without: Any) -> dict[str, Any]:
    """The ``capacity`` block of the KV tiers section (module docstring): ``capacity_with_tier`` beside the report's
    capacity without the tiers.

    Args:
        args: the report's ``SimRequestArgs`` (its ``rate`` is the search's). tier: the ``TierSettings``.
        synthetic / slo: the report's workload and SLO. without: the capacity without the tiers (``SimCapacity``).

    Raises:
        InputError: a simulation that cannot run with the tiers (as ``goodput --simulate`` refuses it).
    """
    return capacity_with_tier(args, slo, tier, WithoutTier.of_capacity(without), synthetic=synthetic)[1]


def capacity_with_tier(args: Any, slo: Any, tier: Any, without: WithoutTier, *, lo: float | None = None,
                       hi: float | None = None, tol: float | None = None, synthetic: Any = None) -> tuple[Any, dict]:
    """The one path of the capacity with the tiers (``report``'s KV tiers section and ``goodput --simulate --target``
    with tier flags): ``sim_goodput.simulated_goodput_search`` on the request rate with every probe run with ``tier``
    (from 1 req/s unless ``lo``/``hi``/``tol`` bound it), then ``capacity_block`` beside ``without`` with the TTFT at
    the capacity chosen (``ttft_at_capacity``). (the ``SimGoodputSearch`` with the tiers, the block).

    Raises:
        InputError: a simulation that cannot run with the tiers, or what the search refuses.
    """
    from kvledger.analyses.serving.sim_goodput import simulated_goodput_search

    found = simulated_goodput_search(dataclasses.replace(args, rate=None), slo, without.target, "request_rate", lo=lo,
                                     hi=hi, tol=tol, synthetic=synthetic, tier=tier)
    block = capacity_block(found.search, slo, without)
    block["ttft_at_capacity"] = ttft_at_capacity(args, tier, synthetic, block)
    return found, block


def ttft_at_capacity(args: Any, tier: Any, synthetic: Any, block: dict[str, Any]) -> dict[str, Any] | None:
    """TTFT (mean and p90, s) at the capacity the block chooses — the rate sized on with the tiers, else (no rate met
    the target with them) the one without — with the tiers and without them: ``goodput --simulate --rate R`` with the
    tier flags there (``tier_runs.simulate_with_tier``: the run with the tiers and the same requests without them).
    None where neither capacity stands."""
    from kvledger.analyses.serving.tier_runs import simulate_with_tier

    w, wo = block["with_tier"], block["without_tier"]
    rate, whose = (wo["sized_on_req_per_s"], "without_tier") if w is None else (w["sized_on_req_per_s"], "with_tier")
    if rate is None:
        return None
    _sim, rep = simulate_with_tier(dataclasses.replace(args, rate=rate), tier, synthetic)

    def stats(t: Any) -> dict[str, float | None]:
        return {"mean_s": t.mean, "p90_s": t.p90}

    return {"rate_req_per_s": rate, "capacity": whose, "with_tier": stats(rep.ttft_s_with_tier),
            "without_tier": stats(rep.ttft_s_without_tier), "source": TTFT_SOURCE}


def capacity_block(sb: Any, slo: Any, without: WithoutTier) -> dict[str, Any]:
    """The block (report's ``kv_tiers.capacity``, goodput's ``kv_tier_capacity``) of the search with the tiers ``sb``
    (``SimBoundary``, request rate) beside ``without``: both capacities, their bands, the tiers' hit shares at the
    capacity with them and whether the difference lies inside the band of the one without (None: no band, or no
    capacity without them)."""
    from kvledger.analyses.serving.capacity_bands import capacity_band
    from kvledger.analyses.serving.work_bounds import capped

    wo_band = without.error_band
    out: dict[str, Any] = {
        "method": METHOD, "target": without.target,
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


def search_with_tier(args: Any, slo: Any, target: float, axis: str, tier: Any, *, lo: float | None = None,
                     hi: float | None = None, tol: float | None = None, synthetic: Any = None,
                     seeds: int = 1) -> Any:
    """``goodput --simulate … --target`` with tier flags: the search without the tiers, then the same search with
    them (``sim_goodput.simulated_goodput_search`` both, the same bracket and resolution), the one with them returned
    (its probes, boundary, band and notes) with ``tier_capacity`` set to ``capacity_block`` of the two.

    Raises:
        InputError: an axis other than the request rate (the bands and the block are the rate's), ``seeds`` above 1,
            or what either search refuses.
    """
    from kvledger.analyses.serving.sim_boundary import normalize_axis
    from kvledger.analyses.serving.sim_goodput import simulated_goodput_search
    from kvledger.errors import InputError

    if normalize_axis(axis) != "request_rate":
        raise InputError(f"--target with KV tier flags searches the request rate (the capacity with the tiers beside "
                         f"the one without, with their 80% bands), not {axis}: drop --axis, or the tier flags")
    if seeds != 1:
        raise InputError("--seeds with KV tier flags: the capacity with the tiers is searched for one seed; drop "
                         "--seeds, or the tier flags to see the capacity's range over seeds")
    # without the tiers: the deployment without HiCache too (its prefill-graph rule off, SGLang 0.5.10-0.5.16's pool),
    # as report and cost --kv-tier-host search it (cost_runs.sim_run's search on the args without the tier flags)
    plain = dataclasses.replace(args, enable_hierarchical_cache=False) if tier.enable_hierarchical_cache else args
    without = simulated_goodput_search(plain, slo, target, "request_rate", lo=lo, hi=hi, tol=tol, synthetic=synthetic)
    found, block = capacity_with_tier(args, slo, tier, WithoutTier.of_search(without.search), lo=lo, hi=hi, tol=tol,
                                      synthetic=synthetic)
    found.search.notes.insert(0, WITH_TIERS_NOTE)
    return dataclasses.replace(found, tier_capacity=block)
