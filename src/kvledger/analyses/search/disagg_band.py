"""The 80% band of a disaggregated unit's SLO capacity, by the rule every simulated capacity takes
(``capacity_bands.capacity_band``): where TPOT binds it below saturation, TPOT's band carried to the rate through the
unit's own probes (``binding_band``); else the saturation throughput's band around it (``bands.entry_band``).

The unit's rate search starts at 1 req/s and doubles, as ``goodput --simulate --target`` and ``cost --simulate``
start theirs, so its first probe is the one their rule reads (no search is redone, as ``origin_band`` redoes a
colocated one). TPOT is the decode pool's: its band is the regime's at the decode pool's TP (the step times a k×
slower engine stretches); the KV transfer, once per request before its second token, is the link's assumption and
is not stretched, so over a request's tokens it moves TPOT little. A TTFT-bound unit (or one bound past saturation)
gets the throughput band around its capacity, as a colocated one does (``capacity_bands.throughput_band``; TTFT near
a capacity is the queue's wait, whose band was not measured there), at the prefill pool's TP, where its TTFT is made.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__ = ["disagg_view", "disagg_band"]


def disagg_view(runs: dict[float, tuple[Any, Any]], order: list[float], boundary: float, target: float) -> Any:
    """The unit's probes (``runs``: rate → (records, goodput), run in ``order``) read as the request-rate search
    ``binding_band`` reads (``binding_band.search_view``), ``boundary`` req/s being the rate found."""
    from kvledger.analyses.serving.binding_band import search_view

    rows = [(r, runs[r][0].metadata.request_rate, runs[r][1].throughput_req_per_s, runs[r][1]) for r in order]
    return search_view(rows, boundary, target, SimpleNamespace(run=runs[order[0]][0]),
                       SimpleNamespace(run=runs[boundary][0]))


def disagg_band(spec: Any, cand: Any, slo: Any, view: Any) -> dict[str, Any] | None:
    """``capacity.error_band`` of a disaggregated unit (``CapacityBand``'s dict): TPOT's band carried to the rate where
    TPOT binds its capacity below saturation, else the saturation throughput's around it, as a colocated capacity's
    (the module docstring; ``view``: ``disagg_view``); None without a capacity or a band for the regime."""
    from kvledger.analyses.search.regime_band import search_band
    from kvledger.analyses.serving.binding_band import latency_binding
    from kvledger.analyses.serving.capacity_bands import carried_band, throughput_band

    binding = latency_binding(view, slo)
    band = None if binding is None else search_band(spec, {"gpu_id": cand.gpu_id, "tp": cand.decode_tp}, "tpot_mean")
    c = view.boundary.boundary_value
    if not c:
        return None
    if band is not None:
        more = (f"; TPOT is the decode pool's (TP {cand.decode_tp}), the KV transfer before each request's second "
                "token not stretched")
        return carried_band(c, binding, band, band.regime, more).to_dict()
    thr = search_band(spec, {"gpu_id": cand.gpu_id, "tp": cand.tp})  # the band bands.entry_band gave it before
    why = "no TPOT band for the regime" if binding is not None else "TPOT does not bind it below saturation"
    more = f"; the saturation throughput's band around the unit's capacity ({why})"
    return None if thr is None else throughput_band(c, thr, thr.regime, more).to_dict()
