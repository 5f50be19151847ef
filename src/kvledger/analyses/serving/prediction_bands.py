"""Error bands on a simulation's headline figures (mean TTFT, mean TPOT, throughput), from the regime that priced it
(``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.error_band import Band, regime_of
from kvledger.ledgers.profile_band import ProfileFacts, profile_band

__all__ = ["NO_LATENCY_BAND", "setup_regime", "setup_band", "profile_facts", "PredictionBand", "CostBand",
           "CapacityBand", "prediction_bands", "cost_band", "capacity_band"]

#: why a saturated run prints no latency band (the note simulate adds)
NO_LATENCY_BAND = ("no TTFT or TPOT error band: the run is saturated (its queue grew), so its latency is set by how "
                   "long the arrivals lasted, not by the step cost the bands measure (validate compares only "
                   "throughput under saturation; docs/validation.md §2.3); lower --rate below the capacity for a "
                   "latency with a band")


@dataclass(frozen=True)
class PredictionBand:
    """One simulated figure and the 80% band of where a real engine's figure fell around such a prediction.

    Attributes:
        predicted: the simulated figure (s, or req/s for throughput); low / high: the band, same unit.
        regime: the calibration regime that priced the run; num_runs: measured runs behind the band; source: the data.
    """

    predicted: float
    low: float
    high: float
    regime: str
    num_runs: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


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


def setup_regime(setup: Any) -> str:
    """The regime of a prepared simulation: the scope that priced it, the model's architecture, the engine."""
    plan = getattr(setup, "plan", None)
    is_moe = bool(plan is not None and plan.model.is_moe)
    engine = getattr(getattr(plan, "memory", None), "engine", "vllm") if plan is not None else "vllm"
    return regime_of((setup.cost_info or {}).get("scope"), is_moe, engine)


def profile_facts(prof: Any) -> ProfileFacts | None:
    """What the band needs of a GPU profile (``kvledger.accounting.gpu_profile.GpuProfile``; None → None)."""
    if prof is None:
        return None
    return ProfileFacts(prof.label or prof.source, tuple((r["model"], r["tp"]) for r in prof.runs), tuple(prof.runs))


def setup_band(setup: Any, metric: str) -> Band | None:
    """The 80% band of ``metric`` for a prepared simulation: its regime's, made honest for the GPU profile that
    priced it (``kvledger.ledgers.profile_band``: the model and TP against the profile's fit, its in-sample errors)."""
    return profile_band(setup_regime(setup), metric, profile_facts(getattr(setup, "gpu_profile", None)),
                        getattr(setup, "model_name", None), getattr(setup, "tp", None))


def prediction_bands(setup: Any, summary: dict[str, Any], saturated: bool = False) -> dict[str, PredictionBand]:
    """metric → its band, for mean TTFT and TPOT (s) and throughput (req/s; the band holds at saturation, where
    throughput is the engine's capacity); a metric without a band is left out. ``saturated``: the run's queue grew,
    so its latency measures how long the run lasted, not the step cost (``validate`` does not compare latency under
    saturation either, docs/validation.md §2.3): no latency band."""
    regime = setup_regime(setup)
    values = {"ttft_mean": (summary.get("ttft_s") or {}).get("mean"),
              "tpot_mean": (summary.get("tpot_s") or {}).get("mean"),
              "throughput": summary.get("throughput_req_per_s")}
    if saturated:
        values = {"throughput": values["throughput"]}
    out: dict[str, PredictionBand] = {}
    for metric, v in values.items():
        band = setup_band(setup, metric)
        if band is None or v is None:
            continue
        lo, hi = band.around(v)
        out[metric] = PredictionBand(v, lo, hi, regime, band.num_runs, band.source)
    return out


def cost_band(setup: Any, capacity_req_per_s: float, self_host_usd_per_mtok: float,
              api_usd_per_mtok: float) -> CostBand | None:
    """The band of the goodput priced (``capacity_req_per_s``: good req/s at the SLO capacity, not the capacity's
    request rate) and what it does to the self-host vs API decision: the self-hosted $/M output tokens
    scaled by 1/capacity over the band (every self-host line item is paid per GPU-hour of capacity), and whether
    the API price lies inside that range (the decision flips inside the band). None when no band exists."""
    regime = setup_regime(setup)
    band = setup_band(setup, "throughput")
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
    band = setup_band(setup, "throughput")
    if band is None or not capacity_req_per_s:
        return None
    lo, hi = band.around(capacity_req_per_s)
    scope = {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                          "model-calibrated")
    return CapacityBand(capacity_req_per_s, lo, hi, regime, band.source,  # the capacity :g, as the search prints it
                        f"SLO capacity {capacity_req_per_s:g} req/s (80% band {lo:.4g}–{hi:.4g}, {scope})")
