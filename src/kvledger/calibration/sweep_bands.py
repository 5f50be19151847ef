"""The 80% error bands of a validated load sweep (``kvledger validate --sweep``).

The band is the one of the regime that priced the stages (``kvledger.analyses.serving.prediction_bands.setup_band``:
``kvledger.ledgers.error_band``'s, made honest for a GPU profile as ``simulate``'s is), applied as ``simulate``
applies it: around a simulated figure, where the measured one fell on 80% of the leave-one-deployment-out points
(``Band.around``). It is applied only to the figures whose error that validation measured
(``benchmarks/lodo_bands.py``):

- the saturation throughput, the largest simulated stage throughput (req/s): lodo's throughput error of a sweep is
  this very figure's; left out when no stage reached saturation (every stage's throughput is then its offered load,
  as ``simulate`` leaves out the throughput band of a run that kept up);
- each stage's mean TTFT and mean TPOT (s), where the stage was below saturation (``below_saturation``) and the
  simulated queue did not grow: lodo measured latency errors there only.

The knee carries none: no validation measured the error of a knee's rate, so a band on it would be invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.prediction_bands import PredictionBand
from kvledger.calibration.stage_launch import BEHIND
from kvledger.jsonable import to_jsonable

__all__ = ["SERVED", "below_saturation", "SweepBands", "sweep_bands", "KNEE_UNBANDED"]

#: a stage whose engine served less than this share of the requested rate was saturated (CodeLlama-34B's reasoning
#: stage of inference-sim/training was sent at 4 req/s and served 3.22: its queue grew all stage)
SERVED = 0.9
KNEE_UNBANDED = ("no error band on the knee: the leave-one-deployment-out validation behind the bands "
                 "(kvledger/ledgers/data/error_bands.json) measured the errors of mean TTFT and TPOT below saturation "
                 "and of saturation throughput, not of a knee's rate")


def below_saturation(stage: Any) -> bool:
    """Whether a stage (``kvledger.calibration.sweep.Stage``) was below saturation: its client kept the requested rate
    (achieved ≥ ``BEHIND`` × requested) and the engine served ≥ ``SERVED`` × it — the stages whose latency errors
    the leave-one-deployment-out bands were built from (``benchmarks/lodo_bands.py``)."""
    rate = stage.requested_rate
    return stage.achieved_rate >= BEHIND * rate and stage.requests_per_s >= SERVED * rate


@dataclass(frozen=True)
class SweepBands:
    """The bands of a sweep (module docstring): ``regime`` that priced it; ``saturation_throughput`` (req/s; None:
    no band, ``throughput_note`` says why); per stage, in rate order, the band of its simulated mean TTFT and TPOT
    (s; None where the stage has none, ``stage_notes`` saying why, else None). ``to_dict`` is ``error_bands`` of
    ``validate --sweep --json``."""

    __json__ = ("regime", "saturation_throughput", "throughput_note", "ttft_mean", "tpot_mean", "stage_notes",
                ("knee_req_per_s", "knee"), "knee_note")
    regime: str
    saturation_throughput: PredictionBand | None
    throughput_note: str | None
    ttft_mean: list[PredictionBand | None]
    tpot_mean: list[PredictionBand | None]
    stage_notes: list[str | None]

    @property
    def knee(self) -> None:
        """Always None: the knee has no band (``KNEE_UNBANDED``)."""
        return None

    @property
    def knee_note(self) -> str:
        return KNEE_UNBANDED

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _band(band: Any, value: float | None) -> PredictionBand | None:
    if band is None or value is None:
        return None
    lo, hi = band.around(value)
    return PredictionBand(value, lo, hi, band.regime, band.num_runs, band.source)


def _stage_note(stage: Any, simulated_saturated: bool) -> str | None:
    if not below_saturation(stage):
        return (f"the measured stage was at saturation (client achieved {stage.achieved_rate:.4g} and engine served "
                f"{stage.requests_per_s:.4g} of {stage.requested_rate:.4g} req/s requested; below it needs ≥ "
                f"{BEHIND:.0%} and ≥ {SERVED:.0%}): its latency measures the queue, and the bands were measured below "
                "saturation only")
    if simulated_saturated:
        return "the simulated queue grew: its latency measures the queue, and the bands were measured below saturation"
    return None


def sweep_bands(runs: list[Any], stages: list[Any], simulated_throughput: float | None) -> SweepBands:
    """The bands of a sweep's ``runs`` (``validate.RunValidation``, each with the ``bands`` of the regime that priced
    it) at ``stages`` (their ``Stage``, same order), with the simulated saturation throughput (req/s)."""
    def sim(run: Any, metric: str) -> float | None:
        return next((row.predicted for row in run.comparison.rows if row.metric == metric), None)

    notes = [_stage_note(st, bool(run.saturated)) for run, st in zip(runs, stages)]
    ttft = [None if n else _band(run.bands.get("ttft_mean"), sim(run, "TTFT mean")) for run, n in zip(runs, notes)]
    tpot = [None if n else _band(run.bands.get("tpot_mean"), sim(run, "TPOT mean")) for run, n in zip(runs, notes)]
    if all(n is None for n in notes):
        thr, why = None, ("no stage reached saturation: the largest throughput is the offered load of the fastest "
                          "stage, not the capacity the band is for")
    else:
        thr = _band(runs[0].bands.get("throughput"), simulated_throughput)
        why = None if thr is not None else "no measured run stands for this regime"
    regime = next((b.regime for b in runs[0].bands.values() if b is not None), "")
    return SweepBands(regime, thr, why, ttft, tpot, notes)
