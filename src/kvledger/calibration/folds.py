"""The fit on all runs and the leave-one-out fits of a model-scope calibration, serially (one memo of replays shared by
every fit, ``objective_memo``) or in a pool of worker processes (the fits are independent; the results are the same
with any number of workers: each fit is deterministic and its objective sums are exactly rounded)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.calibration.fit import FitResult, fit_step_cost, initial_guess, run_term
from kvledger.calibration.objective_memo import RunObjective
from kvledger.calibration.regime_start import regime_start

__all__ = ["fit_and_folds"]


def _one(runs: list, start: Any, overlap: bool, split_regimes: bool, fit_frontend: bool,
         memo: RunObjective | None, two_starts: bool = False) -> tuple[Any, FitResult]:
    guess = initial_guess(runs, start, overlap, split_regimes)
    fit = fit_step_cost(runs, guess, fit_frontend=fit_frontend, split_regimes=split_regimes, memo=memo)
    second = regime_start([r for r, _ in runs], guess) if two_starts else None
    if second is not None:
        other = fit_step_cost(runs, second, fit_frontend=fit_frontend, split_regimes=split_regimes, memo=memo)
        if other.objective < fit.objective:
            return second, replace(other, num_replays=other.num_replays + fit.num_replays)
        fit = replace(fit, num_replays=other.num_replays + fit.num_replays)
    return guess, fit


def _said(progress: Any, done: int, tasks: list, fit: FitResult) -> None:
    if progress is not None:
        what = f"fit on all {len(tasks[0])} runs" if done == 1 else f"leave-one-out fit {done - 1}/{len(tasks) - 1}"
        progress(f"{what} done: objective {fit.objective:.5g}, {fit.num_replays} replays")


def fit_and_folds(runs: list, start: Any, *, overlap: bool, split_regimes: bool, fit_frontend: bool,
                  leave_one_out: bool, workers: int = 1, two_starts: bool = False,
                  progress: Any = None) -> tuple[Any, FitResult, list[FitResult]]:
    """(the start of the fit on all runs — the projection, or the regime start when that fit won —, the fit on all
    runs, the fit without run i for each i — empty without ``leave_one_out`` or with one run). ``workers`` > 1 runs the
    fits in that many spawned processes. ``two_starts`` also fits from ``regime_start`` (read off each fit's own runs)
    and keeps the lower objective: twice the replays. ``progress(text)``, when given, is told as each fit ends (in
    order)."""
    tasks = [runs] + ([runs[:i] + runs[i + 1:] for i in range(len(runs))] if leave_one_out and len(runs) > 1 else [])
    if workers <= 1 or len(tasks) == 1:
        memo = RunObjective(run_term)
        out = []
        for t in tasks:
            out.append(_one(t, start, overlap, split_regimes, fit_frontend, memo, two_starts))
            _said(progress, len(out), tasks, out[-1][1])
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may run a progress thread
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as pool:
            futs = [pool.submit(_one, t, start, overlap, split_regimes, fit_frontend, None, two_starts) for t in tasks]
            out = []
            for f in futs:
                out.append(f.result())
                _said(progress, len(out), tasks, out[-1][1])
    return out[0][0], out[0][1], [f for _, f in out[1:]]
