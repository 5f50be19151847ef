"""The report's second process: on two or more CPUs, ``kvledger report`` forks one worker at its start, which imports
matplotlib and runs two of the seven simulations after the capacity search (beside the other five), then draws the
figures.

Same bytes as one process: the simulations are deterministic, each result is placed by its key (never by the order
in which work finishes) and each figure is drawn by the same code with the same settings (fixed SVG hash salt).
``KVLEDGER_REPORT_WORKERS=1`` keeps everything in one process; so does a platform without ``fork`` (a spawned
worker would import everything again, which costs about what it saves).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kvledger.analyses.serving.report_data import ReportData
from kvledger.report.figure import Figure
from kvledger.report.html_report import drawn_figures

__all__ = ["report_pool", "figures_in_pool"]


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# imported before the fork (the report needs them anyway): the worker's simulations then import nothing again
_BEFORE_FORK = ("kvledger.analyses.serving.decision_data", "kvledger.analyses.serving.sim_capacity",
                "kvledger.analyses.serving.sim_ledgers", "kvledger.analyses.serving.cost_run",
                "kvledger.accounting.plan", "kvledger.dynamics.simulator", "kvledger.dynamics.workload.traces",
                "kvledger.catalog.models", "kvledger.ledgers.goodput", "kvledger.accounting.calibrated",
                "kvledger.invariants")


def _warm() -> None:
    """Import what drawing needs, in the worker, while the parent simulates."""
    import matplotlib.backends.backend_svg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    import kvledger.report.figures_kv  # noqa: F401
    import kvledger.report.figures_serving  # noqa: F401


@contextmanager
def report_pool() -> Iterator[Any]:
    """An executor with one forked worker (forked here, before any progress-bar thread starts), or None where the
    report runs in one process (one CPU, no ``fork``, ``KVLEDGER_REPORT_WORKERS=1``)."""
    import multiprocessing

    if (os.environ.get("KVLEDGER_REPORT_WORKERS", "").strip() == "1" or _cpus() < 2
            or "fork" not in multiprocessing.get_all_start_methods()):
        yield None
        return
    import importlib
    from concurrent.futures import ProcessPoolExecutor

    for name in _BEFORE_FORK:
        importlib.import_module(name)
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    try:
        pool.submit(int)  # the fork happens now, before any progress-bar thread starts
        yield _Worker(pool)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _Worker:
    """The executor, with the worker's imports for drawing queued before its first job (none when a request's
    simulations and HTML are all read back from the store: nothing is sent to the worker)."""

    def __init__(self, pool: Any) -> None:
        self.pool, self.warm = pool, False

    def submit(self, fn: Any, *args: Any) -> Any:
        if not self.warm:
            self.pool.submit(_warm)
            self.warm = True
        return self.pool.submit(fn, *args)


def figures_in_pool(data: ReportData, pool: Any) -> list[Figure]:
    """Every figure of the report drawn to SVG in the worker, which imported matplotlib while this process simulated
    (drawing half here instead would import it here too: about as long, and more CPU in all)."""
    return pool.submit(drawn_figures, data).result()
