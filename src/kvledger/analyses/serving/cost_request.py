"""``kvledger cost`` as one call: a typed CostRequest (what is priced, and at which prices) → the CostRun it prints.

What is priced is a FILE (benchmark output or records; a sweep is priced at its SLO-capacity run,
:func:`~kvledger.analyses.serving.cost_run.sweep_capacity_run`) or a simulation (the run at the SLO capacity the
request-rate search finds, ``sim_capacity.search_capacity``, or at the workload's own load). The command parses
and checks its flags, builds the request, calls :func:`run_cost` and renders.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvledger.analyses.serving.cost_run import CostRun, cost_payload, gpu_rate, sweep_capacity_run
from kvledger.errors import InputError, range_error
from kvledger.jsonable import to_jsonable

__all__ = ["CostSource", "CostPrices", "CostRequest", "run_cost"]


@dataclass(frozen=True)
class CostSource:
    """What is priced: benchmark or records ``files`` (a run chosen by ``run_index``, else a sweep's capacity run), or
    a ``simulation`` (SimRequestArgs, with ``synthetic`` workload or None) at its SLO capacity or ``at_offered_load``.
    ``target``: the attainment target of the capacity search or of the sweep's capacity run (None: 0.9)."""

    files: tuple[Path, ...] = ()
    format: str | None = None
    run_index: int | None = None
    num_gpus: int | None = None
    simulation: Any = None
    synthetic: Any = None
    at_offered_load: bool = False
    target: float | None = None


@dataclass(frozen=True)
class CostPrices:
    """The self-host side: the GPU (``gpu``: its name for the price table; ``rate``: the price row when already
    resolved), utilization, people, the prefill share; and the API side: price row, mix, deciding factors, volume."""

    gpu: str | None
    rate: Any
    gpu_provider: str | None
    instance: str | None
    gpu_usd_per_hour: float | None
    utilization: float
    max_utilization: float
    engineer_months: float
    engineer_usd: float
    prefill_share: float | None
    api_price: Any
    mix: Any
    factors: Any
    volume: Any = None
    served_model: str | None = None


@dataclass(frozen=True)
class CostRequest:
    """One ``kvledger cost``: the source, the SLO (``ledgers.slo.SLO``) and the prices."""

    source: CostSource
    slo: Any
    prices: CostPrices


def _quiet(_stage: str) -> AbstractContextManager[Any]:
    return contextlib.nullcontext()


def run_cost(req: CostRequest, working: Callable[[str], AbstractContextManager[Any]] = _quiet) -> CostRun:
    """The cost report, capacity basis and JSON of ``req`` (``working(stage)`` wraps each long stage, e.g. a spinner).

    Raises:
        InputError / UnknownNameError / FormatError: unreadable files, a run without a GPU count, no price row.
    """
    from kvledger.ledgers.cost import SelfHostSetup

    src, p = req.source, req.prices
    sim = capacity = sweep = None
    if src.simulation is None:
        run, n_gpus, hardware, sweep = _file_run(src, req.slo)
    else:
        sim, capacity = _sim_run(src, req.slo, working)
        run, n_gpus, hardware = sim.run, sim.num_gpus, sim.gpu_id
    priced_gpu = p.gpu if src.simulation is None and p.gpu else hardware
    rate = p.rate if p.rate is not None else gpu_rate(priced_gpu, p.gpu_provider, p.instance, p.gpu_usd_per_hour)
    setup = SelfHostSetup(rate, n_gpus, p.utilization, p.engineer_months, p.engineer_usd, p.prefill_share,
                          p.max_utilization)
    res = cost_payload(run, req.slo, setup, p.api_price, p.mix, p.factors, p.volume, sim=sim, capacity=capacity,
                       gpu=priced_gpu, model=p.served_model)
    if sweep is not None:
        res.basis["sweep"] = to_jsonable(sweep)
        res.basis["text"] = sweep.text + ". " + res.basis["text"]
        res.payload["capacity_basis"] = {k: v for k, v in res.basis.items() if k != "probes"}
    return replace(res, sim=sim, capacity=capacity)


def _pick_run(runs: list[Any], index: int | None, path: str) -> Any:
    if index is None:
        return runs[0]
    if not 0 <= index < len(runs):
        raise range_error("--run", index, f"[0, {len(runs) - 1:,}] ({path} holds {len(runs):,} runs)")
    return runs[index]


def _file_run(src: CostSource, slo: Any) -> tuple[Any, int, str | None, Any]:
    """(run, GPU count, GPU name for the price table, SweepCapacity or None) from benchmark or records files.

    One run: that run. Several (a multi-run file or several FILEs, e.g. a rate sweep): ``run_index`` picks one,
    otherwise the run at the sweep's SLO capacity is priced, and the choice is stated.
    """
    from kvledger.evidence import read_runs

    runs = [r for f in src.files for r in read_runs(f, format=src.format)]
    where = str(src.files[0]) if len(src.files) == 1 else f"{len(src.files)} files"
    sweep = None
    if len(runs) > 1 and src.run_index is None:
        run, sweep = sweep_capacity_run(runs, slo, 0.9 if src.target is None else src.target, where)
    else:
        run = _pick_run(runs, src.run_index, where)
    md = run.metadata
    n_gpus = src.num_gpus if src.num_gpus is not None else md.num_gpus
    if n_gpus is None:
        raise InputError(f"{md.source} does not state how many GPUs served the run; pass --num-gpus")
    gpu_id = md.extra.get("gpu_id")  # written by kvledger simulate: the catalog id the price table uses
    return run, n_gpus, gpu_id if gpu_id not in (None, "custom") else md.hardware, sweep


def _sim_run(src: CostSource, slo: Any, working: Callable[[str], AbstractContextManager[Any]]) -> tuple[Any, Any]:
    """(simulated run to price, SimCapacity or None): the run at the SLO capacity found by the request-rate search, or
    at the workload's own load."""
    from kvledger.analyses.serving.sim_capacity import DEFAULT_TARGET, search_capacity
    from kvledger.analyses.serving.sim_ledgers import simulate_run

    if src.at_offered_load:
        with working("simulating"):
            return simulate_run(src.simulation, src.synthetic), None
    target = DEFAULT_TARGET if src.target is None else src.target
    with working("searching the SLO capacity (one simulation per probe)"):
        cap = search_capacity(src.simulation, slo, target, synthetic=src.synthetic)
    return cap.run, cap
