"""The inputs of ``kvledger cost``: every input error at once, the run from FILEs or a simulation, the GPU rate."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags
from kvledger.report.progress import working

if TYPE_CHECKING:
    from kvledger.analyses.serving.cost_run import SweepCapacity

__all__ = ["pick_run", "gpu_rate_for", "collect", "check_inputs", "file_run", "sim_run", "check_seeds", "seed_costs"]


def pick_run(runs: list[Any], index: int | None, path: str) -> Any:
    from kvledger.errors import range_error

    if index is None:
        return runs[0]
    if not 0 <= index < len(runs):
        raise range_error("--run", index, f"[0, {len(runs) - 1:,}] ({path} holds {len(runs):,} runs)")
    return runs[index]


def gpu_rate_for(name: str | None, provider: str | None, instance: str | None,
                 usd: float | dict[str, float] | None) -> Any:
    from kvledger.analyses.serving.cost_run import gpu_rate

    return gpu_rate(name, provider, instance, usd)


def collect(problems: list[Exception], fn: Any) -> Any:
    from kvledger.errors import KvLedgerError

    try:
        return fn()
    except KvLedgerError as err:
        problems.append(err)
        return None


def check_inputs(p: dict[str, Any], gpu_known: str | None, flags: dict[str, str] | None = None) -> tuple[Any, Any,
    Any, Any]:
    """(API price row, GPU rate or None when the GPU is named only by the run or priced by --gpu-usd-per-hour, SLO,
    --gpu-usd-per-hour read: one number, {catalog id: USD/GPU-h} or None) — every input error at once.

    Checks that --slo is given, then --slo, every numeric option's range (``kvledger.cli.limits``), no
    --utilization with a monthly volume (``ledgers.volume.refuse_utilization_with_volume``),
    --gpu-usd-per-hour (``catalog.given_prices``: a list must name ``gpu_known``), the --api row and, when
    ``gpu_known``, its price row, and raises them together (one error alone keeps its type).
    """
    from kvledger.catalog.api_match import find_api_price
    from kvledger.catalog.given_prices import parse_gpu_usd, price_of
    from kvledger.catalog.price_names import check_gpu_provider
    from kvledger.cli.limits import range_problems
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo
    from kvledger.ledgers.volume import refuse_utilization_above_peak, refuse_utilization_with_volume

    problems: list[Exception] = []
    if p["slo"] is None:
        problems.append(InputError("missing --slo: cost needs the SLO (e.g. --slo ttft=200ms,tpot=50ms); the API rows "
                                   "default "
                                   "to those serving the same model (--api names another), the utilization to the "
                                   "volume's"))
    slo = collect(problems, lambda: parse_slo(p["slo"])) if p["slo"] is not None else None
    problems += list(range_problems("cost", p, flags))
    volume_given = any(p.get(k) is not None for k in ("monthly_requests", "monthly_tokens", "monthly_input_tokens",
                                                      "monthly_output_tokens"))
    collect(problems, lambda: refuse_utilization_with_volume(p.get("utilization"), volume_given))
    collect(problems, lambda: refuse_utilization_above_peak(p.get("utilization"), p.get("max_utilization") or 0.8,
                                                            p.get("peak_to_mean") or 1.0))
    given = p["gpu_usd_per_hour"]
    usd = collect(problems, lambda: parse_gpu_usd(given, "cost")) if given is not None else None
    api = collect(problems, lambda: find_api_price(p["api"])) if p["api"] is not None else None
    rate = None
    if given is None and gpu_known is not None:
        rate = collect(problems, lambda: gpu_rate_for(gpu_known, p["gpu_provider"], p["instance"], None))
    elif isinstance(usd, dict) and gpu_known is not None:  # a list must price this GPU: refused with the rest
        collect(problems, lambda: price_of(usd, gpu_known))
    if given is not None:  # the provider then labels the user's price: an unknown one is refused all the same
        collect(problems, lambda: check_gpu_provider(p["gpu_provider"]))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputError(f"{len(problems)} problems with the inputs:\n" + "\n".join(f"  - {e}" for e in problems))
    return api, rate, slo, usd


def file_run(files: list[Path], fmt: str | None, run_index: int | None, num_gpus: int | None, slo: Any,
              target: float | None) -> tuple[Any, int, str | None, SweepCapacity | None]:
    """(run, GPU count, GPU name for the price table, sweep choice or None) from benchmark or records files.

    One run: that run. Several (a multi-run file or several FILEs, e.g. a rate sweep): ``--run INDEX`` picks one,
    otherwise the run at the sweep's SLO capacity (``analyses.cost_run.sweep_capacity_run``) is priced, and the choice
    is stated.
    """
    from kvledger.analyses.serving.cost_run import sweep_capacity_run
    from kvledger.errors import InputError
    from kvledger.evidence import read_runs

    runs = [r for f in files for r in read_runs(f, format=fmt)]
    where = str(files[0]) if len(files) == 1 else f"{len(files)} files"
    sweep = None
    if len(runs) > 1 and run_index is None:
        run, sweep = sweep_capacity_run(runs, slo, 0.9 if target is None else target, where)
    else:
        run = pick_run(runs, run_index, where)
    md = run.metadata
    n_gpus = num_gpus if num_gpus is not None else md.num_gpus
    if n_gpus is None:
        raise InputError(f"{md.source} does not state how many GPUs served the run; pass --num-gpus")
    gpu_id = md.extra.get("gpu_id")  # written by kvledger simulate: the catalog id the price table uses
    return run, n_gpus, gpu_id if gpu_id not in (None, "custom") else md.hardware, sweep


def sim_run(model: str, gpu: str | None, groups: tuple[WorkloadFlags, EngineFlags], params: dict[str, Any],
             slo: Any) -> tuple[Any, Any]:
    """(simulated run to price, SimCapacity / TierCapacity or None) for ``--simulate``: the run at the SLO capacity
    sized on (``priced_run``: the rate found, or a run at the capacity bound where that caps it) by the request-rate
    search — with ``--kv-tier-host``, that search's boundary then the search's tier probe
    with the host tier in the simulator (``analyses/serving/tier_cost_capacity.py``) — or with ``--at-offered-load``
    the run at the workload's own load, no tier simulated (FILE-only flags refused)."""
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS
    from kvledger.analyses.serving.sim_capacity import DEFAULT_TARGET, search_capacity
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.cli.sim_opts import sim_request
    from kvledger.errors import InputError

    given = [flag for name, flag in (("num_gpus", "--num-gpus"), ("run_index", "--run"), ("format", "--format"),
                                     ("served_model", "--model"))
             if params.get(name) is not None]
    if given:
        raise InputError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a FILE; with --simulate "
                         "the GPU count is replicas × TP (--replicas, --tp)")
    if params.get("at_offered_load"):
        if params.get("target") is not None:
            raise InputError("--target sets the attainment target of the capacity search, which --at-offered-load "
                             "skips; give one of them")
        args, synthetic = sim_request(model, gpu, *groups)
        with working("simulating"):
            return simulate_run(args, synthetic), None
    args, synthetic = sim_request(model, gpu, *groups, num_requests_default=PROBE_NUM_REQUESTS)
    if synthetic is None:
        from kvledger.dynamics.workload.traces import require_arrivals

        require_arrivals(args.trace, "cost --simulate's SLO-capacity search replays a trace's own arrivals at scaled "
                         "rates", "; or price this trace at a load you give: --at-offered-load with --rate R (and "
                         "--seed S) or --concurrency N")
    target = params.get("target")
    host_gib = _tiers_on_a_node(params, args)
    with working("searching the SLO capacity (one simulation per probe)"):
        cap = search_capacity(args, slo, DEFAULT_TARGET if target is None else target, synthetic=synthetic)
    if host_gib is None:
        return cap.priced_run, cap
    from kvledger.analyses.serving.tier_cost_capacity import tier_search_capacity

    with working("searching the SLO capacity with the host KV tier (one simulation per probe)"):
        tcap = tier_search_capacity(args, synthetic, slo, host_gib, cap)
    return tcap.priced_run, tcap


def _tiers_on_a_node(params: dict[str, Any], args: Any) -> float | None:
    """--kv-tier-host in GiB per GPU (None: not given), once it and --kv-tier-nvme are within one node's host memory
    and NVMe (``accounting.tier_bounds``), checked before any search."""
    from kvledger.accounting.tier_bounds import refuse_beyond_a_node
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.cli.analysis_opts import gib_option

    host, nvme = (gib_option(params.get(k), f) for k, f in (("kv_tier_host", "--kv-tier-host"),
                                                             ("kv_tier_nvme", "--kv-tier-nvme")))
    for flag, kind, gib in (("--kv-tier-host", "host", host), ("--kv-tier-nvme", "nvme", nvme)):
        if gib is not None:
            refuse_beyond_a_node(f"{flag} {gib:,.6g} GiB (per GPU)", kind, gib, resolve_gpu(args.gpu), args.tp)
    return host


def check_seeds(is_file: bool, at_offered_load: bool, params: dict[str, Any]) -> None:
    """Refuse ``--seeds N`` (N > 1) where there is no SLO-capacity search to repeat per seed."""
    from kvledger.errors import InputError

    if is_file:
        raise InputError("--seeds repeats the simulated SLO-capacity search per seed: it applies to --simulate, not "
                         "to a measured FILE")
    if at_offered_load:
        raise InputError("--seeds repeats the SLO-capacity search per seed, which --at-offered-load skips; for one "
                         "run's figures over seeds use kvledger simulate --seeds N")
    if params.get("kv_tier_host") is not None:
        raise InputError("--seeds is not run with --kv-tier-host (its tier probe follows one search); drop one")


def seed_costs(model: str, gpu: str | None, groups: tuple[WorkloadFlags, EngineFlags], params: dict[str, Any],
               slo: Any, seeds: int, first_cap: Any, first_payload: dict[str, Any], price: Any) -> Any:
    """``--seeds N``: the SLO capacity searched for seeds ``--seed`` + 1 … (the first is ``first_cap``) and each priced
    by ``price(capacity)`` (the first seed's own pricing: one ledger), as ``cost_seeds.CostSeedSpread``."""
    from dataclasses import replace

    from kvledger.analyses.serving.cost_seeds import cost_seed_spread
    from kvledger.analyses.serving.seed_spread import seed_list, seed_used
    from kvledger.cli.sim_opts import synthetic_spec

    workload, engine = groups

    def price_seed(seed: int) -> tuple[Any, dict[str, Any]]:
        _, cap = sim_run(model, gpu, (replace(workload, seed=seed), engine), params, slo)
        return cap, price(cap)

    args = first_cap.run.args
    probe = replace(args, rate=1.0)  # a probe draws as any rate's does (goodput --seeds's rule)
    return cost_seed_spread(first_cap, first_payload, seed_list(args.seed, seeds),
                            price_seed if seed_used(probe, synthetic_spec(workload)) else None)
