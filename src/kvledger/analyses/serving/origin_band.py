"""The 80% band of an SLO capacity found by a rate search that started somewhere other than where ``goodput --simulate
--target`` and ``cost --simulate`` start (1 req/s, doubling): a configuration search starts each candidate at its
capacity bound and guesses the bracket (``sim_bracket.guessed_bracket``), and finds the same boundary through other
probes.

The band is ``capacity_bands.capacity_band``'s, one rule for the three commands. Where a latency binds the capacity
below saturation (``binding_band``) that rule reads the search's first probe and the most any probe served, which
depend on where the search started; so there the rate search is redone from 1 req/s, as ``cost --simulate`` runs it
(the same seeded workload: the probes it shares with the first search are the same simulations, taken from the
first search's within a search candidate's evaluation, ``sim_prober.sharing_probes``, else kept on disk by
``sim_cache``), and the band is read from it. A capacity at saturation, or one sized on a capacity bound below it,
keeps the throughput's band around it, which no probe moves: nothing is redone.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ORIGIN_REQ_PER_S", "search_capacity_band"]

#: where ``goodput --simulate --target`` and ``cost --simulate`` start their rate search (``search_sim_boundary``'s
#: default ``start``), req/s
ORIGIN_REQ_PER_S = 1.0


def search_capacity_band(args: Any, slo: Any, target: float, synthetic: Any, sb: Any, capacity_req_per_s: float,
                         from_origin: bool) -> Any:
    """The band ``goodput --simulate --target`` and ``cost --simulate`` give ``capacity_req_per_s`` (the module
    docstring): ``sb``, the rate search that found it (``sim_boundary.SimBoundary``) on ``args`` (``SimRequestArgs``)
    and ``synthetic``, under ``slo`` at ``target``; ``from_origin``: it started at 1 req/s without a guessed bracket,
    as theirs does. A ``capacity_bands.CapacityBand``, or None without a band."""
    from kvledger.analyses.serving.binding_band import binding_metric
    from kvledger.analyses.serving.capacity_bands import capacity_band

    setup = (sb.boundary_run or sb.first_run).setup
    at_boundary = capacity_req_per_s == sb.boundary.boundary_value
    if at_boundary and not from_origin and binding_metric(sb, slo) is not None:
        from kvledger.analyses.serving.sim_boundary import search_sim_boundary

        again = search_sim_boundary(args, slo, target, "request_rate", synthetic=synthetic, start=ORIGIN_REQ_PER_S)
        if again.boundary.boundary_value == capacity_req_per_s:  # the same boundary, as the two searches find
            sb = again
    return capacity_band(setup, capacity_req_per_s, sb, slo)
