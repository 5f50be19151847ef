"""The 80% bands of an SLO capacity found by simulation and of the self-host vs API decision priced from it (the
regime's band on throughput, made honest for the GPU profile: ``prediction_bands.setup_band``; a latency's where one
binds the capacity, ``binding_band``), the decision judged on the capacity's own band; split from
``prediction_bands`` so that ``simulate``, which reports only the prediction bands, does not make these classes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.prediction_bands import setup_band, setup_regime
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.amounts import units_text
from kvledger.ledgers.decision_notes import engines
from kvledger.ledgers.error_band import scope_words

__all__ = ["CostBand", "CapacityBand", "cost_band", "capacity_band", "carried_band", "throughput_band",
           "band_multipliers",
           "band_inputs"]


@dataclass(frozen=True)
class CostBand:
    """The band of the goodput priced and what it does to the self-host vs API decision (:func:`cost_band`).

    Attributes:
        regime: the calibration regime. goodput_req_per_s / goodput_low_req_per_s / goodput_high_req_per_s: the good
            req/s per deployment unit that the ledgers price, and its 80% band. sizing_req_per_s /
            capacity_low_req_per_s / capacity_high_req_per_s: the offered rate a replica is sized and priced on (the
            SLO capacity, or the capacity bound where that caps it: ``cost``'s ``capacity.sizing_req_per_s``) and its
            band, req/s; None when no capacity search priced the run.
        basis: what is compared — "monthly bill" (a volume was given: both bills, the self-hosted one redone at each
            end of the band) or "per good request" (no volume: input and output tokens at the assumed utilization).
        unit: the unit of the USD figures. self_host_usd: at the goodput priced; self_host_usd_at_low_capacity /
            _at_high_capacity: at goodput × the band's low and high end (high: None where the capacity is only a
            lower bound, :func:`cost_band`). api_usd: the API, same basis.
        replicas / replicas_at_low_capacity / replicas_at_high_capacity: the monthly sizing (None per request).
        decision_flips_inside_band: the cheaper side is not the same at both ends of the band (a capacity only bounded
            below: the verdict fails at the low end, or, for the API, some higher capacity flips it).
        text: the band and the verdict in words; source: the data behind the band.
    """

    regime: str
    goodput_req_per_s: float
    goodput_low_req_per_s: float
    goodput_high_req_per_s: float
    sizing_req_per_s: float | None
    capacity_low_req_per_s: float | None
    capacity_high_req_per_s: float | None
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
    req/s, the regime, the data (``source``), a sentence (``text``) and, where its runs were on other GPUs only, the
    clause saying so (``elsewhere``: ``Band.on_gpu``'s; "" else)."""

    value: float
    low: float
    high: float
    regime: str
    source: str
    text: str
    elsewhere: str = ""
    unit: str = "req/s"  # of value, low and high (as simulate's error_bands say theirs)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def cost_band(setup: Any, report: Any, capacity_req_per_s: float | None = None,
              capacity: CapacityBand | None = None) -> CostBand | None:
    """The band of the goodput priced (good req/s at the SLO capacity, ``report.capacity``; ``capacity_req_per_s``:
    the capacity's request rate, when a search found it) and what it does to the verdict, on the verdict's own basis.
    ``capacity``: the search's own capacity band (:func:`capacity_band`, a latency's where one binds), whose ends ÷
    its value are the multipliers priced (:func:`band_multipliers`), so that the verdict is judged on the band the
    capacity search shows; without it, the saturation throughput's band.

    With a volume (``report.decision``): the two monthly bills, the self-hosted one redone at each end of the band
    (``kvledger.ledgers.decision.BandEnd``: replicas for the volume, their utilization, the bill), so that this line
    and the verdict's robustness line are one statement. Without: the cost of one good request, input and output
    tokens together (``report.inputs``' self_host_usd_per_request at the assumed utilization, scaled by 1/k over
    the band) against the API's. None when no measured band stands for the regime.

    A run priced at its offered load that looks under-loaded (``report.capacity``'s ``capacity_lower_bound``: the
    capacity is only bounded below) has no upper end: the ``*_at_high_capacity`` figures are None, a self-host verdict
    holds if it holds at the low end, and an API verdict holds only when no higher capacity flips it (the decision's
    ``holds_within_band``; per request, a capacity sh ÷ api × the one priced always would).
    """
    regime = setup_regime(setup)
    thr = setup_band(setup, "throughput")
    band = _Scaled.of(capacity, thr) or thr
    g = report.capacity["goodput_req_per_s"]
    if band is None or g <= 0:
        return None
    d, lower = report.decision, bool(report.capacity.get("capacity_lower_bound"))
    if d is not None:
        low, high = d.band_ends[0], (d.band_ends[1] if len(d.band_ends) > 1 else None)
        sh, lo_usd, api = d.self_host_usd, low.self_host_usd_per_month, d.primary.bill.total_usd
        hi_usd = None if high is None else high.self_host_usd_per_month
        reps = (d.replicas, low.replicas, None if high is None else high.replicas)
        flips, k = not d.holds_within_band(), d.flips.get("capacity_multiplier")
        basis, unit, k_lo, k_hi = "monthly bill", "USD per month", d.band_low, d.band_high
        cheaper = "self-hosting" if d.verdict == "self-host" else "the API"
    else:
        sh, api = report.inputs["self_host_usd_per_request"], report.inputs["api_usd_per_request"]
        lo_usd, hi_usd = sh / band.low, (None if lower else sh / band.high)
        reps, k = (None, None, None), (sh / api if lower and sh >= api > 0 else None)
        flips = (lo_usd < api) != (hi_usd < api) if hi_usd is not None else (lo_usd >= api if sh < api else api > 0)
        basis, unit, k_lo, k_hi = "per good request", "USD per good request", band.low, (None if lower else band.high)
        cheaper = "self-hosting" if sh < api else "the API"
    cap_lo, cap_hi = (None, None) if capacity_req_per_s is None else band.around(capacity_req_per_s)
    text = _cost_band_text(regime, band, g, capacity_req_per_s, basis, (sh, lo_usd, hi_usd, api), reps,
                           _verdict_words(flips, cheaper, k if lower else None, lower), (k_lo, k_hi), engines(d))
    return CostBand(regime, g, g * band.low, g * band.high, capacity_req_per_s, cap_lo, cap_hi, basis, unit, sh,
                    lo_usd, hi_usd, api, *reps, flips, text, band.source)


def band_multipliers(capacity: CapacityBand | None) -> tuple[float, float] | None:
    """The capacity band's ends as multipliers of the capacity (low ÷ value, high ÷ value: both below 1 where a
    latency binds, ``binding_band``), which the decision prices at; None without a band or with a low end of 0 (no
    capacity to size replicas on: the throughput band stands)."""
    if capacity is None or not capacity.value or capacity.low <= 0:
        return None
    return capacity.low / capacity.value, capacity.high / capacity.value


def band_inputs(inputs: Any, capacity: CapacityBand | None) -> Any:
    """``inputs`` (``cost_summary.DecisionInputs``) with the decision's capacity band set to the capacity search's
    (:func:`band_multipliers`: the ends the decision is redone at, ``ledgers.decision.BandEnd``) and its source saying
    so; unchanged where that band is the one it already has (a throughput-bound capacity) or there is none."""
    ks = band_multipliers(capacity)
    if inputs is None or ks is None or capacity is None:
        return inputs
    sides = (1.0 - ks[0], ks[1] - 1.0)
    if inputs.band_sides is not None and all(abs(a - b) < 1e-9 for a, b in zip(sides, inputs.band_sides)):
        return inputs
    from dataclasses import replace

    where = f"; {capacity.elsewhere}" if capacity.elsewhere else ""
    src = f"80% band of the simulated SLO capacity ×{ks[0]:.2f}–×{ks[1]:.2f}: {capacity.text}{where}"
    return replace(inputs, band_sides=sides, capacity_band=max(abs(sides[0]), abs(sides[1])), band_source=src)


@dataclass(frozen=True)
class _Scaled:
    """A capacity band as ``cost_band`` reads a ``Band``: multipliers ``low``/``high``, ``around``, the data."""

    low: float
    high: float
    source: str
    elsewhere: str

    @classmethod
    def of(cls, capacity: CapacityBand | None, throughput: Any) -> _Scaled | None:
        """``capacity``'s band, or None where it is the ``throughput`` band around the capacity (or there is none)."""
        ks = band_multipliers(capacity)
        if ks is None or capacity is None:
            return None
        if throughput is not None and all(abs(a - b) < 1e-9 for a, b in zip(ks, (throughput.low, throughput.high))):
            return None
        return cls(*ks, capacity.source, capacity.elsewhere)

    def around(self, value: float) -> tuple[float, float]:
        return value * self.low, value * self.high


def _verdict_words(flips: bool, cheaper: str, k: float | None, lower: bool) -> str:
    """What the band does to the verdict: holds, FLIPS inside it, or (a capacity only bounded below, ``lower``) MAY
    FLIP at the capacity multiplier ``k`` that the offered load does not rule out."""
    if not lower:
        return ("the decision FLIPS inside the band — the simulator cannot settle it; measure the capacity (kvledger "
                "calibrate --scope gpu, then validate)" if flips else f"{cheaper} is cheaper across the whole band")
    if not flips:
        return (f"{cheaper} is cheaper from the band's low end up, at any higher capacity" if cheaper == "self-hosting"
                else "the API is cheaper at any capacity, however high")
    if cheaper == "self-hosting":
        return f"the decision FLIPS at the band's low end; {_OFFERED_FIX}"
    at = f" were the capacity {k:.2f}× the one priced" if k is not None else " at a higher capacity"
    return f"the decision MAY FLIP: self-hosting would be cheaper{at}, which the offered load does not rule out; " \
           f"{_OFFERED_FIX}"


_OFFERED_FIX = "drop --at-offered-load to price at the SLO capacity the simulation finds"


def _cost_band_text(regime: str, band: Any, g: float, cap: float | None, basis: str, usd: tuple[float | None, ...],
                    reps: tuple[int | None, ...], verdict: str, ks: tuple[float, float | None],
                    per_unit: int = 1) -> str:
    lo, hi = band.around(g)
    sh, lo_usd, hi_usd, api = usd
    whose = ", a latency limit's, as the capacity search bands it" if isinstance(band, _Scaled) else ""
    cap_text = "" if cap is None else (f"; SLO capacity {cap:.4g} req/s, band {cap * band.low:.4g}–"
                                       f"{cap * band.high:.4g} req/s{whose}")
    where = f", {band.elsewhere}" if band.elsewhere else ""  # its runs on other GPUs only (Band.on_gpu)
    at = ("at the SLO capacity" if ks[1] is not None else
          "at the offered load (only a lower bound on the SLO capacity: the run looks under-loaded)")
    head = (f"goodput {at} {g:.4g} good req/s (80% band {lo:.4g}–{hi:.4g} good req/s, {scope_words(regime)}"
            f"{where}{cap_text})")
    if basis == "monthly bill":
        def one(r: int | None, usd_: float) -> str:
            return f"{units_text(r, per_unit)} ${usd_:,.2f}"

        high = ("no upper end" if hi_usd is None else f"{one(reps[2], hi_usd)} at ×{ks[1]:.2f}")
        body = (f"self-hosted bill ${sh:,.2f}/month ({units_text(reps[0], per_unit)}): "
                f"{one(reps[1], lo_usd)} at ×{ks[0]:.2f} capacity, {high}; vs the API's ${api:,.2f}/month")
    else:
        rng = f"band ${hi_usd:.6f}–${lo_usd:.6f}" if hi_usd is not None else f"at most ${lo_usd:.6f}, no lower end"
        body = f"self-hosted ${sh:.6f} per good request (input and output tokens; {rng}) vs the API's ${api:.6f}"
    return f"{head}; {body}: {verdict}"


def capacity_band(setup: Any, capacity_req_per_s: float | None, search: Any = None,
                  slo: Any = None) -> CapacityBand | None:
    """The 80% band of an SLO capacity (req/s) found by simulation, with a sentence; None without a band or value.
    Where the capacity is the boundary of the request-rate ``search`` (``sim_boundary.SimBoundary``) and a latency
    limit of ``slo`` binds it below saturation (``binding_band.latency_binding``), that latency's error band is carried
    to the rate (``Binding.rate_at``); otherwise the saturation throughput's band, around the capacity."""
    from kvledger.analyses.serving.binding_band import latency_binding

    regime = setup_regime(setup)
    at_boundary = search is not None and slo is not None and capacity_req_per_s == search.boundary.boundary_value
    binding = latency_binding(search, slo) if at_boundary else None
    latency = setup_band(setup, f"{binding.metric}_mean") if binding is not None and capacity_req_per_s else None
    band = latency or setup_band(setup, "throughput")
    if band is None or not capacity_req_per_s:
        return None
    if latency:
        return carried_band(capacity_req_per_s, binding, band, regime)
    return throughput_band(capacity_req_per_s, band, regime)


def throughput_band(capacity_req_per_s: float, band: Any, regime: str, more: str = "") -> CapacityBand:
    """The saturation throughput's error ``band`` around the capacity (no latency binds it below saturation, or TTFT
    does, whose band near a capacity was not measured), ``more`` added to the scope words."""
    lo, hi = band.around(capacity_req_per_s)
    return _capacity_band(capacity_req_per_s, lo, hi, regime, band, scope_words(regime) + more)


def carried_band(capacity_req_per_s: float, binding: Any, band: Any, regime: str, more: str = "") -> CapacityBand:
    """A latency's error ``band`` carried to the rate through ``binding`` (``binding_band.Binding.rate_at``: its high
    multiplier gives the low end), ``more`` added to the scope words."""
    lo, hi = binding.rate_at(band.high), binding.rate_at(band.low)
    return _capacity_band(capacity_req_per_s, lo, hi, regime, band, f"{scope_words(regime)}; {binding.words()}{more}")


def _capacity_band(c: float, lo: float, hi: float, regime: str, band: Any, scope: str) -> CapacityBand:
    from kvledger.units import fmt_plain as four  # as the answer line prints a capacity (report.figure.fmt, 4 digits)

    return CapacityBand(c, lo, hi, regime, band.source, f"SLO capacity {four(c)} req/s (80% band {four(lo)}–{four(hi)} "
                        f"req/s, {scope})", band.elsewhere)
