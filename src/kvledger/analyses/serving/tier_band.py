"""The 80% band of an SLO capacity found with a KV tier in the simulator by ``search.tier_probe`` (a search's
``--offload`` variant; ``cost --simulate --kv-tier-host`` bands its capacity as report and goodput do, on their one
search, ``report_tier_capacity.capacity_with_tier``): ``capacity_bands.capacity_band``'s rule,
one for every simulated capacity — where TPOT binds the capacity below saturation, TPOT's band carried to the rate
through the tier's own probes (``binding_band``: the first probe and the capacity, the most any probe served), else
the saturation throughput's band around the rate sized on.

The tier's probes start at the candidate's capacity found without the tier (the band of which is goodput's and
cost's, ``origin_band``) and stop the doubling at the capacity bound. Where the tier served no prompt token in any
probe each run equals the one without it: that capacity's own band stands, as it does wherever the rate sized on is
that capacity.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tier_search_view", "tier_capacity_band"]


def tier_search_view(p: Any, boundary: float) -> Any:
    """The tier prober ``p``'s runs (``tier_probe.TierProber``, in the order run: the first is where its search
    started) read as the request-rate search ``binding_band`` reads (``binding_band.search_view``), ``boundary``
    req/s being the rate found."""
    from kvledger.analyses.serving.binding_band import search_view

    rows = [(r, p.runs[r].metadata.request_rate, p.goodputs[r].throughput_req_per_s, p.goodputs[r]) for r in p.runs]
    return search_view(rows, boundary, p.target, p.sims[rows[0][0]], p.sims.get(boundary))


def tier_capacity_band(p: Any, boundary: float, sized_req_per_s: float, slo: Any,
                       without: Any = None) -> Any:
    """The band of the capacity with the tier (the module docstring): ``boundary`` the rate ``p``'s search found,
    ``sized_req_per_s`` the rate sized on (the bound, where it caps it); ``without`` the band of the capacity found
    without the tier (``capacity_bands.CapacityBand``), which stands where no probe loaded a block back from the tier
    and the rate sized on is that capacity. A ``CapacityBand``, or None without a band."""
    from kvledger.analyses.serving.capacity_bands import capacity_band

    if without is not None and not any(p.host_hit_tokens.values()) and without.value == sized_req_per_s:
        return without
    view = tier_search_view(p, boundary)
    setup = (view.boundary_run or view.first_run).setup
    return capacity_band(setup, sized_req_per_s, view, slo)
