"""``goodput FILE``'s warning on a run pushed past its SLO capacity or one whose server fell behind its offered rate:
the same load check ``cost`` prices with (``capacity_basis.check_load``), so the two commands say the same of one file.
A run over-loaded this way measures the queue its overload built, not what the deployment serves within the SLO at a
lower load."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.capacity_basis import check_load
from kvledger.records import WARNING_PREFIX

__all__ = ["with_overload_warnings"]


def with_overload_warnings(runs: list[Any], results: list[Any], slo: Any, target: float | None = None) -> list[Any]:
    """``results`` (one ``GoodputResult`` per run), each over-loaded run's with a warning among its notes; unchanged
    with a ``target``, where the SLO boundary across the runs is the answer and a sweep's top stages are past it."""
    for run, res in zip(runs, results, strict=True) if target is None else ():
        if res.no_request_completed:  # said first, on its own (goodput_result.nothing_measured)
            continue
        load = check_load(run, res, slo)
        if load.status == "over_loaded":
            res.notes.append(f"{WARNING_PREFIX}the run looks OVER-LOADED: {load.reason}. Its goodput is what that "
                             "overload left, not what the deployment serves within the SLO at a lower load: measure "
                             "a rate sweep and give its files with --target 0.9 for the SLO capacity")
        elif load.status == "fell_behind":
            res.notes.append(f"{WARNING_PREFIX}the run FELL BEHIND its offered load: {load.reason}. Its served rate "
                             "is that ceiling, an upper bound on the SLO capacity, and its goodput the good share of a "
                             "queue that grew all run, not that capacity: measure a rate sweep and give its files "
                             "with --target 0.9 for the SLO capacity")
    return results
