"""The 80% bands of an SLO capacity found by simulation and of the self-host vs API decision priced from it (the
regime's band on throughput, ``kvledger.ledgers.error_band``); split from ``prediction_bands`` so that ``simulate``,
which reports only the prediction bands, does not make these classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.prediction_bands import setup_regime
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.error_band import error_band

__all__ = ["CostBand", "CapacityBand", "cost_band", "capacity_band"]


@dataclass(frozen=True)
class CostBand:
    """The band of the goodput priced and what it does to the self-host vs API decision (:func:`cost_band`).

    Attributes:
        regime: the calibration regime. capacity_req_per_s / capacity_low / capacity_high: the good req/s priced and
            its 80% band. self_host_usd_per_mtok_output_low / _high: the self-hosted $/M output tokens over the band.
        api_usd_per_mtok_output: the API's price. decision_flips_inside_band: the API price lies inside that range.
        text: the band and the verdict in words; source: the data behind the band.
    """

    regime: str
    capacity_req_per_s: float
    capacity_low: float
    capacity_high: float
    self_host_usd_per_mtok_output_low: float
    self_host_usd_per_mtok_output_high: float
    api_usd_per_mtok_output: float
    decision_flips_inside_band: bool
    text: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class CapacityBand:
    """The 80% band of an SLO capacity found by simulation (:func:`capacity_band`): ``value`` and ``low``–``high``,
    req/s, the regime, the data (``source``) and a sentence (``text``)."""

    value: float
    low: float
    high: float
    regime: str
    source: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def cost_band(setup: Any, capacity_req_per_s: float, self_host_usd_per_mtok: float,
              api_usd_per_mtok: float) -> CostBand | None:
    """The band of the goodput priced (``capacity_req_per_s``: good req/s at the SLO capacity, not the capacity's
    request rate) and what it does to the self-host vs API decision: the self-hosted $/M output tokens
    scaled by 1/capacity over the band (every self-host line item is paid per GPU-hour of capacity), and whether
    the API price lies inside that range (the decision flips inside the band). None when no band exists."""
    regime = setup_regime(setup)
    band = error_band(regime, "throughput")
    if band is None or capacity_req_per_s <= 0:
        return None
    lo, hi = band.around(capacity_req_per_s)
    cost_lo, cost_hi = self_host_usd_per_mtok / band.high, self_host_usd_per_mtok / band.low
    flips = cost_lo <= api_usd_per_mtok <= cost_hi
    cheaper = "self-hosting" if self_host_usd_per_mtok < api_usd_per_mtok else "the API"
    scope = {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                          "model-calibrated")
    verdict = ("the decision FLIPS inside the band — the simulator cannot settle it; measure the capacity (kvledger "
               "calibrate --scope gpu, then validate)" if flips else f"{cheaper} is cheaper across the whole band")
    text = (f"goodput at the SLO capacity {capacity_req_per_s:.4g} good req/s (80% band {lo:.4g}–{hi:.4g}, "
            f"{scope}); self-hosted "
            f"${self_host_usd_per_mtok:.4g}/M output tokens (band ${cost_lo:.4g}–${cost_hi:.4g}) vs the API's "
            f"${api_usd_per_mtok:.4g}: {verdict}")
    return CostBand(regime, capacity_req_per_s, lo, hi, cost_lo, cost_hi, api_usd_per_mtok, flips, text, band.source)


def capacity_band(setup: Any, capacity_req_per_s: float | None) -> CapacityBand | None:
    """The 80% band of an SLO capacity (req/s) found by simulation, with a sentence; None without a band or value."""
    regime = setup_regime(setup)
    band = error_band(regime, "throughput")
    if band is None or not capacity_req_per_s:
        return None
    lo, hi = band.around(capacity_req_per_s)
    scope = {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                          "model-calibrated")
    return CapacityBand(capacity_req_per_s, lo, hi, regime, band.source,  # the capacity :g, as the search prints it
                        f"SLO capacity {capacity_req_per_s:g} req/s (80% band {lo:.4g}–{hi:.4g}, {scope})")
