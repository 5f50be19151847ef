"""Error bands on a simulation's headline figures (mean TTFT, mean TPOT, throughput), from the regime that priced it
(``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.session_notes import load_flag
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.error_band import Band, regime_of
from kvledger.ledgers.model_band import model_profile_band
from kvledger.ledgers.profile_band import ProfileFacts, at_least_uncalibrated, profile_band

# the bands of an SLO capacity and of the cost decision are in capacity_bands.py: `simulate` reports only the
# prediction bands, and need not make those two classes
__all__ = ["NO_LATENCY_BAND", "no_latency_band", "setup_regime", "setup_band", "unmeasured_setting", "profile_facts",
           "band_coverage",
           "UNBANDED_FIGURES", "PredictionBand", "UNITS", "prediction_bands", "knee_withheld", "knee_band_note",
           "burst_ttft_note"]

#: why a saturated run prints no latency band (the note simulate adds)
NO_BAND_SHORT_RUN = ("no error band: the run was too short to tell whether it kept up (see the note before), so "
                     "its latency and throughput are of its warm-up — neither a sustained load's latency nor the "
                     "capacity, the figures the bands were measured on")


def no_latency_band(mode: str = "open loop") -> str:
    """Why a saturated run of workload ``mode`` (``workload_info["mode"]``) prints no latency band (the note simulate
    adds), naming the flag that lowers its load (``session_notes.load_flag``)."""
    return ("no TTFT or TPOT error band: the run is saturated (its queue grew), so its latency is set by how long the "
            "arrivals lasted, not by the step cost the bands measure (validate compares only throughput under "
            f"saturation); lower {load_flag(mode)} below the capacity for a latency with a band")


NO_LATENCY_BAND = no_latency_band()
"""The note of a saturated open loop (``--rate``)."""


#: the unit of each metric's band (``prediction_bands``)
UNITS = {"ttft_mean": "s", "tpot_mean": "s", "throughput": "req/s"}


@dataclass(frozen=True)
class PredictionBand:
    """One simulated figure and the 80% band of where a real engine's figure fell around such a prediction.

    Attributes:
        predicted: the simulated figure (s, or req/s for throughput); low / high: the band, same unit.
        regime: the calibration regime that priced the run; num_runs: measured runs behind the band; source: the data.
        unit: the unit of ``predicted``, ``low`` and ``high`` (:data:`UNITS`: "s" for a mean latency, "req/s" for
            throughput), so a script reading ``error_bands`` need not know each metric's.
    """

    predicted: float
    low: float
    high: float
    regime: str
    num_runs: int
    source: str
    unit: str = ""

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
UNBANDED_REASON = ("no validated band: the leave-one-deployment-out validation behind the bands (kvledger/ledgers/data/"
                   "error_bands.json) measured the errors of mean TTFT, mean TPOT and saturation "
                   "throughput only; a band for these would be invented")


def band_coverage(bands: dict[str, PredictionBand], kept_up: bool = False, burst: Any = None) -> dict[str, Any]:
    """Which figures carry a band and which do not: ``{"banded": [...], "unbanded": {figure: None, ...}, "reason":
    ..., "throughput": ...}``; ``throughput`` says, for an open loop that kept up, why its throughput has no band
    (the band is for saturation; its throughput is the offered load, or, for a burst the engine ran as one batch,
    ``burst``: ``ledgers.burst_read.BurstRead``, that batch's drain), None otherwise."""
    unbanded: dict[str, None] = dict.fromkeys(UNBANDED_FIGURES)
    unbanded.update(dict.fromkeys(m for m in ("ttft_mean", "tpot_mean", "throughput") if m not in bands))
    note = None
    if kept_up and "throughput" not in bands:
        note = (burst.no_band_reason() if burst is not None else "the run kept up with its arrivals: its throughput "
                "is the offered load, not the saturation throughput the band is for")
    return {"banded": list(bands), "unbanded": unbanded, "reason": UNBANDED_REASON, "throughput": note}


def profile_facts(prof: Any, judged: Callable[[str], bool] | None = None) -> ProfileFacts | None:
    """What the band needs of a GPU profile (``kvledger.accounting.gpu_profile.GpuProfile``; None → None). ``judged``:
    whether a check's source is the run being judged (``validate``): that check is left out, so that a run's band is
    never built from its own error. ``gpu_id``: the profile's GPU in the catalog (None for a GPU file's)."""
    if prof is None:
        return None
    from kvledger.catalog.gpus import get_gpu
    from kvledger.errors import KvLedgerError

    checks = tuple(r for r in prof.checks if judged is None or not judged(r.get("source", "")))
    try:
        gpu_id = get_gpu(prof.gpu).gpu_id  # the catalog name the profile was fitted on
    except KvLedgerError:  # a GPU file's own name: not in the catalog, so no band point is on it by id
        gpu_id = None
    return ProfileFacts(prof.label or prof.source, tuple((r["model"], r["tp"]) for r in prof.runs), tuple(prof.runs),
                        checks, gpu_id)


def setup_band(setup: Any, metric: str, judged: Callable[[str], bool] | None = None) -> Band | None:
    """The 80% band of ``metric`` for a prepared simulation: its regime's, made honest for the GPU profile that
    priced it (``kvledger.ledgers.profile_band``: the model and TP against the profile's fit, its in-sample errors),
    or, for a model-scope profile used beyond its fitted range, no narrower than the uncalibrated regime's
    (``cost_info["band_widened_by"]``: ``analyses/serving/profile_scope.py``); None for a model-scope profile carried
    to another model or TP (``cost_info["band_withheld"]``: no validation measured that, and on the one run tried its
    TPOT error, −55%, passed even the uncalibrated band); a model-scope
    profile's band is ``ledgers.model_band``'s (its own leave-one-out and in-sample errors, its fit's verdict).
    ``judged``: ``profile_facts``'."""
    regime = setup_regime(setup)
    info = setup.cost_info or {}
    if info.get("band_withheld"):  # a model-scope profile carried to another model or TP: no band measured that
        return None
    if regime.startswith("model/") and "in_sample" in info:  # a model-scope profile file (ledgers.model_band)
        band = model_profile_band(regime, metric, info.get("name", "calibration profile"), info["in_sample"],
                                  info.get("leave_one_out") or [])
    else:
        band = profile_band(regime, metric, profile_facts(getattr(setup, "gpu_profile", None), judged),
                            getattr(setup, "model_name", None), getattr(setup, "tp", None))
    widened = info.get("band_widened_by")
    band = at_least_uncalibrated(band, regime, metric, widened) if widened else band
    gpu = getattr(getattr(setup, "plan", None), "gpu", None)
    band = band.on_gpu(gpu.gpu_id, gpu.name) if band is not None and gpu is not None else band
    return None if band is None else band.beyond(unmeasured_setting(getattr(setup, "cost", None)))


def unmeasured_setting(cost: Any) -> str | None:
    """What a step cost models that no run behind the bands had: vLLM's DP ranks (``dp_lockstep_cost``), pipeline
    stages (``pipeline_cost``), a TP group across nodes (``tp_network``); None for none."""
    if getattr(cost, "dp", 1) > 1:
        return "data parallelism"
    if getattr(cost, "pp", 1) > 1:
        return "pipeline parallelism"
    return "a TP group across nodes" if getattr(cost, "allreduce_span", None) is not None else None


def prediction_bands(setup: Any, summary: dict[str, Any], saturated: bool = False,
                     kept_up: bool = False) -> dict[str, PredictionBand]:
    """metric → its band, for mean TTFT and TPOT (s) and throughput (req/s; the band holds at saturation, where
    throughput is the engine's capacity); a metric without a band is left out. ``saturated``: the run's queue grew,
    so its latency measures how long the run lasted, not the step cost (``validate`` does not compare latency under
    saturation either): no latency band. ``kept_up``: an open loop that kept up with its arrivals, whose throughput
    is the load it was offered, not a capacity: no throughput band."""
    regime = setup_regime(setup)
    values = {"ttft_mean": (summary.get("ttft_s") or {}).get("mean"),
              "tpot_mean": (summary.get("tpot_s") or {}).get("mean"),
              "throughput": summary.get("throughput_req_per_s")}
    if saturated:
        values = {"throughput": values["throughput"]}
    elif kept_up:
        del values["throughput"]
    out: dict[str, PredictionBand] = {}
    for metric, v in values.items():
        band = setup_band(setup, metric)
        if band is None or v is None:
            continue
        lo, hi = band.around(v)
        out[metric] = PredictionBand(v, lo, hi, regime, band.num_runs, band.source, UNITS[metric])
    return out


def knee_withheld(bands: dict[str, PredictionBand],
                  run: Any) -> tuple[dict[str, PredictionBand], dict[str, Any] | None]:
    """``bands`` without the mean TTFT's when the simulated ``run`` (its records) sat at or past its knee
    (``kvledger.analyses.serving.knee_rule``), with the knee's figures (``quarter_growth``'s, the rule and its
    factor: ``simulate --json``'s ``at_knee``); ``bands`` and None when it did not or has no TTFT band. There its
    mean TTFT measures the queue, whose wait grows as 1/(1 − utilisation), not the step cost's error the band was
    measured on; TPOT keeps its band (validate withholds a knee's TTFT band alike: ``calibration.sweep_bands``)."""
    from kvledger.analyses.serving.knee_rule import KNEE_GROWTH, KNEE_RULE, quarter_growth

    g = quarter_growth(run) if "ttft_mean" in bands else None
    if g is None or not g["grew"]:
        return bands, None
    return {k: v for k, v in bands.items() if k != "ttft_mean"}, {**g, "rule": KNEE_RULE, "growth_factor": KNEE_GROWTH}


def knee_band_note(knee: dict[str, Any], mode: str = "open loop") -> str:
    """The one-line reason ``simulate`` gives for a TTFT band withheld at the knee (``knee_withheld``) of a run of
    workload ``mode``, naming the flag that lowers its load."""
    from kvledger.analyses.serving.knee_rule import QUARTER_NAMES

    first, peak, nth = knee["first_s"] * 1e3, knee["peak_s"] * 1e3, QUARTER_NAMES[knee["peak_quarter"]]
    return (f"no TTFT mean error band: the run sat at or past its knee — its mean TTFT grew from {first:,.1f} ms in "
            f"the first quarter of its arrivals to {peak:,.1f} ms in the {nth} ({knee['ratio']:.1f}×; rule: "
            f"{knee['rule']}), so it measures the queue, whose wait grows as 1/(1 − utilisation), not the step cost's "
            f"error the band was measured on; TPOT keeps its band; a lower {load_flag(mode)} gives a TTFT with a band")


def burst_ttft_note(knee: dict[str, Any]) -> str:
    """The reason ``simulate`` gives for a TTFT band withheld (``knee_withheld``) on a burst the engine ran as one
    batch (``ledgers.burst_read``): with no rate there is no queue at a utilisation and no knee to be at; the TTFT
    grew through the burst's order as each prefill waited in the token budget for those ahead of it."""
    from kvledger.analyses.serving.knee_rule import QUARTER_NAMES

    first, peak, nth = knee["first_s"] * 1e3, knee["peak_s"] * 1e3, QUARTER_NAMES[knee["peak_quarter"]]
    return (f"no TTFT mean error band: the run is one batch, a burst (every request at t = 0) the engine ran at once — "
            f"its mean TTFT grew from {first:,.1f} ms in the first quarter of the burst's queue to {peak:,.1f} ms in "
            f"the {nth} ({knee['ratio']:.1f}×; rule: {knee['rule']}) as each prefill waited in the token budget for "
            "those ahead of it, so it is set by the burst's size, not by a load near capacity, nor the step cost's "
            "error the band was measured on; TPOT keeps its band; a burst has no knee to read: a rate sweep (goodput "
            "--simulate --target) finds it, and a --rate below capacity gives a TTFT with a band")
