"""GPU-scope calibration: the roofline's achievable FLOP/s and bandwidth fractions fitted on measured runs of any
models on one GPU, so that the fit carries to every model on it.

The roofline prices each step from the model's own FLOPs and bytes (``kvledger.accounting.roofline``); what it
cannot know is how much of the datasheet peak the kernels reach on this GPU. Fitting those two shares — not a
model's step times — is what transfers: a larger model at another TP has other FLOPs and bytes, but the same
GPU. The objective is ``kvledger.calibration.fit``'s (squared log-ratio errors of mean, p50, p90 TTFT, TPOT,
E2E or of a stage's aggregates), summed over the runs, each replayed with its own model, TP and engine.
Search: a coarse grid over the fractions (``GRID_FLOPS`` × ``GRID_BANDWIDTH``), then a multiplicative pattern
search around the best point (``REFINE_FACTORS``, axis and diagonal moves), fractions kept in (0, 1]. Deterministic.

``fit_frontend`` also fits a per-request latency outside the engine (HTTP, tokenization, streaming to the client:
``frontend_s``, as ``calibrate --fit-frontend`` does for a step-cost fit). It belongs to the set-up — client, server
front end, host — not to the GPU: runs timed at one client share it whatever the model, and a client-side TTFT would
otherwise pull the GPU fractions down to absorb it (the fractions fitted on kubecon's client and on
inference-sim/training's did not carry to each other for that reason). It shifts each TTFT and E2E and leaves the
schedule alone, so it is profiled out at every candidate pair of fractions from the same replays: golden-section
search over [0, ``FRONTEND_MAX_S``] (``FRONTEND_ITERS`` steps, about 0.01 ms).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.gpu_profile import GPU_PROFILE_KIND
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.analyses.serving.sim_setup import SimSetup
from kvledger.calibration.fit import shifted_term
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.errors import InputError

__all__ = ["GpuFit", "roofline_with", "fit_gpu_fractions", "gpu_profile_dict", "GRID_FLOPS", "GRID_BANDWIDTH"]

GRID_FLOPS = (0.25, 0.4, 0.6, 0.85)
GRID_BANDWIDTH = (0.35, 0.5, 0.7, 0.9)
REFINE_FACTORS = (1.12, 1.04, 1.012)
MAX_MOVES = 6  # per factor
FRONTEND_MAX_S = 0.2  # largest per-request frontend latency searched, s
FRONTEND_ITERS = 40  # golden-section steps: 0.2 s × 0.618^40 ≈ 1e-9 s
#: per factor, the eight moves of the pattern search: each fraction alone, and both together (the valleys of a
#: queueing objective run diagonally: a slower prefill can be traded for a faster decode)
_MOVES = {f: [(a, b) for a in (f, 1.0, 1 / f) for b in (f, 1.0, 1 / f) if (a, b) != (1.0, 1.0)] for f in REFINE_FACTORS}


@dataclass
class GpuFit:
    """The fitted fractions, the set-up's frontend latency (s; 0 unless fitted), the objective before (at the start
    fractions) and after, and the replays it took."""

    gpu: str
    flops_fraction: float
    bandwidth_fraction: float
    objective_start: float
    objective: float
    num_replays: int
    history: list[tuple[float, float, float]] = field(default_factory=list)
    num_refine: int = 0
    frontend_s: float = 0.0


def roofline_with(setup: SimSetup, flops_fraction: float, bandwidth_fraction: float) -> RooflineStepCost:
    """The setup's roofline step cost at other achievable fractions (same model, TP, weights, CPU overhead)."""
    cost = setup.cost
    if not isinstance(cost, RooflineStepCost):
        raise InputError("a GPU-scope fit prices steps with the roofline: start from --step-cost roofline")
    plan = setup.plan
    s = plan.settings
    from kvledger.accounting.plan import roofline_model

    return RooflineStepCost(roofline_model(plan.model, s), plan.gpu, plan.kv, s.tp, flops_fraction=flops_fraction,
                            bandwidth_fraction=bandwidth_fraction, cpu_overhead_s=cost.cpu_overhead_s,
                            weights_bytes=s.weights_bytes, overlap_cpu=cost.overlap_cpu,
                            custom_allreduce_max_bytes=cost.custom_allreduce_max_bytes)


def _best_frontend(reps: list) -> tuple[float, float]:
    """(objective, frontend_s) minimising the objective over the frontend latency, golden-section (module docstring)."""
    def f(d: float) -> float:
        return sum(shifted_term(run, res, d) for run, res in reps)

    g = (5 ** 0.5 - 1) / 2
    a, b = 0.0, FRONTEND_MAX_S
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(FRONTEND_ITERS):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = f(d)
    return min(((fc, c), (fd, d), (f(0.0), 0.0)))


def _total(items: list[tuple[MeasuredRun, SimSetup]], ff: float, bf: float, fit_frontend: bool = False,
           frontends: dict | None = None) -> float:
    """The objective summed over the runs at these fractions; with ``fit_frontend`` at the best frontend latency,
    recorded in ``frontends[(ff, bf)]``."""
    reps = [(run, replay(run, s.config, roofline_with(s, ff, bf))) for run, s in items]
    if not fit_frontend:
        return sum(shifted_term(run, res, 0.0) for run, res in reps)
    obj, fe = _best_frontend(reps)
    if frontends is not None:
        frontends[(ff, bf)] = fe
    return obj


def fit_gpu_fractions(items: list[tuple[MeasuredRun, SimSetup]], start: tuple[float, float] = (0.7, 0.8), *,
                      fit_frontend: bool = False) -> GpuFit:
    """Fit the two fractions (and, with ``fit_frontend``, the set-up's frontend latency) to the runs (module
    docstring); every run must be on the same GPU.

    Raises:
        InputError: no run, or runs on different GPUs.
    """
    if not items:
        raise InputError("a GPU-scope calibration needs at least one measured run")
    gpus = sorted({s.gpu_name for _, s in items})
    if len(gpus) > 1:
        raise InputError(f"a GPU profile is one GPU's: these runs are on {', '.join(gpus)}; calibrate each GPU apart")
    fe: dict = {}
    f0 = _total(items, *start, fit_frontend, fe)
    history = [(start[0], start[1], f0)]
    best = min(((ff, bf, _total(items, ff, bf, fit_frontend, fe)) for ff in GRID_FLOPS for bf in GRID_BANDWIDTH),
               key=lambda x: x[2])
    history.append(best)
    ff, bf, f = best
    evals = 0
    for factor in REFINE_FACTORS:
        moved, n = True, 0
        while moved and n < MAX_MOVES:
            moved, n = False, n + 1
            for dff, dbf in _MOVES[factor]:
                cf, cb = min(1.0, ff * dff), min(1.0, bf * dbf)
                if (cf, cb) == (ff, bf):
                    continue
                fc = _total(items, cf, cb, fit_frontend, fe)
                evals += 1
                if fc < f:
                    ff, bf, f, moved = cf, cb, fc, True
                    history.append((ff, bf, f))
                    break
    replays = len(items) * (1 + len(GRID_FLOPS) * len(GRID_BANDWIDTH) + evals)
    return GpuFit(gpus[0], ff, bf, f0, f, replays, history, evals, fe.get((ff, bf), 0.0))


def gpu_profile_dict(fit: GpuFit, per_run: list[dict[str, Any]], paths: list[str]) -> dict[str, Any]:
    """The GPU profile's layout (``kvledger.accounting.gpu_profile``) from a fit and each run's errors under it."""
    return {"kind": GPU_PROFILE_KIND, "version": 1, "gpu": fit.gpu, "flops_fraction": round(fit.flops_fraction, 4),
            "bandwidth_fraction": round(fit.bandwidth_fraction, 4),
            "fit": {"method": "grid over the roofline's achievable fractions, then a multiplicative pattern search, "
                              "on kvledger.calibration.fit's objective summed over the runs "
                              "(kvledger.calibration.gpu_fit)",
                    "objective_start": fit.objective_start, "objective": fit.objective,
                    "frontend_s": fit.frontend_s,
                    "frontend_note": "the set-up's per-request latency outside the engine (calibrate --fit-frontend; 0 "
                                     "when not fitted): the client's, not the GPU's, so a GPU profile never adds it",
                    "start": {"flops_fraction": 0.7, "bandwidth_fraction": 0.8}, "num_replays": fit.num_replays},
            "runs": per_run, "data_files": list(paths)}


def _setups(paths: list[str], args, client_concurrency: int | None) -> list[tuple[MeasuredRun, SimSetup]]:
    """Each run with its engine: the model its record names (else ``args.model``) at its own TP and settings,
    priced by the plain roofline (no GPU profile: that is what is being fitted)."""
    from dataclasses import replace

    from kvledger.calibration.api import engine_for
    from kvledger.calibration.targets import load_targets

    out = []
    for i, p in enumerate(paths):
        for t in load_targets(p, seed=i, client_concurrency=client_concurrency):
            meta = t.run.measured.metadata if t.run.measured is not None else None
            model = (meta.model if meta is not None and meta.model else None) or args.model
            if not model:
                raise InputError(f"{p}: the run's record names no model; pass --model")
            a = replace(args, model=model, step_cost="roofline", gpu_profile="none", achievable_flops_fraction=None,
                        achievable_bandwidth_fraction=None)
            out.append((t.run, engine_for(a, t.run)))
    return out


def calibrate_gpu_files(paths: list[str], args, *, client_concurrency: int | None = None,
                        fit_frontend: bool = False) -> dict[str, Any]:
    """The GPU profile fitted on the measured runs in ``paths`` (any models, one GPU), with each run's errors (with
    ``fit_frontend``, the set-up's frontend latency fitted too and added to each run's TTFT and E2E).

    Raises:
        InputError / FormatError: no run, runs on several GPUs, unreadable files.
    """
    from kvledger.calibration.api import headline_errors
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.replay import with_frontend
    from kvledger.calibration.sweep import stage_comparison
    from kvledger.calibration.targets import load_targets

    if not paths:
        raise InputError("calibrate needs at least one measured run file")
    items = _setups(paths, args, client_concurrency)
    fit = fit_gpu_fractions(items, fit_frontend=fit_frontend)
    stages = {t.run.label: t.stage for i, p in enumerate(paths)
              for t in load_targets(p, seed=i, client_concurrency=client_concurrency)}
    from kvledger.calibration.saturation import saturation

    per_run = []
    for run, s in items:
        recs = with_frontend(replay(run, s.config, roofline_with(s, fit.flops_fraction, fit.bandwidth_fraction)),
                             fit.frontend_s).records
        st = stages.get(run.label)
        c = stage_comparison(run.label, st, recs) if st is not None else compare_runs(run.label, run.measured, recs)
        per_run.append({"label": run.label, "source": run.source, "model": s.model_name, "tp": s.tp,
                        "num_requests": len(run.requests), **headline_errors(c),
                        "saturated": saturation(run.measured if st is None else None, recs)})
    return gpu_profile_dict(fit, per_run, paths)
