"""Fitting ``LinearStepCost`` to measured runs: damped Gauss–Newton on statistics of TTFT, TPOT and E2E, with a
Jacobian read off the replay's steps, and a pattern search.

A simulated time is a sum of step durations, each linear in the coefficients. The fit's
linearisation holds the schedule from the request's arrival on: a request arriving during step
a whose first token ends step k has ∂TTFT/∂θ = f·x(a) + Σ_{s=a+1..k} x(s) (x: the step's
features, f: the part of step a still to run at the arrival; steps before the arrival are left
out, since the request would join the next step boundary wherever it fell), and its TPOT has
∂/∂θ = Σ_{s=k1+1..kn} x(s)/(n − 1). The objective compares run statistics — the mean, p50 and
p90 of TTFT, TPOT and E2E — as w_m·log(simulated/measured), so runs of any scale weigh the same;
a percentile's gradient is that of the request at it. Each iteration replays every run once
step by step (``replay_recorded``), solves the damped linear least-squares problem for the
step under θ ≥ 0 (coefficients pinned at 0 leave the problem), and accepts the step only if
the *replayed* objective falls (Levenberg–Marquardt damping otherwise). Deterministic: no
random starts, no wall clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from kvledger.accounting.fitted_cost import GPU_TERMS, NUM_GPU_TERMS, LinearStepCost
from kvledger.accounting.stepcost import StepCostModel
from kvledger.calibration.lsq import damped_step as _damped_step
from kvledger.calibration.lsq import nnls as _nnls
from kvledger.calibration.objective_memo import RunObjective
from kvledger.calibration.replay import MeasuredRun, StepTable, replay, replay_recorded
from kvledger.dynamics.simulator import EngineConfig, SimResult
from kvledger.errors import InputError

__all__ = ["FitResult", "fit_step_cost", "initial_guess", "objective", "run_term", "shifted_term", "METRIC_WEIGHTS"]

#: weight of each metric's squared relative error in the objective
METRIC_WEIGHTS = {"ttft": 1.0, "tpot": 1.0, "e2e": 0.5}
#: the statistics of each metric compared: mean, then these quantiles (p50, p90)
STAT_QUANTILES = (None, 0.5, 0.9)
#: multiplicative steps of the pattern search, coarse to fine
PATTERN_FACTORS = (2.0, 1.41, 1.19, 1.09)
_NAMES = [t[0] for t in GPU_TERMS] + ["cpu_overhead_s"]


@dataclass
class FitResult:
    """A fit: the model, the objective's value at the start and end, and the iterations it took."""

    cost: LinearStepCost
    objective_start: float
    objective: float
    iterations: int
    num_replays: int
    history: list[float] = field(default_factory=list)


def _target(run: MeasuredRun) -> dict[str, list[float | None]]:
    """The measured statistics the fit matches: metric → [mean, p50, p90] (``STAT_QUANTILES``), s."""
    if run.target_stats is not None:
        return {m: [run.target_stats.get(m, {}).get(k) for k in ("mean", "p50", "p90")] for m in ("ttft", "tpot",
            "e2e")}
    recs = [r for r in run.measured.records if r.ok and r.first_token_s is not None]
    out = {}
    for m, vals in (("ttft", [r.ttft_s for r in recs]), ("tpot", [r.tpot_s for r in recs if r.num_output_tokens > 1]),
                    ("e2e", [r.e2e_s for r in recs])):
        out[m] = [v for v, _ in _stat_rows(np.array(vals), None)] if vals else [None, None, None]
    return out


def _stat_rows(values: np.ndarray, grads: np.ndarray | None) -> list[tuple[float, np.ndarray | None]]:
    """(value, gradient) of the mean, p50 and p90 of ``values``; a percentile's gradient is that of the request at
    it."""
    out = [(float(values.mean()), None if grads is None else grads.mean(axis=0))]
    order = np.argsort(values, kind="stable")
    for q in STAT_QUANTILES[1:]:
        h = q * (len(values) - 1)
        lo = int(h)
        hi = min(lo + 1, len(values) - 1)
        f = h - lo
        v = (1 - f) * values[order[lo]] + f * values[order[hi]]
        g = None if grads is None else (1 - f) * grads[order[lo]] + f * grads[order[hi]]
        out.append((float(v), g))
    return out


def _residuals(run: MeasuredRun, res: SimResult, table: StepTable | None, names: list[str],
               cost: LinearStepCost | None, add_s: float = 0.0) -> tuple[np.ndarray, np.ndarray | None]:
    """Weighted log-ratio residuals of one run's statistics (and their Jacobian rows over ``names`` when the step
    table is given); ``add_s`` is added to each TTFT and E2E (the frontend latency of engine-side records)."""
    n_params = len(names)
    target = _target(run)
    sims = [r for r in res.records.records if r.ok and r.first_token_s is not None]
    if not sims:
        return np.zeros(0), (np.zeros((0, n_params)) if table is not None else None)
    s = np.array([(r.ttft_s + add_s, r.tpot_s, r.e2e_s + add_s) for r in sims])
    nout = np.array([r.num_output_tokens for r in sims])
    multi = nout > 1
    grads: list[np.ndarray | None] = [None, None, None]
    if table is not None:
        step_names = [k for k in names if k != "frontend_s"]
        n_step = len(step_names)
        full = _step_gradients(table, cost, NUM_GPU_TERMS + ("cpu_overhead_s" in names))
        g = full[:, [_NAMES.index(k) for k in step_names]]
        cum = np.cumsum(g, axis=0)
        arrival = np.array([r.arrival_s for r in sims])
        ka = np.minimum(np.searchsorted(table.end_s, arrival, side="right"), len(table.end_s) - 1)
        dur = table.end_s[ka] - table.start_s[ka]
        frac = np.where(table.start_s[ka] < arrival, (table.end_s[ka] - arrival) / np.where(dur > 0, dur, 1.0), 1.0)
        k1 = _step_index(table.end_s, np.array([r.first_token_s for r in sims]))
        kn = _step_index(table.end_s, np.array([r.finish_s for r in sims]))
        from_arrival = (cum[ka] - g[ka] * frac[:, None])  # Σ of gradients before the arrival, the running step's part
        grads = [cum[k1] - from_arrival, (cum[kn] - cum[k1]) / np.maximum(nout - 1, 1)[:, None], cum[kn] - from_arrival]
        if n_step < n_params:  # ∂/∂frontend_s: 1 for TTFT and E2E, 0 for TPOT
            ones, zeros = np.ones((len(sims), 1)), np.zeros((len(sims), 1))
            grads = [np.hstack([grads[0], ones]), np.hstack([grads[1], zeros]), np.hstack([grads[2], ones])]
    rows, jac = [], []
    for j, metric in enumerate(("ttft", "tpot", "e2e")):
        keep = multi if metric == "tpot" else np.ones(len(sims), dtype=bool)
        if not keep.any():
            continue
        w = np.sqrt(METRIC_WEIGHTS[metric])
        gj = None if grads[j] is None else grads[j][keep]
        for (sv, sg), mv in zip(_stat_rows(s[keep, j], gj), target[metric]):
            if mv is None or sv <= 0 or mv <= 0:
                continue
            rows.append(w * np.log(sv / mv))
            if sg is not None:
                jac.append(w * sg / sv)
    return np.array(rows), (np.array(jac).reshape(len(rows), n_params) if table is not None else None)


def _step_index(end_s: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Index of the step that ended at each time in ``t`` (token times are step end times)."""
    i = np.searchsorted(end_s, t - 1e-9 * np.maximum(1.0, np.abs(t)))
    return np.minimum(i, len(end_s) - 1)


def _step_gradients(table: StepTable, cost: LinearStepCost, n_params: int) -> np.ndarray:
    """∂ duration/∂θ for every step: the features (synchronous) or, with overlap, the features where the GPU time wins
    and the CPU term elsewhere."""
    x = table.features
    if n_params == NUM_GPU_TERMS:
        return x
    gpu = x @ cost.gpu_coefficients
    cpu_wins = (gpu < cost.cpu_overhead_s) & (x[:, 0] > 0)
    g = np.zeros((len(x), NUM_GPU_TERMS + 1))
    g[~cpu_wins, :NUM_GPU_TERMS] = x[~cpu_wins]
    g[cpu_wins, NUM_GPU_TERMS] = 1.0
    return g


def _names(cost: LinearStepCost, fit_frontend: bool, split_regimes: bool = False) -> list[str]:
    """The fitted coefficients: the GPU terms (``prefill_step_s`` only with ``split_regimes``, or when the start model
    has it), the CPU overhead when it overlaps, the frontend latency when asked."""
    gpu = [k for k in _NAMES[:NUM_GPU_TERMS] if k != "prefill_step_s" or split_regimes or cost.prefill_step_s > 0]
    return gpu + (["cpu_overhead_s"] if cost.overlap else []) + (["frontend_s"] if fit_frontend else [])


def _theta(cost: LinearStepCost, names: list[str]) -> np.ndarray:
    return np.array([getattr(cost, k) for k in names], dtype=np.float64)


def _with(cost: LinearStepCost, names: list[str], theta: np.ndarray) -> LinearStepCost:
    return replace(cost, **{k: float(v) for k, v in zip(names, theta)})


def run_term(run: MeasuredRun, cfg: EngineConfig, cost: StepCostModel) -> float:
    """One run's part of the objective (squared weighted log errors of its statistics)."""
    r, _ = _residuals(run, replay(run, cfg, cost), None, _NAMES[:NUM_GPU_TERMS], cost)
    return float(r @ r)


def shifted_term(run: MeasuredRun, res: SimResult, add_s: float, scale: float | None = None) -> float:
    """``run_term`` of a run already replayed (``res``: engine-side records) with ``add_s`` s added to each TTFT and
    E2E — a frontend latency profiled without replaying again. With ``scale`` c, each residual r enters as a Cauchy
    loss c²·ln(1 + (r/c)²) instead of r²: the same near 0, growing only as the log of r beyond a few c."""
    r, _ = _residuals(run, res, None, _NAMES[:NUM_GPU_TERMS], None, add_s)
    return float(r @ r) if scale is None else float(np.sum(scale * scale * np.log1p((r / scale) ** 2)))


def objective(runs: list[tuple[MeasuredRun, EngineConfig]], cost: StepCostModel) -> float:
    """The fit's objective for any step-cost model (module docstring)."""
    return sum(run_term(run, cfg, cost) for run, cfg in runs)


def initial_guess(runs: list[tuple[MeasuredRun, EngineConfig]], start: StepCostModel, overlap: bool,
                  split_regimes: bool = False) -> LinearStepCost:
    """The linear model closest (least squares over every replayed step, θ ≥ 0) to ``start``'s step times on these
    workloads."""
    feats, durs = [], []
    for run, cfg in runs:
        _, table = replay_recorded(run, cfg, start)
        feats.append(table.features)
        durs.append(table.end_s - table.start_s)
    x, y = np.vstack(feats), np.concatenate(durs)
    if not split_regimes:  # one fixed time for both regimes: the prefill regime's own term stays 0
        x = x.copy()
        x[:, _NAMES.index("prefill_step_s")] = 0.0
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    theta = _nnls(x / scale, y) / scale
    cpu = 0.0
    if overlap:  # start the overlapped CPU term at half the shortest step: it then has a say in the fastest steps
        cpu = 0.5 * float(y[y > 0].min()) if (y > 0).any() else 0.0
    return LinearStepCost(*theta, cpu_overhead_s=cpu, overlap=overlap, name="fitted")  # theta: GPU_TERMS order


def _linearise(run: MeasuredRun, cfg: EngineConfig, cost: LinearStepCost, names: tuple[str, ...]):
    """One run's residuals and their Jacobian over ``names`` at ``cost`` (a step-by-step replay)."""
    res, table = replay_recorded(run, cfg, cost)
    return _residuals(run, res, table, list(names), cost, cost.frontend_s)


def _gauss_newton(runs, cost: LinearStepCost, f: float, names: list[str], max_iterations: int, tol: float,
                  memo: RunObjective, history: list[float]) -> tuple[LinearStepCost, float, int]:
    """Damped Gauss–Newton from ``cost`` (objective ``f``); returns the best model, its objective and the iterations."""
    lam, it = 1e-3, 0
    for it in range(1, max_iterations + 1):  # noqa: B007 - the count is read after the loop
        rs, js = [], []
        for run, cfg in runs:
            r, j = memo.linearised(run, cfg, cost, tuple(names), _linearise)
            rs.append(r)
            js.append(j)
        r, jac = np.concatenate(rs), np.vstack(js)
        if not len(r):
            raise InputError("no measured request finished in the replay; check the engine settings (max_model_len)")
        theta = _theta(cost, names)
        improved = False
        for _ in range(6):
            cand = _with(cost, names, _damped_step(jac, r, theta, lam))
            fc = memo.total(runs, cand, f)
            if fc < f:
                improved, lam = True, max(lam / 3.0, 1e-7)
                break
            lam *= 8.0
        if not improved:
            break
        gain = (f - fc) / f if f > 0 else 0.0
        cost, f = cand, fc
        memo.accept(runs, cost)
        history.append(f)
        if gain < tol:
            break
    return cost, f, it


def _pattern_search(runs, cost: LinearStepCost, f: float, names: list[str], memo: RunObjective,
                    history: list[float]) -> tuple[LinearStepCost, float]:
    """Multiply one coefficient at a time by a factor and its inverse, keeping what lowers the objective; factors
    ``PATTERN_FACTORS`` in turn. Finds the valleys a queueing knee hides from the Jacobian (it is exact only while
    the schedule holds)."""
    for factor in PATTERN_FACTORS:
        for _ in range(2):
            moved = False
            for k in range(len(names)):
                theta = _theta(cost, names)
                if theta[k] == 0:
                    continue
                for mult in (factor, 1.0 / factor):
                    t = theta.copy()
                    t[k] *= mult
                    cand = _with(cost, names, t)
                    fc = memo.total(runs, cand, f)
                    if fc < f:
                        cost, f, moved = cand, fc, True
                        memo.accept(runs, cost)
                        history.append(f)
                        break
            if not moved:
                break
    return cost, f


def fit_step_cost(runs: list[tuple[MeasuredRun, EngineConfig]], start: LinearStepCost, *, max_iterations: int = 10,
                  tol: float = 1e-3, fit_frontend: bool = False, split_regimes: bool = False,
                  memo: RunObjective | None = None) -> FitResult:
    """Fit ``start``'s coefficients to the runs (module docstring); ``start.overlap`` picks the CPU-overhead form;
    ``fit_frontend`` also fits the per-request latency outside the engine (``LinearStepCost.frontend_s``);
    ``split_regimes`` fits the prefill regime's own fixed time (``LinearStepCost.prefill_step_s``) apart from the
    decode steps'. ``memo`` (``objective_memo.RunObjective``) shares replays between fits of the same runs (the
    leave-one-out folds); the result is the same with or without it.

    Gauss–Newton, then a multiplicative pattern search, then Gauss–Newton again.

    Raises:
        InputError: no run, or no request of any run finished in the replay.
    """
    if not runs:
        raise InputError("calibration needs at least one measured run")
    n = _names(start, fit_frontend, split_regimes)
    if "prefill_step_s" in n and start.prefill_step_s == 0:  # start the prefill regime's own term off zero
        start = replace(start, prefill_step_s=0.5 * start.fixed_s)
    memo = memo if memo is not None else RunObjective(run_term)
    replays0 = memo.num_replays
    f0 = memo.total(runs, start)
    memo.accept(runs, start)
    history = [f0]
    cost, f, it1 = _gauss_newton(runs, start, f0, n, max_iterations, tol, memo, history)
    cost, f = _pattern_search(runs, cost, f, n, memo, history)
    cost, f, it2 = _gauss_newton(runs, cost, f, n, max_iterations, tol, memo, history)
    return FitResult(cost, f0, f, it1 + it2, memo.num_replays - replays0, history)
