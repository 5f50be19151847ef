"""GPU-scope calibration: the roofline's achievable FLOP/s and bandwidth fractions fitted on measured runs of any
models on one GPU, so that the fit carries to every model on it.

The roofline prices each step from the model's own FLOPs and bytes; what it cannot know is the share of the peak the
kernels reach on this GPU, which is what transfers to another model. The objective is ``kvledger.calibration.fit``'s,
summed over the runs, each replayed with its own model, TP and engine.
Search: a coarse grid over the fractions (``GRID_FLOPS`` × ``GRID_BANDWIDTH``), then a multiplicative pattern search
(``REFINE_FACTORS``, axis and diagonal moves; fractions in (0, 1]) from the best point evaluated (the 0.7/0.8 start
among them): deterministic, never above its start. Searching from the second-best point too reaches lower in-sample
objectives along flat valleys (one RTX 4090 run: 0.001651 at 0.631/0.900 → 0.001241 at 0.902/0.800) but carried worse
to the other models on each GPU (every measured run, leave the model out: client rule 44 → 41 of 61 within, bands
48 → 44 covering, 2026-12-05): not used; each constant's leave-one-out range says how loosely it is held.

Each statistic's weighted log residual r enters through a Cauchy loss c²·ln(1 + (r/c)²), c = ``ROBUST_SCALE`` (0.1:
a 10% error), not its square: a statistic that no step time produces should not move a GPU's efficiency. Llama-2-70B
TP4's 20 req/s stage in inference-sim/training (mean TTFT 121 ms over a 68 ms median) has a tail no replay fitting its
TPOT gives; squared, those residuals pulled a fit on the 70B's five stages to 0.57/0.62 (TPOTs +9 … +13%, Llama-2-7B's
+17 … +61%); under the Cauchy loss it lands at 1.00/0.68 (its TPOTs −1 … +1%).

``fit_frontend`` also fits a per-request latency outside the engine (HTTP, tokenization, streaming: ``frontend_s``),
the set-up's (client, front end, host), not the GPU's: unfitted, a client-side TTFT pulls the fractions down. It
shifts each TTFT and E2E and leaves the schedule alone: profiled out at every pair of fractions from the same replays
(golden section over [0, ``FRONTEND_MAX_S``]).

``fit_host`` also fits the host time each step spends in series with the GPU (``host_step_s`` + ``host_seq_s`` ×
sequences), the same for every model on one host: on models of different sizes it separates from the fractions, on one
alone not, so the terms start at 0 and move only where the objective falls by more than ``HOST_MIN_GAIN`` of itself
(additive moves ``HOST_STEP_MOVES``, ``HOST_SEQ_MOVES``, kept ≥ 0, beside the multiplicative ones). Where a run has
TP > 1 over PCIe, the all-reduce's share of the host link is searched too (``link_fit``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.roofline import RooflineStepCost
from kvledger.analyses.serving.sim_setup import SimSetup
from kvledger.calibration.fit import shifted_term
from kvledger.calibration.fit_checks import flops_seen
from kvledger.calibration.link_fit import SHARE_RANGE, given_share, kept_share, link_applies, start_share
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.calibration.search1d import golden_min
from kvledger.errors import InputError

__all__ = ["GpuFit", "roofline_with", "fit_gpu_fractions", "best_frontend", "ROBUST_SCALE", "GRID_FLOPS",
           "GRID_BANDWIDTH", "default_objective", "DEFAULT_MIN_GAIN"]

GRID_FLOPS = (0.25, 0.4, 0.6, 0.85)
GRID_BANDWIDTH = (0.35, 0.5, 0.7, 0.9)
REFINE_FACTORS = (1.12, 1.04, 1.012)
MAX_MOVES = 6  # per factor
FRONTEND_MAX_S = 0.2  # largest per-request frontend latency searched, s
FRONTEND_ITERS = 40  # golden-section steps: 0.2 s × 0.618^40 ≈ 1e-9 s
HOST_STEP_MOVES, HOST_SEQ_MOVES = (0.5e-3, 0.15e-3, 0.05e-3), (8e-6, 2.5e-6, 0.8e-6)  # per factor: s per step, per seq
#: the Cauchy loss's scale on each weighted log residual (``kvledger.calibration.fit.shifted_term``; None: squares)
ROBUST_SCALE = 0.1
HOST_MIN_GAIN = 0.01  # a host move must lower the objective by this share of it (module docstring)
#: a fit beats the uncalibrated default only where its objective is below the default's by this share of it
DEFAULT_MIN_GAIN = 0.01
#: per factor, the eight moves of the pattern search: each fraction alone, and both together (the valleys of a
#: queueing objective run diagonally: a slower prefill can be traded for a faster decode)
_MOVES = {f: [(a, b) for a in (f, 1.0, 1 / f) for b in (f, 1.0, 1 / f) if (a, b) != (1.0, 1.0)] for f in REFINE_FACTORS}


@dataclass
class GpuFit:
    """The fitted fractions (``flops_seen`` False: no step saw the FLOP fraction, so it is the start's: fit_checks.py),
    the set-up's frontend latency (s; 0 unless fitted), the objective before and after, and the replays it took."""

    gpu: str
    flops_fraction: float
    bandwidth_fraction: float
    objective_start: float
    objective: float
    num_replays: int
    history: list[tuple[float, float, float]] = field(default_factory=list)
    num_refine: int = 0
    frontend_s: float = 0.0
    host_step_s: float = 0.0
    host_seq_s: float = 0.0
    #: with ``setups``: each set-up's frontend latency, s (``frontend_s`` is then 0 unless there is one set-up)
    frontends_s: dict[str, float] = field(default_factory=dict)
    #: "measured": the runs' rooflines price matmuls by the GPU's measured curve, which the FLOP fraction scales
    gemm_efficiency: str = "flat"
    flops_seen: bool = True
    #: the all-reduce's share of its link, fitted (``link_fit``) or given (``link_given``); None: the default rule's
    link_share: float | None = None
    link_given: bool = False
    #: the same objective at the uncalibrated default (``default_objective``); None: not computed
    objective_default: float | None = None

    @property
    def beats_default(self) -> bool:
        """Whether the fit prices its runs better than no profile: its objective below the default's by more than
        ``DEFAULT_MIN_GAIN`` of it (True when the default's was not computed)."""
        d = self.objective_default
        return d is None or self.objective < d * (1 - DEFAULT_MIN_GAIN)

    @property
    def terms(self) -> tuple[float, float, float, float, float | None]:
        """``roofline_with``'s terms after the setup: the two fractions, the host terms and the link share."""
        return self.flops_fraction, self.bandwidth_fraction, self.host_step_s, self.host_seq_s, self.link_share


def roofline_with(setup: SimSetup, flops_fraction: float, bandwidth_fraction: float, host_step_s: float = 0.0,
                  host_seq_s: float = 0.0, link_share: float | None = None) -> Any:
    """The setup's roofline step cost at other achievable fractions, host terms and all-reduce link share (None: the
    setup's own, given by --allreduce-link-share or the default rule; same model, TP, weights, CPU overhead, measured
    GEMM curve or none; the engine's host term kept)."""
    from kvledger.accounting.host_overhead import HostStepCost

    cost = setup.cost
    host = cost.host if isinstance(cost, HostStepCost) else None  # the engine's host term stays on (host_overhead.py)
    cost = cost.inner if host is not None else cost
    if not isinstance(cost, RooflineStepCost):
        raise InputError("a GPU-scope fit prices steps with the roofline: start from --step-cost roofline")
    plan = setup.plan
    s = plan.settings
    from kvledger.accounting.plan import roofline_model

    rc = RooflineStepCost(roofline_model(plan.model, s), plan.gpu, plan.kv, s.tp, flops_fraction=flops_fraction,
                          bandwidth_fraction=bandwidth_fraction, cpu_overhead_s=cost.cpu_overhead_s,
                          weights_bytes=s.weights_bytes, overlap_cpu=cost.overlap_cpu,
                          custom_allreduce_max_bytes=cost.custom_allreduce_max_bytes, host_step_s=host_step_s,
                          host_seq_s=host_seq_s, gemm_curve=cost.gemm_curve, ep=cost.ep, moe_config=cost.moe_config,
                          allreduce_link_share=cost.allreduce_link_share if link_share is None else link_share)
    return rc if host is None else HostStepCost(rc, host)


def best_frontend(reps: list, robust: float | None = None) -> tuple[float, float]:
    """(objective, frontend_s) minimising the objective over the frontend latency, golden-section (module docstring)."""
    def f(d: float) -> float:
        return sum(shifted_term(run, res, d, robust) for run, res in reps)

    x, fx = golden_min(f, 0.0, FRONTEND_MAX_S, FRONTEND_ITERS)
    return min(((fx, x), (f(0.0), 0.0)))


def _total(items: list[tuple[MeasuredRun, SimSetup]], ff: float, bf: float, fit_frontend: bool = False,
           frontends: dict | None = None, h0: float = 0.0, h1: float = 0.0, robust: float | None = None,
           keys: list[str] | None = None, share: float | None = None) -> float:
    """The objective summed over the runs at these fractions, host terms and link share; with ``fit_frontend`` at the
    best frontend latency of each set-up (``keys``: one set-up name per run; None: one set-up), recorded as
    ``frontends[(ff, bf, h0, h1, share)]`` = {set-up: s}."""
    reps = [(run, replay(run, s.config, roofline_with(s, ff, bf, h0, h1, share))) for run, s in items]
    obj, fe = _objective(reps, fit_frontend, robust, keys)
    if frontends is not None and fit_frontend:
        frontends[(ff, bf, h0, h1, share)] = fe
    return obj


def _objective(reps: list, fit_frontend: bool, robust: float | None, keys: list[str] | None) -> tuple[float, dict]:
    """(objective, {set-up: frontend s}) of the replays ``reps`` = [(run, result)], as ``_total`` sums it."""
    if not fit_frontend:
        return sum(shifted_term(run, res, 0.0, robust) for run, res in reps), {}
    keys = keys or [""] * len(reps)
    obj, fe = 0.0, {}
    for k in dict.fromkeys(keys):  # the shift of one set-up's runs moves no other set-up's terms: profiled apart
        o, fe[k] = best_frontend([rp for rp, kk in zip(reps, keys) if kk == k], robust)
        obj += o
    return obj, fe


def default_fractions(setup: SimSetup) -> tuple[float, float]:
    """(FLOP, bandwidth) fractions of a run with no GPU profile (``plan_pricing.plan_fractions``): FLOP 1.0 where the
    measured GEMM curve prices its matmuls (the curve as measured), else the flat default; the default bandwidth."""
    from kvledger.accounting.settings import PlanSettings

    cost = getattr(setup.cost, "inner", setup.cost)
    curve = getattr(cost, "gemm_curve", None) is not None
    return (1.0 if curve else PlanSettings.achievable_flops_fraction), PlanSettings.achievable_bandwidth_fraction


def default_objective(items: list[tuple[MeasuredRun, SimSetup]], fit_frontend: bool = False,
                      robust: float | None = ROBUST_SCALE, keys: list[str] | None = None) -> float:
    """``_total``'s objective (frontends profiled alike) with every run priced as without a profile
    (``default_fractions``, no host terms, its own link share): what a fit must beat (one replay per run)."""
    reps = [(run, replay(run, s.config, roofline_with(s, *default_fractions(s)))) for run, s in items]
    return _objective(reps, fit_frontend, robust, keys)[0]


def _moves(i: int, factor: float, fit_host: bool, fit_link: bool = False) -> list[tuple[float, ...]]:
    """The pattern search's moves at refine step ``i`` (``factor``): (×FLOP fraction, ×bandwidth fraction, +host s per
    step, +host s per sequence, ×all-reduce link share)."""
    moves = [(dff, dbf, 0.0, 0.0, 1.0) for dff, dbf in _MOVES[factor]]
    if fit_host:  # each host move alone, and with the fractions moving the other way (more host time, faster
        # kernels: the valley of a one-model objective runs that way)
        for sign in (1.0, -1.0):
            g = factor if sign > 0 else 1 / factor
            for d0, d1 in ((sign * HOST_STEP_MOVES[i], 0.0), (0.0, sign * HOST_SEQ_MOVES[i])):
                moves += [(1.0, 1.0, d0, d1, 1.0), (1.0, g, d0, d1, 1.0), (g, g, d0, d1, 1.0)]
            # a fixed time for a per-sequence one (at one batch size they are the same time)
            moves.append((1.0, 1.0, sign * HOST_STEP_MOVES[i], -sign * HOST_SEQ_MOVES[i], 1.0))
    if fit_link:  # the share alone, and traded against the FLOP fraction (a prefill's matmuls and all-reduces both
        # grow with its tokens: link_fit.py)
        for g in (factor, 1 / factor):
            moves += [(1.0, 1.0, 0.0, 0.0, g), (1 / g, 1.0, 0.0, 0.0, g)]
    return moves


def _pattern_search(total: Callable[..., float], best: tuple[float, ...], fit_host: bool, history: list,
                    say: Callable[[str], None]) -> tuple:
    """The multiplicative pattern search from ``best`` = (FLOP fraction, bandwidth fraction, objective, link share or
    None: not fitted) (module docstring): (FLOP fraction, bandwidth fraction, host s per step, host s per sequence,
    link share, objective, moves tried); ``history`` gains each accepted point."""
    ff, bf, f, sh = best
    h0 = h1 = 0.0
    evals = 0
    for i, factor in enumerate(REFINE_FACTORS):
        moves = _moves(i, factor, fit_host, sh is not None)
        moved, n = True, 0
        while moved and n < MAX_MOVES * (2 if fit_host or sh is not None else 1):  # more terms walk further
            moved, n = False, n + 1
            for dff, dbf, d0, d1, ds in moves:
                cf, cb = min(1.0, ff * dff), min(1.0, bf * dbf)
                c0, c1 = max(0.0, h0 + d0), max(0.0, h1 + d1)
                cs = None if sh is None else min(SHARE_RANGE[1], max(SHARE_RANGE[0], sh * ds))
                if (cf, cb, c0, c1, cs) == (ff, bf, h0, h1, sh):
                    continue
                fc = total(cf, cb, c0, c1, cs)
                evals += 1
                # a host term moves only for a clear gain: on one model it trades against the fractions
                if fc < (f * (1 - HOST_MIN_GAIN) if (c0, c1) != (h0, h1) else f):
                    ff, bf, h0, h1, sh, f, moved = cf, cb, c0, c1, cs, fc, True
                    history.append((ff, bf, f))
                    break
        say(f"pattern search ×{factor}: {evals} moves tried, objective {f:.5g} at {ff:.3f}/{bf:.3f}"
            + ("" if sh is None else f", all-reduce link share {sh:.3f}"))
    return ff, bf, h0, h1, sh, f, evals


def fit_gpu_fractions(items: list[tuple[MeasuredRun, SimSetup]], start: tuple[float, float] = (0.7, 0.8), *,
                      fit_frontend: bool = False, fit_host: bool = False, with_default: bool = True,
                      robust: float | None = ROBUST_SCALE, setups: list[str] | None = None,
                      progress: Callable[[str], None] | None = None) -> GpuFit:
    """Fit the two fractions (with ``fit_frontend``, the set-up's frontend latency; with ``fit_host``, the host's
    per-step and per-sequence time) to the runs (module docstring); every run must be on the same GPU. ``setups`` names
    each run's set-up: runs timed through different clients get a frontend latency each (``GpuFit.frontends_s``);
    ``progress(text)``: told how far; ``with_default``: also score the uncalibrated default (``objective_default``).

    Raises:
        InputError: no run, or runs on different GPUs.
    """
    if not items:
        raise InputError("a GPU-scope calibration needs at least one measured run")
    gpus = sorted({s.gpu_name for _, s in items})
    if len(gpus) > 1:
        raise InputError(f"a GPU profile is one GPU's: these runs are on {', '.join(gpus)}; calibrate each GPU apart")
    if setups is not None and len(setups) != len(items):
        raise InputError(f"{len(setups)} set-up names for {len(items)} runs: give one per run")
    fe: dict = {}
    share_evals = [0]  # the link share's own evaluations (start, kept, final), beside the pattern search's

    def total(a: float, b: float, c0: float = 0.0, c1: float = 0.0, cs: float | None = None) -> float:
        return _total(items, a, b, fit_frontend, fe, c0, c1, robust, setups, cs)

    def share_total(a: float, b: float, c0: float, c1: float, cs: float | None) -> float:
        share_evals[0] += 1
        return total(a, b, c0, c1, cs)

    f0 = total(*start)
    history = [(start[0], start[1], f0)]
    grid = [(ff, bf, total(ff, bf)) for ff in GRID_FLOPS for bf in GRID_BANDWIDTH]
    best = min([history[0], *grid], key=lambda x: x[2])
    history.append(best)
    say = progress or (lambda _text: None)  # progress: the grid, then each refine factor
    say(f"start and {len(grid)} grid points × {len(items)} run(s) replayed, objective {best[2]:.5g}")
    share = None
    if link_applies(items):  # a TP > 1 run over PCIe: the host's all-reduce link share (link_fit.py)
        share, best = start_share(lambda x: share_total(best[0], best[1], 0.0, 0.0, x), best)
    ff, bf, h0, h1, share, f, evals = _pattern_search(total, (*best, share), fit_host, history, say)
    if share is not None:  # kept where the runs see it; the objective and frontends then at what the profile prices
        share = kept_share(lambda x: share_total(ff, bf, h0, h1, x), share, f)
        f = share_total(ff, bf, h0, h1, share)
    evals += share_evals[0]
    mode = "measured" if any(getattr(s.cost, "gemm_curve", None) is not None for _, s in items) else "flat"
    seen = flops_seen(lambda x: total(x, bf, h0, h1, share), ff, f, start[0])
    ff, replays = ff if seen else (1.0 if mode == "measured" else start[0]), len(items) * (
        3 + len(GRID_FLOPS) * len(GRID_BANDWIDTH) + evals)
    fronts = fe.get((ff, bf, h0, h1, share), {})
    held = given_share(items)  # a share given to the fit (--allreduce-link-share) is the profile's too
    given = share is None and held is not None
    share = held if given else share
    one = next(iter(fronts.values())) if len(fronts) == 1 else 0.0
    fd = default_objective(items, fit_frontend, robust, setups) if with_default else None  # no profile's objective
    return GpuFit(gpus[0], ff, bf, f0, f, replays + len(items) * with_default, history, evals, one, h0, h1, fronts,
                  mode, seen, share, given, fd)
