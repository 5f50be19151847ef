"""The fit on all runs and the leave-one-out fits of a model-scope calibration, serially (one memo of replays shared by
every fit, ``objective_memo``) or in a pool of worker processes (the fits are independent; the results are the same
with any number of workers: each fit is deterministic and its objective sums are exactly rounded)."""

from __future__ import annotations

from typing import Any

from kvledger.calibration.fit import FitResult, fit_step_cost, initial_guess, run_term
from kvledger.calibration.objective_memo import RunObjective

__all__ = ["fit_and_folds"]


def _one(runs: list, start: Any, overlap: bool, split_regimes: bool, fit_frontend: bool,
         memo: RunObjective | None) -> tuple[Any, FitResult]:
    guess = initial_guess(runs, start, overlap, split_regimes)
    return guess, fit_step_cost(runs, guess, fit_frontend=fit_frontend, split_regimes=split_regimes, memo=memo)


def fit_and_folds(runs: list, start: Any, *, overlap: bool, split_regimes: bool, fit_frontend: bool,
                  leave_one_out: bool, workers: int = 1) -> tuple[Any, FitResult, list[FitResult]]:
    """(initial guess, the fit on all runs, the fit without run i for each i — empty without ``leave_one_out`` or with
    one run). ``workers`` > 1 runs the fits in that many spawned processes."""
    tasks = [runs] + ([runs[:i] + runs[i + 1:] for i in range(len(runs))] if leave_one_out and len(runs) > 1 else [])
    if workers <= 1 or len(tasks) == 1:
        memo = RunObjective(run_term)
        out = [_one(t, start, overlap, split_regimes, fit_frontend, memo) for t in tasks]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        ctx = multiprocessing.get_context("spawn")  # no fork of a process that may run a progress thread
        with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=ctx) as pool:
            futs = [pool.submit(_one, t, start, overlap, split_regimes, fit_frontend, None) for t in tasks]
            out = [f.result() for f in futs]
    return out[0][0], out[0][1], [f for _, f in out[1:]]
