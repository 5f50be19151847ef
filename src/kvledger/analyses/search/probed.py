"""The capacity band a colocated candidate's entry carries (``capacity.error_band``): the one ``goodput --simulate
--target`` and ``cost --simulate`` give the same capacity (``serving.origin_band``, one rule for the three), which
``search.bands`` ranks and sizes on."""

from __future__ import annotations

from typing import Any

__all__ = ["probed_band"]


def probed_band(spec: Any, cand: Any, slo: Any, pr: Any, capacity_req_per_s: float, from_origin: bool
                ) -> dict[str, Any]:
    """``{"error_band": …}``: the band ``goodput --simulate --target`` and ``cost --simulate`` give the capacity a
    colocated candidate is sized on (``serving.origin_band``, one rule for the three; ``CapacityBand``'s dict, None
    without a band); ``from_origin``: its rate search started at 1 req/s, as theirs. Nothing for a unit without a
    rate search of its own (``pr.search``: a disaggregated one)."""
    if getattr(pr, "search", None) is None:
        return {}
    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.serving.origin_band import search_capacity_band

    band = search_capacity_band(sim_args(spec, cand), slo, spec.target, spec.synthetic, pr.search, capacity_req_per_s,
                                from_origin)
    return {"error_band": None if band is None else band.to_dict()}
