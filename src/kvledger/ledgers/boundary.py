"""SLO-boundary search: the largest load (request rate, concurrency or max_num_seqs) whose attainment meets a target.

This is DistServe's goodput (Zhong et al., OSDI 2024 §2: "the maximum request rate that
can be served while meeting a specified SLO attainment", e.g. 90 %), as opposed to
benchmark goodput at one load. Two ways in:

* :func:`boundary_from_sweep` — over measured runs at several loads (one benchmark file
  per rate, inference-perf stages, GuideLLM sweeps): the boundary is the largest value
  below which *every* measured value meets the target (conservative when the sweep is
  not monotone; the largest passing value is reported too);
* :func:`search_boundary` — drives any ``value → run`` callable (the simulator, later) by
  bisection, assuming attainment falls as load rises.

Estimates (percentile-only files) use their lower-bound attainment.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvledger.errors import InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.jsonable import json_fields, to_jsonable
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO
from kvledger.ranges import ATTAINMENT_TARGET
from kvledger.records import RunRecords

__all__ = ["AXES", "BoundaryPoint", "BoundaryResult", "axis_value", "boundary_from_sweep", "search_boundary",
           "unsustained_note", "missed_words", "IDLE_STEP_WORDS"]

AXES = {"request_rate": "offered request rate, req/s", "concurrency": "client concurrency limit, requests",
        "max_num_seqs": "engine max_num_seqs (from the run's metadata, e.g. vLLM --metadata max_num_seqs=256)"}


@dataclass(slots=True)
class BoundaryPoint:
    """One evaluated load: its value on the axis, attainment (lower bound for estimates) and goodput.

    ``queue_grew``: True when the run's queue kept growing while requests arrived (an open loop the engine did not
    sustain), which misses the target whatever its attainment: the attainment of a finite run counts the requests that
    were served before the queue grew long, and in steady state that queue grows without bound; False when the check
    was made and the run kept up; None (null in the JSON) when no check was made (measured sweeps, closed loops).
    ``too_short``: True when the run was too short to show its load (more than half its requests still in the system
    at its last arrival: ``kvledger.analyses.serving.probe_length``), which misses the target whatever its attainment;
    None (null) otherwise. Every point's JSON carries every key.
    """

    value: float
    attainment: float
    meets_target: bool
    estimate: bool
    goodput_req_per_s: float | None
    label: str
    queue_grew: bool | None = None
    too_short: bool | None = None


@json_fields(exclude=("points",), extra=("slo_capacity_req_per_s", "points"))  # the points last
@dataclass(slots=True)
class BoundaryResult:
    """Outcome of a boundary search.

    Attributes:
        boundary_value: largest value with every evaluated value up to it meeting the target; None
            when even the lowest misses it.
        largest_passing_value: largest evaluated value meeting the target (may exceed the boundary
            when attainment is not monotone). A fact about the points, not a capacity: with ``boundary_value``
            None it is kept and ``largest_passing_note`` says why it is not one.
        first_failing_value: smallest evaluated value missing the target, if any.
        boundary_per_gpu: boundary ÷ GPUs for the request-rate axis when the GPU count is known
            (DistServe optimises goodput per GPU).
        largest_passing_note: why ``largest_passing_value`` is not a capacity, only when there is one and
            ``boundary_value`` is None; None (null in the JSON: the key is always there) otherwise.
        slo_capacity_req_per_s (JSON, a property): on the request-rate axis the boundary, the SLO capacity under the
            name ``cost`` and ``search`` give it; None on the other axes (not a rate) or without a boundary.
    """

    axis: str
    target: float
    slo: dict[str, Any]
    points: list[BoundaryPoint]
    boundary_value: float | None
    largest_passing_value: float | None
    first_failing_value: float | None
    boundary_per_gpu: float | None = None
    notes: list[str] = field(default_factory=list)
    largest_passing_note: str | None = None

    @property
    def slo_capacity_req_per_s(self) -> float | None:
        return self.boundary_value if self.axis == "request_rate" else None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def axis_value(run: RunRecords | AggregateRun, axis: str) -> float:
    """The run's value on ``axis`` from its metadata (``max_num_seqs`` from ``metadata.extra``).

    Raises:
        InputError: unknown axis, or the run does not state the value (or states an infinite rate).
    """
    return _axis_value(run, axis, alone=False)


_SWEPT = {"request_rate": "request rates", "concurrency": "concurrencies", "max_num_seqs": "max_num_seqs values"}


def _axis_value(run: RunRecords | AggregateRun, axis: str, alone: bool) -> float:
    """``axis_value``; ``alone``: the run is the only one given, so its refusal says that a capacity search over
    measured runs needs a sweep (one run at one load has no boundary to find), and how to search without one."""
    if axis not in AXES:
        raise InputError(f"unknown boundary axis {axis!r}; use one of {', '.join(AXES)}")
    md = run.metadata
    v = md.extra.get(axis) if axis == "max_num_seqs" else getattr(md, axis)
    try:
        x = float(v) if v is not None else math.nan
    except (TypeError, ValueError):
        x = math.nan
    if not math.isfinite(x):
        label = md.extra.get("run_label")
        label = f"{Path(md.source).name} [{label}]" if label else md.source
        closed = axis == "request_rate" and v is not None  # request_rate=inf: every request at t = 0
        if alone:
            raise InputError(f"{label}: one run{' at request_rate=inf' if closed else ''}: a capacity search over "
                             f"measured files needs a sweep, several runs at different {_SWEPT[axis]} (their files "
                             "together, or one file holding the sweep); or search by simulation: --simulate MODEL "
                             "--gpu GPU")
        hint = " (request_rate=inf is a closed-loop run; use --axis concurrency)" if closed else ""
        raise InputError(f"{label}: the run states no finite {axis}{hint}")
    return x


def _point(value: float, res: GoodputResult, target: float, queue_grew: bool | None = None,
           too_short: bool | None = None) -> BoundaryPoint:
    met = res.attainment >= target and not queue_grew and not too_short
    return BoundaryPoint(value, res.attainment, met, res.estimate, res.goodput_req_per_s, res.run_label or res.source,
                         queue_grew, too_short or None)


def unsustained_note(points: list[BoundaryPoint], axis: str, target: float, check: str) -> list[str]:
    """The note for the points whose attainment met ``target`` but whose queue kept growing (``queue_grew``), counted
    as missing it; ``check`` names the rule that read the queue. [] when there are none."""
    grew = sorted(p.value for p in points if p.queue_grew and p.attainment >= target)
    if not grew:
        return []
    return [f"sustained load only: {', '.join(f'{v:g}' for v in grew)} ({axis}) met the attainment target with the "
            f"queue still growing at the last arrival past what the trace's own bursts explain ({check}) and "
            f"count{'s' if len(grew) == 1 else ''} as missing it — a finite run scores the requests served before the "
            "queue grew long, but over these arrivals the engine fell behind, and a longer run at that load would "
            "wait ever longer (more requests per probe, --num-requests, read it more surely)"]


def _finish(axis: str, target: float, slo: SLO, points: list[BoundaryPoint], gpus: int | None,
            notes: list[str]) -> BoundaryResult:
    points.sort(key=lambda p: p.value)
    boundary = None
    for p in points:
        if not p.meets_target:
            break
        boundary = p.value
    passing = [p.value for p in points if p.meets_target]
    failing = [p.value for p in points if not p.meets_target]
    res = BoundaryResult(axis, target, slo.to_dict(), points, boundary, max(passing) if passing else None,
                         min(failing) if failing else None, notes=notes)
    if boundary is None:
        notes.append(f"attainment misses {target:.0%} already at the lowest {axis} evaluated ({points[0].value:g})")
        if passing:
            res.largest_passing_note = (
                f"not a capacity: {max(passing):g} met the target but the lowest {axis} evaluated "
                f"({points[0].value:g}) missed it, so no {axis} up to it holds the target (boundary_value is null)")
    elif res.largest_passing_value != boundary:
        notes.append(f"attainment is not monotone: {res.largest_passing_value:g} passes again after "
                     f"{res.first_failing_value:g} failed; the boundary stays at {boundary:g}")
    if not failing and boundary is not None:
        notes.append(f"the target holds at every {axis} evaluated: the true boundary may be higher")
    if any(p.estimate for p in points):
        notes.append("some points are estimates from percentiles: their lower-bound attainment was used")
    if axis == "request_rate" and boundary is not None and gpus:
        res.boundary_per_gpu = boundary / gpus
    return res


def boundary_from_sweep(runs: list[RunRecords | AggregateRun], slo: SLO, target: float, axis: str = "request_rate",
                        values: list[float] | None = None) -> BoundaryResult:
    """Boundary over measured runs; ``values`` overrides the axis values read from metadata.

    Raises:
        InputError: target outside (0, 1], no runs, a run without the axis value, duplicate values.
    """
    _check_target(target)
    if not runs:
        raise InputError("no runs to search")
    vals = list(values) if values is not None else [_axis_value(r, axis, alone=len(runs) == 1) for r in runs]
    if len(vals) != len(runs):
        raise InputError(f"{len(vals)} axis values for {len(runs)} runs")
    if len(set(vals)) != len(vals):
        raise InputError(f"two runs share the same {axis}; the sweep is ambiguous: {sorted(vals)}")
    points = [_point(v, goodput(r, slo), target) for v, r in zip(vals, runs)]
    gpus = {r.metadata.num_gpus for r in runs}
    return _finish(axis, target, slo, points, gpus.pop() if len(gpus) == 1 else None, [])


def search_boundary(run_at: Callable[[float], RunRecords | AggregateRun], slo: SLO, target: float, lo: float, hi: float,
                    *,
                    axis: str = "request_rate", integer: bool = False, tol: float | None = None,
                    max_evals: int = 30, known: tuple[float, float] | None = None,
                    queue_grew: Callable[[float, RunRecords | AggregateRun], bool | None] | None = None,
                    too_short: Callable[[float], bool | None] | None = None) -> BoundaryResult:
    """Bisection for the largest value in [lo, hi] whose attainment meets ``target`` (and, with ``queue_grew``,
    whose run kept up).

    ``run_at(value)`` must return the run at that load (deterministic, e.g. a seeded simulation).
    Stops when the bracket is narrower than ``tol`` (default (hi − lo)/1000; 1 for ``integer``)
    or after ``max_evals`` evaluations. Assumes attainment does not rise with load.
    ``known``: (good, bad) with lo ≤ good < bad ≤ hi, a state of this bisection already reached (good meets, bad
    misses; an end of [lo, hi] that is neither was implied by them, e.g.
    ``kvledger.analyses.serving.sim_bracket.guessed_bracket``): it goes on from there, with the same midpoints, and
    counts an end not evaluated as one evaluation.
    ``queue_grew(value, run)``: whether that run's queue kept growing (``BoundaryPoint.queue_grew``): such a point
    misses the target whatever its attainment (the caller adds ``unsustained_note``); None: every point judged on its
    attainment alone. ``too_short(value)``: whether that (evaluated) run was too short to show its load
    (``BoundaryPoint.too_short``), a miss in the same way.

    Raises:
        InputError: lo ≥ hi, negative lo, target outside (0, 1].
    """
    _check_target(target)
    if not (0 <= lo < hi):
        raise InputError(f"need 0 ≤ lo < hi, got lo={lo}, hi={hi}")
    step = 1.0 if integer else (tol if tol is not None else (hi - lo) / 1000.0)
    points: list[BoundaryPoint] = []
    gpus: list[int | None] = []
    results: list[Any] = []

    def evaluate(v: float) -> bool:
        run = run_at(int(v) if integer else v)
        gpus.append(run.metadata.num_gpus)
        results.append(goodput(run, slo))
        points.append(_point(v, results[-1], target, None if queue_grew is None else queue_grew(v, run),
                             None if too_short is None else too_short(v)))
        return points[-1].meets_target

    notes = [
        f"bisection on {axis} in [{lo:g}, {hi:g}], resolution {step:g}; assumes attainment does not rise with load"
    ]
    good, bad = known if known is not None else (lo, hi)
    implied = (good != lo) + (bad != hi)
    if not evaluate(good):
        # The "step time itself is over the limit" reading holds only where the lowest value is a light load (rate,
        # users) and its own attainment missed; not when the miss is a growing queue or too short a run, nor on
        # max_num_seqs, whose lowest value is the tightest engine at the same load.
        why = missed_words(results[-1], slo) if points[-1].attainment < target and axis in _LOAD_AXES else ""
        notes[0] = f"no bisection: the lowest {axis} of the bracket, {good:g}, already misses" + why
    elif not evaluate(bad):
        while bad - good > step and len(points) + implied < max_evals:
            mid = (good + bad) / 2.0
            mid = math.floor(mid) if integer else mid
            if mid in (good, bad):
                break
            good, bad = (mid, bad) if evaluate(mid) else (good, mid)
    return _finish(axis, target, slo, points, gpus[0] if len(set(gpus)) == 1 else None, notes)


_LOAD_AXES = ("request_rate", "rate", "concurrency")  # axes whose lowest value is the lightest load


IDLE_STEP_WORDS = (": with the engine nearly idle the step time itself is over the limit, so no lower load meets it (a "
                   "faster GPU, a higher TP or a looser limit would)")
"""Why an almost idle run misses, where nothing tells another cause (``missed_words``): one string, so an analysis that
knows the cause (``kvledger.analyses.serving.itl_budget.idle_cause``) replaces exactly it."""


def missed_words(res: Any, slo: SLO, cause: str | None = None) -> str:
    """What the requests of an (almost idle) run missed, by limit: ``"; there 812 of 812 completed requests missed
    tpot ≤ 50 ms"`` and why (``cause``; by default ``IDLE_STEP_WORDS``: where every load misses, the step time itself is
    over the limit, and a faster GPU, a higher TP or a looser limit is the way out, not less load); "" without
    counts."""
    missed = {m: k for m, k in (getattr(res, "num_missed", None) or {}).items() if k}
    if not missed or not res.num_completed:
        return ""
    limits = dict(slo.constraints())
    parts = [f"{k:,} missed {m} ≤ {limits[m] * 1e3:,.0f} ms" for m, k in missed.items() if m in limits]
    return f"; there, of {res.num_completed:,} completed requests, " + ", ".join(parts) + (cause or IDLE_STEP_WORDS)


def _check_target(target: float) -> None:
    ATTAINMENT_TARGET.check("attainment target", target)
