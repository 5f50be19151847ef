"""From the workload and engine flag groups (``kvledger.cli.flag_groups``) to one SimRequestArgs and SyntheticSpec.

``kvledger simulate`` and the simulating ledgers (``cost --simulate``, ``goodput --simulate``) take the same
groups and go through :func:`sim_request`, so a flag means the same in each. Every flag defaults to None so a
command can tell "given" from "left at the default" (a simulation flag given without ``--simulate`` is an
error); the engine's and ``kvledger simulate``'s defaults are SimRequestArgs's own.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from kvledger.cli.flag_groups import EngineFlags, GroupUse, TierFlags, WorkloadFlags, given_flags

__all__ = ["Simulate",  # noqa: F822 - made on first access (__getattr__)
           "SIM_WORKLOAD", "SIM_ENGINE", "SIM_TIERS", "TIER_HELP", "sim_request", "synthetic_spec", "reject_sim_flags",
           "check_loop_flags"]


def __getattr__(name: str) -> Any:
    """``Simulate``, the ``--simulate MODEL`` option type, made on first use: ``kvledger simulate``'s quick path
    (quick_argv.py) imports this module without typer."""
    if name != "Simulate":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import typer

    globals()["Simulate"] = made = Annotated[str | None, typer.Option(
        "--simulate", show_default=False,
        help="Simulate this model (HF id, alias, config.json path or Hub id) on --gpu instead of reading a FILE.")]
    return made


#: the groups as ``cost`` and ``goodput`` take them: used only with ``--simulate``, and marked so in the help.
SIM_WORKLOAD = GroupUse(WorkloadFlags, prefix="[--simulate] ")
SIM_ENGINE = GroupUse(EngineFlags, prefix="[--simulate] ")
#: the tier flags as a simulation takes them (simulate; goodput --simulate): SGLang's apply with --policy sglang
TIER_HELP = {
    "enable_hierarchical_cache": "With --policy sglang: SGLang HiCache, a host KV tier.",
    "hicache_ratio": "With --policy sglang: host pool / device pool (default 2.0).",
    "hicache_size": "With --policy sglang: host pool in GB (10^9 B) per GPU; overrides the ratio.",
    "hicache_write_policy": "With --policy sglang: write_through (default), write_through_selective or write_back.",
    "hicache_storage_prefetch_policy": "With --policy sglang and --kv-tier-nvme: SGLang's storage prefetch policy; "
                                       "only wait_complete is simulated."}
SIM_TIERS = GroupUse(TierFlags, prefix="[--simulate] ", help=TIER_HELP)

#: group field → SimRequestArgs field, where the two names differ (the CLI keeps vLLM's flag, the record its unit).
_FIELD = {"think_time": "think_time_s", "prefix_caching": "enable_prefix_caching",
          "chunked_prefill": "enable_chunked_prefill"}
_SYNTHETIC = ("prompt_lengths", "output_lengths", "arrival_cv")
#: taken only to be refused (--enable-ep-moe: SGLang 0.4.x's, analyses/ep_flags.py): no SimRequestArgs field
_NOT_SIMULATED = (*_SYNTHETIC, "enable_ep_moe")


def check_loop_flags(workload: WorkloadFlags) -> None:
    """Refuse arrival flags that the chosen loop would ignore: a think time means nothing in an open loop. (A rate with
    ``--concurrency`` paces the closed loop: ``sim_setup``.)

    Raises:
        InputError: --think-time without --concurrency, or with a paced loop.
    """
    from kvledger.errors import InputError

    w = workload
    if w.think_time is not None and (w.rate is not None or w.rate_scale is not None):
        raise InputError("--think-time is the pause of a closed-loop user (--concurrency N without a rate); with "
                         "--rate or --rate-scale the requests follow the rate (paced under --concurrency, if given: a "
                         "benchmark client sends each at its time or when a slot frees, with no pause): drop "
                         "--think-time, or the rate")
    if w.think_time is not None and w.concurrency is None:
        raise InputError("--think-time is the pause of a closed-loop user; add --concurrency N, or drop it (an open "
                         "loop follows the trace's arrival times)")


def reject_sim_flags(workload: WorkloadFlags, engine: EngineFlags, *more: Any) -> None:
    """Raise InputError naming the simulation flags given without ``--simulate`` (``more``: other groups, e.g. the
    tier flags)."""
    from kvledger.errors import InputError

    given = given_flags(workload, engine, *more)
    if given:
        one = len(given) == 1
        raise InputError(f"{', '.join(given)} describe{'s' if one else ''} a simulation; add --simulate MODEL (with "
                         f"--gpu), or drop {'it' if one else 'them'} to read FILE")


def synthetic_spec(workload: WorkloadFlags) -> Any:
    """The synthetic workload the flags describe, or None for a trace; a ``--trace`` that is no bundled trace and no
    file is refused here, before any planning (every command reads its workload flags through this first).

    Raises:
        InputError: a trace file not found, half a synthetic workload, or --trace together with one.
    """
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.dynamics.workload.traces import check_trace
    from kvledger.errors import InputError

    if workload.trace is not None:
        check_trace(workload.trace)
    prompt, output, cv = workload.prompt_lengths, workload.output_lengths, workload.arrival_cv
    if workload.document_pool is not None and prompt is None:
        from kvledger.analyses.serving.shared_prompts import POOL_NEEDS_SYNTHETIC

        raise InputError(POOL_NEEDS_SYNTHETIC)
    if prompt is None and output is None and cv is None:
        return None
    if prompt is None or output is None:
        raise InputError("a synthetic workload needs both --prompt-lengths and --output-lengths")
    if workload.trace is not None:
        raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
    return SyntheticSpec(prompt, output, 1.0 if cv is None else cv)


def sim_request(model: str, gpu: str | None, workload: WorkloadFlags, engine: EngineFlags, *,
                num_requests_default: int | None = None) -> tuple[Any, Any]:
    """(SimRequestArgs, SyntheticSpec or None) from the two groups; a flag left None takes SimRequestArgs's default.

    Raises:
        InputError: no --gpu, arrival flags the loop would ignore, an EP size (ep_flags.py), or half a synthetic
            workload.
    """
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.cli.kv_dtype_flag import sim_kv_dtype_check
    from kvledger.errors import InputError

    if gpu is None:
        raise InputError("--simulate needs --gpu (a catalog GPU such as H100, or a GPU file)")
    check_loop_flags(workload)
    if engine.ep_size is not None or engine.enable_ep_moe:  # the refusal's words need the model (ep_flags.py)
        from kvledger.analyses.ep_flags import refuse_ep_flags
        from kvledger.catalog.models import load_model

        refuse_ep_flags(str(engine.policy or "vllm").lower(), engine.tp or 1, engine.ep_size, engine.enable_ep_moe,
                        load_model(model), ("simulation", "simulate"))
    sim_kv_dtype_check(engine.kv_cache_dtype, engine.policy, engine.engine_version)
    synthetic = synthetic_spec(workload)
    values = {**dataclasses.asdict(workload), **dataclasses.asdict(engine)}
    fields = {_FIELD.get(k, k): v for k, v in values.items() if v is not None and k not in _NOT_SIMULATED}
    if workload.num_requests is None and num_requests_default is not None:
        fields["num_requests"] = num_requests_default
    fields["router_given"] = engine.router is not None
    return SimRequestArgs(model=model, gpu=gpu, **fields), synthetic
