"""The 80% error bands of a validated load sweep (``kvledger validate --sweep``) and of one validated run
(``kvledger validate FILE``: ``run_bands``, the same rules on one run).

The band is the one of the regime that priced the stages (``kvledger.analyses.serving.prediction_bands.setup_band``:
``kvledger.ledgers.error_band``'s, made honest for a GPU profile as ``simulate``'s is), applied as ``simulate``
applies it: around a simulated figure, where the measured one fell on 80% of the leave-one-deployment-out points
(``Band.around``). It is applied only to the figures whose error that validation measured
(``benchmarks/lodo_bands.py``):

- the saturation throughput, the largest simulated stage throughput (req/s): lodo's throughput error of a sweep is
  this very figure's; left out when no stage reached saturation (every stage's throughput is then its offered load,
  as ``simulate`` leaves out the throughput band of a run that kept up);
- each stage's mean TTFT and mean TPOT (s), where the stage was below saturation (``below_saturation``) and the
  simulated queue did not grow: lodo measured latency errors there only; the mean TTFT's band is withheld where the
  run sat at or past its knee (``at_knee``: ``kvledger.calibration.knee_growth``; ``knee_note``), its TPOT's kept.

At the knee the mean TTFT is mostly the queue's wait, which grows as 1/(1 − utilisation): a step time a few percent
off moves it by seconds, an error of another kind and size than the step cost's the band was measured on. TPOT and
the saturation throughput do not carry the wait and keep theirs.

The sweep's knee (its rate, ``knee_req_per_s``) carries none: no validation measured the error of a knee's
rate, so a band on it would be invented.

One run is judged on the figures its regime makes meaningful: below saturation (a stage by ``below_saturation``, a
per-request run whose measured queue did not grow) with a simulated queue that did not grow, its mean TTFT and TPOT
(its throughput is then the load it was offered); otherwise its throughput, then its capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.prediction_bands import PredictionBand
from kvledger.calibration.judged_band import JudgedBand, judged
from kvledger.calibration.stage_launch import BEHIND
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.fell_behind import FELL_BEHIND_SHARE, fell_behind, kept_up_rate

__all__ = ["SERVED", "below_saturation", "closed_loop_words", "stage_saturation_words", "SweepBands", "sweep_bands",
           "KNEE_UNBANDED", "RunBands", "run_bands", "latency_note", "knee_note"]

#: a stage whose engine served less than this share of what a server keeping up completes was saturated (CodeLlama-34B's
#: reasoning stage of inference-sim/training was sent at 4 req/s and served 3.22: its queue grew all stage): goodput's
#: and cost's fell-behind rule, one function (``ledgers.fell_behind``), its drain allowance where the stage has one
SERVED = FELL_BEHIND_SHARE
KNEE_UNBANDED = ("no error band on the knee: the leave-one-deployment-out validation behind the bands "
                 "(kvledger/ledgers/data/error_bands.json) measured the errors of mean TTFT and TPOT below saturation "
                 "and of saturation throughput, not of a knee's rate")
NO_REGIME_RUN = "no measured run stands for this regime"


def below_saturation(stage: Any) -> bool:
    """Whether a stage (``kvledger.calibration.sweep.Stage``) was below saturation: its client kept the requested rate
    (achieved ≥ ``BEHIND`` × requested) and the engine did not fall behind it (``ledgers.fell_behind.fell_behind``:
    served ≥ ``SERVED`` × what a server keeping up completes, the requested rate less the drain of the stage's
    typical E2E where its records give one, else the requested rate) — the stages whose latency errors the
    leave-one-deployment-out bands were built from (``benchmarks/lodo_bands.py``)."""
    rate = stage.requested_rate
    return stage.achieved_rate >= BEHIND * rate and fell_behind(rate, stage.requests_per_s, **_drain(stage)) is None


def _drain(stage: Any) -> dict[str, Any]:
    """The fell-behind rule's drain allowance of a stage: its request count and typical E2E, s (none: aggregates)."""
    e = getattr(stage, "typical_e2e_s", None)
    return {"num_requests": stage.count, "drain_s": e} if e else {}


def closed_loop_words(stage: Any, run: Any = None) -> str | None:
    """Why a closed-loop stage (``Stage.client_users``: a run sent at request_rate inf under a client cap) has no
    band, in words; None for an open-loop stage (or none). A closed loop's clients, not a rate, set its load and its
    throughput (N in flight over each request's latency): the leave-one-deployment-out bands were measured on
    open-loop stages, their latency below saturation and their throughput at it. A capped stage sent at a finite rate
    (paced) is one too where either side's clients fell behind the rate (``run.saturated``) while the engine had room
    for all of them (cap ≤ ``max_num_seqs`` of ``run.engine``): the cap, not the engine, held the load; with a larger
    cap the engine queued first, an open-loop stage at saturation (kubecon's 440 against 128)."""
    users = getattr(stage, "client_users", None)
    if not users:
        return None
    if math.isfinite(stage.requested_rate):
        room = run is not None and users <= getattr(getattr(run, "engine", None), "max_num_seqs", 0)
        if not (room and (run.saturated or {}).get("sides")):
            return None
        return (f"its client's cap of {users:,} in flight, within the engine's max_num_seqs, held the load once its "
                "clients fell behind the rate: a closed loop, not the open-loop saturation the bands were measured on")
    return (f"a closed loop of {users:,} clients, not a request rate, set the run's load and throughput; the bands "
            "were measured on open-loop stages (latency below saturation, throughput at it)")


def stage_saturation_words(stage: Any) -> str:
    """Why a stage is not ``below_saturation``, in words: "stage was at saturation (client achieved … req/s
    requested; below it needs ≥ 95% and ≥ 90%)"."""
    drain = _drain(stage)
    kept = (f"; a server keeping up completes {kept_up_rate(stage.requested_rate, **drain):.4g} req/s: its "
            f"{stage.count:,} requests arrive over {stage.count / stage.requested_rate:.4g} s, then a typical E2E of "
            f"{drain['drain_s']:.4g} s" if drain else "")
    return (f"stage was at saturation (client achieved {stage.achieved_rate:.4g} and engine served "
            f"{stage.requests_per_s:.4g} of {stage.requested_rate:.4g} req/s requested{kept}; below it needs "
            f"≥ {BEHIND:.0%} and ≥ {SERVED:.0%}{' of that' if drain else ''})")


@dataclass(frozen=True)
class SweepBands:
    """The bands of a sweep (module docstring): ``regime`` that priced it; ``saturation_throughput`` (req/s; None:
    no band, ``throughput_note`` says why); per stage, in rate order, the band of its simulated mean TTFT and TPOT
    (s; None where the stage has none, ``stage_notes`` saying why, else None; ``ttft_notes``: why a stage with a TPOT
    band has no TTFT band — it sat at its knee, ``knee_note`` — else None). ``to_dict`` is ``error_bands`` of
    ``validate --sweep --json``."""

    __json__ = ("regime", "saturation_throughput", "throughput_note", "ttft_mean", "ttft_notes", "tpot_mean",
                "stage_notes", ("knee_req_per_s", "knee"), "knee_note")
    regime: str
    saturation_throughput: PredictionBand | None
    throughput_note: str | None
    ttft_mean: list[PredictionBand | None]
    tpot_mean: list[PredictionBand | None]
    stage_notes: list[str | None]
    ttft_notes: list[str | None]

    @property
    def knee(self) -> None:
        """Always None: the knee has no band (``KNEE_UNBANDED``)."""
        return None

    @property
    def knee_note(self) -> str:
        return KNEE_UNBANDED

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _band(band: Any, value: float | None, measured: float | None = None) -> JudgedBand | None:
    return judged(band, value, measured)


def latency_note(run: Any, stage: Any) -> str | None:
    """Why a validated run (``validate.RunValidation``) has no latency band, None when it has one: its ``stage``
    (``Stage``; None for a per-request run) was not ``below_saturation``, its measured queue grew (a per-request run)
    or its simulated queue grew."""
    sides = (run.saturated or {}).get("sides", ())
    if closed := closed_loop_words(stage, run):
        return closed
    if stage is not None and not below_saturation(stage):
        return (f"the measured {stage_saturation_words(stage)}: its latency measures the queue, and the bands were "
                "measured below saturation only")
    if "measured" in sides:
        return ("the measured run was saturated (its queue grew): its latency measures the queue, and the bands were "
                "measured below saturation only")
    if "simulated" in sides:
        return "the simulated queue grew: its latency measures the queue, and the bands were measured below saturation"
    return None


def knee_note(run: Any) -> str | None:
    """Why a validated run's (``validate.RunValidation``) mean TTFT has no band though its TPOT may: it sat at or past
    its knee (``run.at_knee``; module docstring); None when it did not."""
    knee = getattr(run, "at_knee", None)
    if knee is None:
        return None
    sides = knee["sides"]
    whose = f"the {sides[0]} run's" if len(sides) == 1 else "both runs'"
    return (f"at or past its knee ({whose} waits for a first token grew through it): its mean TTFT measures the "
            "queue, whose wait grows as 1/(1 − utilisation), not the step cost's error the band was measured on; "
            "TPOT keeps its band")


def _simulated(run: Any, metric: str, side: str = "predicted") -> float | None:
    """The simulated figure of ``run``'s comparison row ``metric`` (None when it has none); ``side`` "measured": the
    measured one."""
    return next((getattr(row, side) for row in run.comparison.rows if row.metric == metric), None)


def _latency_bands(run: Any, below: bool) -> tuple[PredictionBand | None, PredictionBand | None]:
    """The bands of ``run``'s simulated mean TTFT and TPOT when it was below saturation (``latency_note`` None), else
    none; no TTFT band when it sat at its knee (``knee_note``)."""
    if not below:
        return None, None
    ttft = None if knee_note(run) else _band(run.bands.get("ttft_mean"), _simulated(run, "TTFT mean"),
                                             _simulated(run, "TTFT mean", "measured"))
    return ttft, _band(run.bands.get("tpot_mean"), _simulated(run, "TPOT mean"),
                       _simulated(run, "TPOT mean", "measured"))


def _regime(run: Any) -> str:
    return next((b.regime for b in run.bands.values() if b is not None), "")


def _past_saturation(run: Any, stage: Any, note: str | None) -> bool:
    """Whether a stage without a latency band (``note``) stands for the engine's capacity: an open-loop stage at
    saturation, or a closed loop of more clients than the engine runs at once (``max_num_seqs``: the rest queued)."""
    if note is None:
        return False
    if closed_loop_words(stage, run) is None:
        return True
    return (getattr(stage, "client_users", None) or 0) > getattr(getattr(run, "engine", None), "max_num_seqs", math.inf)


def sweep_bands(runs: list[Any], stages: list[Any], simulated_throughput: float | None) -> SweepBands:
    """The bands of a sweep's ``runs`` (``validate.RunValidation``, each with the ``bands`` of the regime that priced
    it) at ``stages`` (their ``Stage``, same order), with the simulated saturation throughput (req/s)."""
    notes = [latency_note(run, st) for run, st in zip(runs, stages)]
    pairs = [_latency_bands(run, n is None) for run, n in zip(runs, notes)]
    ttft, tpot = [t for t, _ in pairs], [p for _, p in pairs]
    knee = [knee_note(run) if n is None else None for run, n in zip(runs, notes)]
    if all(n is None for n in notes):
        thr, why = None, ("no stage reached saturation: the largest throughput is the offered load of the fastest "
                          "stage, not the capacity the band is for")
    elif not any(_past_saturation(run, st, n) for run, st, n in zip(runs, stages, notes)):
        thr, why = None, ("no stage was past saturation: its closed loops held no more requests than the engine's "
                          "max_num_seqs, so the largest throughput is what their clients drew, not the capacity the "
                          "band is for")
    else:
        measured = [x for x in (_simulated(r, "throughput", "measured") for r in runs) if x is not None]
        thr = _band(runs[0].bands.get("throughput"), simulated_throughput, max(measured, default=None))
        why = None if thr is not None else NO_REGIME_RUN
    return SweepBands(_regime(runs[0]), thr, why, ttft, tpot, notes, knee)


@dataclass(frozen=True)
class RunBands:
    """The bands of one validated run (module docstring): ``regime`` that priced it; the band of its simulated mean
    TTFT and TPOT (s; None where it has none, ``latency_note`` saying why, else None; ``ttft_note``: why the mean
    TTFT alone has none — the run sat at its knee, ``knee_note`` — else None); the band of its simulated throughput
    when that is its saturation throughput (req/s; None: ``throughput_note`` says why). ``to_dict`` is
    ``error_bands`` of ``validate FILE --json``: the sweep's keys for one run."""

    __json__ = ("regime", "ttft_mean", "ttft_note", "tpot_mean", "latency_note", "saturation_throughput",
                "throughput_note")
    regime: str
    ttft_mean: PredictionBand | None
    tpot_mean: PredictionBand | None
    latency_note: str | None
    saturation_throughput: PredictionBand | None
    throughput_note: str | None
    ttft_note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def run_bands(run: Any, stage: Any) -> RunBands:
    """The bands of one validated ``run`` (``validate.RunValidation``) of ``stage`` (its ``Stage``; None for a
    per-request run): the latency bands below saturation, else the throughput band (module docstring)."""
    note = latency_note(run, stage)
    below = note is None
    ttft, tpot = _latency_bands(run, below)
    if below:
        note = None if ttft or tpot else NO_REGIME_RUN
        thr, why = None, ("the run was below saturation: its throughput is the offered load, not the capacity the band "
                          "is for")
    elif closed := closed_loop_words(stage, run):
        thr, why = None, closed
    else:
        thr = _band(run.bands.get("throughput"), _simulated(run, "throughput"),
                    _simulated(run, "throughput", "measured"))
        why = None if thr is not None else NO_REGIME_RUN
    return RunBands(_regime(run), ttft, tpot, note, thr, why, knee_note(run) if below else None)
