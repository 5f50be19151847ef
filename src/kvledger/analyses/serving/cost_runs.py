"""The run ``kvledger cost`` prices: from measured files (one run, or a sweep's run at its SLO capacity) or from a
simulation (at the SLO capacity a request-rate search finds, with the host KV tier when asked, or at the workload's
own load), and with ``--seeds N`` the search per seed, each priced the same way. Inputs come checked
(``cli.cost_boundary``); ``working(message)`` shows progress while a simulation runs."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvledger.analyses.serving.cost_request import FileSource, SimSource

if TYPE_CHECKING:
    from kvledger.analyses.serving.cost_run import SweepCapacity

__all__ = ["Working", "pick_run", "file_run", "sim_run", "seed_costs"]

#: a context manager factory showing ``message`` while its block runs (``report.progress.working``)
Working = Callable[[str], AbstractContextManager[Any]]


def pick_run(runs: list[Any], index: int | None, path: str) -> Any:
    """Run ``index`` of ``runs`` (``--run``; None: the first)."""
    from kvledger.errors import range_error

    if index is None:
        return runs[0]
    if not 0 <= index < len(runs):
        raise range_error("--run", index, f"[0, {len(runs) - 1:,}] ({path} holds {len(runs):,} runs)")
    return runs[index]


def file_run(src: FileSource, slo: Any, target: float | None) -> tuple[Any, int, str | None, SweepCapacity | None]:
    """(run, GPU count, GPU name for the price table, sweep choice or None) from benchmark or records files.

    One run: that run. Several (a multi-run file or several FILEs, e.g. a rate sweep): ``--run INDEX`` picks one,
    otherwise the run at the sweep's SLO capacity (``analyses.cost_run.sweep_capacity_run``) is priced, and the choice
    is stated.
    """
    from kvledger.analyses.serving.cost_run import sweep_capacity_run
    from kvledger.errors import InputError
    from kvledger.evidence import read_runs

    files = list(src.files)
    runs = [r for f in files for r in read_runs(f, format=src.format)]
    where = str(files[0]) if len(files) == 1 else f"{len(files)} files"
    sweep = None
    if len(runs) > 1 and src.run_index is None:
        run, sweep = sweep_capacity_run(runs, slo, 0.9 if target is None else target, where)
    else:
        run = pick_run(runs, src.run_index, where)
    md = run.metadata
    n_gpus = src.num_gpus if src.num_gpus is not None else md.num_gpus
    if n_gpus is None:
        raise InputError(f"{md.source} does not state how many GPUs served the run; pass --num-gpus")
    gpu_id = md.extra.get("gpu_id")  # written by kvledger simulate: the catalog id the price table uses
    return run, n_gpus, gpu_id if gpu_id not in (None, "custom") else md.hardware, sweep


def sim_run(src: SimSource, slo: Any, target: float | None, working: Working) -> tuple[Any, Any]:
    """(simulated run to price, SimCapacity / TierCapacity or None): the run at the SLO capacity sized on
    (``priced_run``: the rate found, or a run at the capacity bound where that caps it) by the request-rate search —
    with ``host_tier_gib``, then the same search with the host tier in every probe (report's and goodput's path)
    (``analyses/serving/tier_cost_capacity.py``) — or with ``at_offered_load`` the run at the workload's own load."""
    from kvledger.analyses.serving.sim_capacity import DEFAULT_TARGET, search_capacity
    from kvledger.analyses.serving.sim_ledgers import simulate_run

    if src.at_offered_load:
        with working("simulating"):
            return simulate_run(src.args, src.synthetic), None
    with working("searching the SLO capacity (one simulation per probe)"):
        cap = search_capacity(src.args, slo, DEFAULT_TARGET if target is None else target, synthetic=src.synthetic)
    if src.host_tier_gib is None:
        return cap.priced_run, cap
    from kvledger.analyses.serving.tier_cost_capacity import tier_search_capacity

    with working("searching the SLO capacity with the host KV tier (one simulation per probe)"):
        tcap = tier_search_capacity(src.args, src.synthetic, slo, src.host_tier_gib, cap)
    return tcap.priced_run, tcap


def seed_costs(src: SimSource, slo: Any, target: float | None, working: Working, first_cap: Any,
               first_payload: dict[str, Any], price: Any) -> Any:
    """``--seeds N``: the SLO capacity searched for seeds ``--seed`` + 1 … (the first is ``first_cap``) and each priced
    by ``price(capacity)`` (the first seed's own pricing: one ledger), as ``cost_seeds.CostSeedSpread``."""
    from kvledger.analyses.serving.cost_seeds import cost_seed_spread
    from kvledger.analyses.serving.seed_spread import seed_list, seed_used

    def price_seed(seed: int) -> tuple[Any, dict[str, Any]]:
        _, cap = sim_run(replace(src, args=replace(src.args, seed=seed)), slo, target, working)
        return cap, price(cap)

    args = first_cap.run.args
    probe = replace(args, rate=1.0)  # a probe draws as any rate's does (goodput --seeds's rule)
    return cost_seed_spread(first_cap, first_payload, seed_list(args.seed, src.seeds),
                            price_seed if seed_used(probe, src.synthetic) else None)
