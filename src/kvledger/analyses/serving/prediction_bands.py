"""Error bands on a simulation's headline figures (mean TTFT, mean TPOT, throughput), from the regime that priced it
(``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.error_band import Band, regime_of
from kvledger.ledgers.profile_band import ProfileFacts, profile_band

__all__ = ["NO_LATENCY_BAND", "setup_regime", "setup_band", "profile_facts", "band_coverage", "UNBANDED_FIGURES",
           "PredictionBand", "CostBand", "CapacityBand", "prediction_bands", "cost_band", "capacity_band"]

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
        regime: the calibration regime. goodput_req_per_s / goodput_low / goodput_high: the good req/s per deployment
            unit that the ledgers price, and its 80% band. capacity_req_per_s / capacity_low / capacity_high: the SLO
            capacity (the boundary's request rate, req/s) and its band; None when no capacity search priced the run.
        basis: what is compared — "monthly bill" (a volume was given: both bills, the self-hosted one redone at each
            end of the band) or "per good request" (no volume: input and output tokens at the assumed utilization).
        unit: the unit of the USD figures. self_host_usd: at the goodput priced; self_host_usd_at_low_capacity /
            _at_high_capacity: at goodput × the band's low and high end. api_usd: the API, same basis.
        replicas / replicas_at_low_capacity / replicas_at_high_capacity: the monthly sizing (None per request).
        decision_flips_inside_band: the cheaper side is not the same at both ends of the band.
        text: the band and the verdict in words; source: the data behind the band.
    """

    regime: str
    goodput_req_per_s: float
    goodput_low: float
    goodput_high: float
    capacity_req_per_s: float | None
    capacity_low: float | None
    capacity_high: float | None
    basis: str
    unit: str
    self_host_usd: float
    self_host_usd_at_low_capacity: float
    self_host_usd_at_high_capacity: float
    api_usd: float
    replicas: int | None
    replicas_at_low_capacity: int | None
    replicas_at_high_capacity: int | None
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


#: the simulate figures the leave-one-deployment-out validation never measured the error of (it compares means and
#: saturation throughput: benchmarks/lodo_bands.py, docs/validation.md §2.3), so they carry no band
UNBANDED_FIGURES = ("ttft_p50", "ttft_p90", "ttft_p99", "tpot_p50", "tpot_p90", "tpot_p99", "itl_mean", "itl_p50",
                    "itl_p90", "itl_p99", "e2e_mean", "e2e_p50", "e2e_p90", "e2e_p99")
UNBANDED_REASON = ("no validated band: the leave-one-deployment-out validation behind the bands (docs/validation.md "
                   "§2.3, ledgers/data/error_bands.json) measured the errors of mean TTFT, mean TPOT and saturation "
                   "throughput only; a band for these would be invented")


def band_coverage(bands: dict[str, PredictionBand], kept_up: bool = False) -> dict[str, Any]:
    """Which figures carry a band and which do not: ``{"banded": [...], "unbanded": {figure: None, ...}, "reason":
    ..., "throughput": ...}``; ``throughput`` says, for an open loop that kept up, that its band (still in
    ``error_bands``) is for saturation and its throughput is the offered load (None otherwise)."""
    unbanded: dict[str, None] = dict.fromkeys(UNBANDED_FIGURES)
    unbanded.update(dict.fromkeys(m for m in ("ttft_mean", "tpot_mean", "throughput") if m not in bands))
    note = ("the run kept up with its arrivals: its throughput is the offered load, not the saturation throughput "
            "the band is for" if kept_up and "throughput" in bands else None)
    return {"banded": list(bands), "unbanded": unbanded, "reason": UNBANDED_REASON, "throughput": note}


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


def _scope_words(regime: str) -> str:
    return {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                         "model-calibrated")


def cost_band(setup: Any, report: Any, capacity_req_per_s: float | None = None) -> CostBand | None:
    """The band of the goodput priced (good req/s at the SLO capacity, ``report.capacity``; ``capacity_req_per_s``:
    the capacity's request rate, when a search found it) and what it does to the verdict, on the verdict's own basis.

    With a volume (``report.decision``): the two monthly bills, the self-hosted one redone at each end of the band
    (``kvledger.ledgers.decision.BandEnd``: replicas for the volume, their utilization, the bill), so that this line
    and the verdict's robustness line are one statement. Without: the cost of one good request, input and output
    tokens together (``report.inputs``' self_host_usd_per_request at the assumed utilization, scaled by 1/k over
    the band) against the API's. None when no measured band stands for the regime.
    """
    regime = setup_regime(setup)
    band = setup_band(setup, "throughput")
    g = report.capacity["goodput_req_per_s"]
    if band is None or g <= 0:
        return None
    d = report.decision
    if d is not None:
        low, high = d.band_ends
        sh, lo_usd, hi_usd, api = d.self_host_usd, low.self_host_usd_per_month, high.self_host_usd_per_month, \
            d.primary.bill.total_usd
        reps, flips = (d.replicas, low.replicas, high.replicas), not d.holds_within_band()
        basis, unit, k_lo, k_hi = "monthly bill", "USD per month", d.band_low, d.band_high
        cheaper = "self-hosting" if d.verdict == "self-host" else "the API"
    else:
        sh, api = report.inputs["self_host_usd_per_request"], report.inputs["api_usd_per_request"]
        lo_usd, hi_usd = sh / band.low, sh / band.high
        reps, flips = (None, None, None), (lo_usd < api) != (hi_usd < api)
        basis, unit, k_lo, k_hi = "per good request", "USD per good request", band.low, band.high
        cheaper = "self-hosting" if sh < api else "the API"
    cap_lo, cap_hi = (None, None) if capacity_req_per_s is None else band.around(capacity_req_per_s)
    text = _cost_band_text(regime, band, g, capacity_req_per_s, basis, (sh, lo_usd, hi_usd, api), reps, flips,
                           cheaper, (k_lo, k_hi))
    return CostBand(regime, g, g * band.low, g * band.high, capacity_req_per_s, cap_lo, cap_hi, basis, unit, sh,
                    lo_usd, hi_usd, api, *reps, flips, text, band.source)


def _cost_band_text(regime: str, band: Any, g: float, cap: float | None, basis: str, usd: tuple[float, ...],
                    reps: tuple[int | None, ...], flips: bool, cheaper: str, ks: tuple[float, float]) -> str:
    lo, hi = band.around(g)
    sh, lo_usd, hi_usd, api = usd
    cap_text = "" if cap is None else f"; SLO capacity {cap:.4g} req/s, band {cap * band.low:.4g}–{cap * band.high:.4g}"
    head = (f"goodput at the SLO capacity {g:.4g} good req/s (80% band {lo:.4g}–{hi:.4g}, {_scope_words(regime)}"
            f"{cap_text})")
    verdict = ("the decision FLIPS inside the band — the simulator cannot settle it; measure the capacity (kvledger "
               "calibrate --scope gpu, then validate)" if flips else f"{cheaper} is cheaper across the whole band")
    if basis == "monthly bill":
        def one(r: int | None, usd_: float) -> str:
            return f"{r} replica{'' if r == 1 else 's'} ${usd_:,.2f}"

        body = (f"self-hosted bill ${sh:,.2f}/month ({reps[0]} replica{'' if reps[0] == 1 else 's'}): "
                f"{one(reps[1], lo_usd)} at ×{ks[0]:.2f} capacity, {one(reps[2], hi_usd)} at ×{ks[1]:.2f}; "
                f"vs the API's ${api:,.2f}/month")
    else:
        body = (f"self-hosted ${sh:.6f} per good request (input and output tokens; band ${hi_usd:.6f}–${lo_usd:.6f}) "
                f"vs the API's ${api:.6f}")
    return f"{head}; {body}: {verdict}"


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
