"""The Python API's ``simulate`` and ``goodput`` by model and GPU name, through the same functions as their commands
(``sim_request``, ``dp_flags.with_dp`` and ``simulate_run``; ``simulated_goodput`` and its search), so ``to_dict()`` is
the command's ``--json`` for the same inputs. Each parameter is the command's flag of the same name with underscores
(vLLM's spellings: SGLang's aliases of ``--tp`` and the others are the CLI's alone); ``tests/api/test_api_sim_flags.py``
holds them to the commands' flags. Arguments are checked against their annotations first (``argtypes.checked``); an
error names the parameters, not the flags."""

from __future__ import annotations

import inspect
from typing import Any

from kvledger.analyses.serving.session_report import SessionReport
from kvledger.analyses.serving.sim_document import SimDocument
from kvledger.analyses.serving.sim_tier_report import SimTierReport
from kvledger.api.results import (
    GoodputResult,
    check_ranges,
    goodput_document,
    in_python_terms,
    python_document,
)
from kvledger.argtypes import checked

__all__ = ["simulate", "goodput", "SimDocument", "SessionReport", "SimTierReport"]


@checked
def simulate(model: str, gpu: str, *, trace: str | None = None, prompt_lengths: str | None = None,
             output_lengths: str | None = None, arrival_cv: float | None = None, rate: float | None = None,
             rate_scale: float | None = None, num_requests: int | None = None, seed: int | None = None,
             concurrency: int | None = None, think_time: float | None = None, shared_prefix_tokens: int | None = None,
             document_pool: str | None = None, offload_prompt_only: bool | None = None,
             policy: str | None = None, engine_version: str | None = None, tp: int | None = None,
             enable_expert_parallel: bool | None = None, max_model_len: int | str | None = None,
             ep_size: int | None = None, attn_dp_size: int | None = None,  # SGLang's --ep-size, --attn-dp-size
             gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
             kv_cache_dtype: str | None = None, quantization: str | None = None, block_size: int | None = None,
             max_num_batched_tokens: int | str | None = None, max_num_seqs: int | None = None,
             num_gpu_blocks_override: int | None = None, enable_prefix_caching: bool | None = None,
             enable_chunked_prefill: bool | None = None, prefix_caching_policy: str | None = None,
             scheduling_policy: str | None = None, batching: str | None = None, kv_allocation: str | None = None,
             async_scheduling: bool | None = None, long_prefill_token_threshold: int | None = None,
             long_prefill_token_threshold_adaptive: bool | None = None, max_num_partial_prefills: int | None = None,
             max_long_partial_prefills: int | None = None, prefix_cache_retention_interval: int | None = None,
             enforce_eager: bool | None = None, wddm: bool | None = None, mxfp4_backend: str | None = None,
             replicas: int | None = None, router: str | None = None, step_cost: str | None = None,
             disable_hybrid_kv_cache_manager: bool | None = None, mamba_ssm_cache_dtype: str | None = None,
             cpu_overhead: str | None = None, client_latency: str | None = None, moe_a2a_backend: str | None = None,
             achievable_flops_fraction: float | None = None, achievable_bandwidth_fraction: float | None = None,
             allreduce_link_share: float | None = None, inter_node_link: str | None = None,
             gpu_profile: str | None = None, gemm_efficiency: str | None = None, data_parallel_size: int | None = None,
             all2all_backend: str | None = None, enable_dp_attention: bool = False, pp: int | None = None,
             workload: str | None = None, sessions: int | None = None, session_rate: float | None = None,
             kv_offloading_size: float | str | None = None, kv_offloading_backend: str | None = None,
             enable_hierarchical_cache: bool | None = None, hicache_ratio: float | None = None,
             hicache_size: int | None = None, hicache_write_policy: str | None = None,
             kv_tier_nvme: float | str | None = None, nvme_read_bandwidth: float | None = None,
             kv_tier_remote: float | str | None = None, network_bandwidth: float | None = None,
             store_threshold: int | None = None, eviction_policy: str | None = None,
             hicache_storage_prefetch_policy: str | None = None, seeds: int = 1, cache: bool = False) -> SimDocument:
    """Serve a trace (``trace``, default azure-conv), a synthetic workload (``prompt_lengths`` and ``output_lengths``,
    e.g. "fixed:512", with ``rate`` and ``num_requests``) or multi-turn sessions (``workload`` "chat" or "agent",
    ``sessions``, ``session_rate``) on the simulated engine, as ``kvledger simulate`` does; every setting left None is
    the command's default (``data_parallel_size`` with ``enable_expert_parallel``: vLLM's DP ranks of a MoE model in
    lock-step; ``enable_dp_attention``, ``moe_a2a_backend``: SGLang's DP attention). The host KV tier parameters
    (``kv_offloading_size`` in GiB or "256GiB", …): the tier flags, run with and without the tier. ``seeds`` (1 to
    64): as ``--seeds``, each figure's min–max over seeds ``seed``, ``seed`` + 1, …; the figures stay the first's.

    ``cache``: read and keep a trace or synthetic run (not sessions, not a host tier: those run each time, as the
    command's) in the on-disk store (``$KVLEDGER_CACHE_DIR``, else ``~/.cache/kvledger``, folder ``sims/``), whatever
    ``KVLEDGER_NO_CACHE`` says; False (the default, as the command) neither reads nor writes it. The simulator turns
    the garbage collector off for the run, process-wide (``dynamics.simulator``).

    Returns:
        SimDocument, the simulate document: ``.summary`` (TTFT/TPOT/ITL/E2E percentiles, throughput, KV usage,
        preemptions), ``.notes``, ``.sessions`` (``SessionReport``: the sessions drawn), ``.kv_tiers``
        (``SimTierReport``: hits, loads and bytes per tier) and ``.to_dict()``, equal to ``kvledger simulate … --json``.

    Raises:
        InputError, UnknownNameError, FormatError: a wrong type, an unknown name, a bad trace or setting;
        DoesNotFitError: the memory plan does not fit (the command's exit 3).
    """
    values = {k: v for k, v in locals().items() if k in _SIM_PARAMS}
    with in_python_terms("simulate", _SIM_PARAMS):
        check_ranges("simulate", {k: v for k, v in values.items() if k != "cache"})
        doc = _simulate(model, gpu, values, seeds, cache)
    return _in_call_terms(doc)


def _in_call_terms(doc: SimDocument) -> SimDocument:
    """``doc`` with its prose naming the call's parameters, not the command's flags (``results.python_document``): its
    JSON-ready fields (dicts, lists, text) rewritten; its typed records (bands, the burst's read, a tier's report)
    as they were."""
    import dataclasses

    return dataclasses.replace(doc, **{f.name: python_document(v, _SIM_PARAMS) for f in dataclasses.fields(doc)
                                       if isinstance(v := getattr(doc, f.name), (dict, list, str))})


def _simulate(model: str, gpu: str, values: dict[str, Any], seeds: int, cache: bool) -> SimDocument:
    """``simulate``'s run of its checked ``values``: a trace or synthetic run through the on-disk store
    (``sim_ledgers.simulate_run``), sessions or a host tier as the command runs them (``sim_run.simulate_payload``)."""
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.sim_ledgers import simulate_document, simulate_run
    from kvledger.analyses.serving.sim_run import simulate_payload, with_seed_spread
    from kvledger.cli.simulate_run import simulate_inputs

    workload, engine, dp, sessions, tiers = _groups(values)
    args, prep, tier = simulate_inputs(model, gpu, workload, sessions, engine, tiers, dp)
    if prep.sessions is not None or tier is not None:
        return simulate_payload(args, prep, tier, seeds)[0]
    with sim_cache.using(cache):
        sim = simulate_run(args, prep.synthetic, record_token_times=False)
    return with_seed_spread(simulate_document(sim.setup, sim.result), args, seeds, prep, None)


_SIM_PARAMS = frozenset(inspect.signature(simulate).parameters)
_RENAME = {"enable_prefix_caching": "prefix_caching", "enable_chunked_prefill": "chunked_prefill",
           "workload": "session_workload"}
"""The API's names (vLLM's flags; ``workload``: ``--workload``) of the flag groups' fields named otherwise."""
#: parameters the command reads as text (a token count such as "32K", a size such as "256GiB"): a number is its text
_AS_TEXT = ("max_model_len", "max_num_batched_tokens", "kv_offloading_size", "kv_tier_nvme", "kv_tier_remote")


def _groups(values: dict[str, Any]) -> tuple[Any, ...]:
    """The command's flag groups (workload, engine, DP, sessions, host tiers) filled from the call's ``values``."""
    import dataclasses

    from kvledger.cli.dp_flags import SimDataParallelFlags
    from kvledger.cli.flag_groups import EngineFlags, TierFlags, WorkloadFlags
    from kvledger.cli.session_flags import SessionFlags

    v = {_RENAME.get(k, k): (str(x) if k in _AS_TEXT and x is not None else x) for k, x in values.items()}
    return tuple(cls(**{f.name: v[f.name] for f in dataclasses.fields(cls) if f.name in v})
                 for cls in (WorkloadFlags, EngineFlags, SimDataParallelFlags, SessionFlags, TierFlags))


def _sim_request(model: str, gpu: str, values: dict[str, Any], num_requests_default: int | None = None,
                 sessions: Any = None, search: tuple[float | None, str] = (None, "rate"), tier: Any = None) -> Any:
    """(SimRequestArgs, the workload spec) through the command's own ``sim_request`` (its defaults and checks), the DP
    group checked and applied as the command applies it (``dp_flags.with_dp``); with ``sessions`` (``SessionFlags``)
    through goodput's ``goodput_request`` (``search``: its target and axis); with a host tier (``TierSettings``),
    SGLang's HiCache rule applied (``tier_opts.with_hicache``), as goodput's command applies it."""
    from kvledger.cli.dp_flags import with_dp
    from kvledger.cli.sim_opts import sim_request
    from kvledger.cli.tier_opts import with_hicache

    workload, engine, dp, _, _ = _groups(values)
    if sessions is None:
        args, synthetic = sim_request(model, gpu, workload, engine, num_requests_default=num_requests_default)
    else:
        from kvledger.cli.goodput_sessions import goodput_request

        args, synthetic = goodput_request(model, gpu, (workload, engine, sessions), *search, num_requests_default)
    return with_hicache(with_dp(args, dp, None if tier is None else "the host KV tier flags"), tier), synthetic


@checked
def goodput(model: str, gpu: str, *, slo: str, target: float | None = None, axis: str = "rate",
            lo: float | None = None, hi: float | None = None, tol: float | None = None, seeds: int = 1,
            trace: str | None = None, prompt_lengths: str | None = None, output_lengths: str | None = None,
            arrival_cv: float | None = None, rate: float | None = None, rate_scale: float | None = None,
            num_requests: int | None = None, seed: int | None = None, concurrency: int | None = None,
            think_time: float | None = None, shared_prefix_tokens: int | None = None, policy: str | None = None,
            document_pool: str | None = None, offload_prompt_only: bool | None = None,
            engine_version: str | None = None, tp: int | None = None, enable_expert_parallel: bool | None = None,
            ep_size: int | None = None, attn_dp_size: int | None = None,  # SGLang's --ep-size, --attn-dp-size
            max_model_len: int | str | None = None, gpu_memory_utilization: float | None = None,
            mem_fraction_static: float | None = None, kv_cache_dtype: str | None = None,
            quantization: str | None = None, block_size: int | None = None,
            max_num_batched_tokens: int | str | None = None, max_num_seqs: int | None = None,
            num_gpu_blocks_override: int | None = None, enable_prefix_caching: bool | None = None,
            enable_chunked_prefill: bool | None = None, prefix_caching_policy: str | None = None,
            scheduling_policy: str | None = None, batching: str | None = None, kv_allocation: str | None = None,
            async_scheduling: bool | None = None, long_prefill_token_threshold: int | None = None,
            long_prefill_token_threshold_adaptive: bool | None = None, max_num_partial_prefills: int | None = None,
            max_long_partial_prefills: int | None = None, prefix_cache_retention_interval: int | None = None,
            enforce_eager: bool | None = None, wddm: bool | None = None, mxfp4_backend: str | None = None,
            replicas: int | None = None, router: str | None = None, step_cost: str | None = None,
            disable_hybrid_kv_cache_manager: bool | None = None, mamba_ssm_cache_dtype: str | None = None,
            cpu_overhead: str | None = None, client_latency: str | None = None, moe_a2a_backend: str | None = None,
            achievable_flops_fraction: float | None = None, achievable_bandwidth_fraction: float | None = None,
            allreduce_link_share: float | None = None, inter_node_link: str | None = None,
            gpu_profile: str | None = None, gemm_efficiency: str | None = None, data_parallel_size: int | None = None,
            all2all_backend: str | None = None, enable_dp_attention: bool = False, pp: int | None = None,
            workload: str | None = None, sessions: int | None = None, session_rate: float | None = None,
            kv_offloading_size: float | str | None = None, kv_offloading_backend: str | None = None,
            enable_hierarchical_cache: bool | None = None, hicache_ratio: float | None = None,
            hicache_size: int | None = None, hicache_write_policy: str | None = None,
            kv_tier_nvme: float | str | None = None, nvme_read_bandwidth: float | None = None,
            kv_tier_remote: float | str | None = None, network_bandwidth: float | None = None,
            store_threshold: int | None = None, eviction_policy: str | None = None,
            hicache_storage_prefetch_policy: str | None = None, cache: bool = True) -> GoodputResult:
    """Goodput of a simulated run under ``slo`` ("ttft=200ms,tpot=50ms"), as ``kvledger goodput --simulate MODEL
    --gpu GPU --slo SLO`` measures it; with ``target`` (e.g. 0.9) the SLO boundary on ``axis`` ("rate",
    "concurrency" or "max_num_seqs"), one simulation per probe, searched between ``lo`` and ``hi`` to ``tol`` and
    once per seed for ``seeds`` > 1, as ``--lo``, ``--hi``, ``--tol`` and ``--seeds``. The workload and engine
    settings are ``simulate``'s, by the same names; left None, the command's default. ``workload`` ("chat" or
    "agent"), ``sessions`` and ``session_rate`` are ``--workload``, ``--sessions`` and ``--session-rate``: multi-turn
    sessions instead of a trace, as the command draws them; the host KV tier parameters are ``simulate``'s (with
    ``target``: the rate searched with the tiers, the capacity without them beside it, as the command).

    ``cache``: read and keep each simulation in the on-disk store (``$KVLEDGER_CACHE_DIR``, else
    ``~/.cache/kvledger``), as the command does unless ``KVLEDGER_NO_CACHE`` is set; False neither reads nor writes it.

    Returns:
        GoodputResult: ``.to_dict()`` equal to ``kvledger goodput --simulate … --json``; ``.result`` the ledger's;
        ``.kv_tiers`` the host tier's ``SimTierReport`` (None without one).

    Raises:
        InputError, UnknownNameError: a wrong type, an unknown name, a bad SLO or setting; DoesNotFitError.
    """
    from kvledger.analyses.serving import sim_cache

    values = {k: v for k, v in locals().items() if k in _SIM_PARAMS and k not in ("seeds", "cache")}
    with in_python_terms("goodput", _GOODPUT_PARAMS), sim_cache.using(cache):
        check_ranges("goodput", {**values, "target": target, "lo": lo, "hi": hi, "tol": tol, "seeds": seeds})
        return _goodput_run(model, gpu, values, slo, (target, axis, lo, hi, tol, seeds))


def _goodput_run(model: str, gpu: str, values: dict[str, Any], slo: str, search: tuple) -> GoodputResult:
    """One simulated run's goodput, or with a target the boundary search (``search``: target, axis, lo, hi, tol,
    seeds), as ``goodput_cmd``'s ``--simulate`` runs them."""
    from functools import partial

    from kvledger.analyses.serving.report_tier_capacity import search_with_tier
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS, normalize_axis
    from kvledger.analyses.serving.sim_goodput import (
        simulated_goodput,
        simulated_goodput_search,
        simulated_goodput_with_tier,
    )
    from kvledger.cli.tier_opts import check_tier_sizes, tier_settings, tiers_given
    from kvledger.errors import InputError
    from kvledger.jsonable import to_jsonable
    from kvledger.ledgers.slo import parse_slo

    target, axis, lo, hi, tol, seeds = search
    the_slo = parse_slo(slo)
    normalize_axis(axis)  # a misspelt axis is an error with or without target, as the command's --axis
    sessions, tiers = _groups(values)[3:]
    tier = tier_settings(tiers, engine_flag="--policy") if tiers_given(tiers) else None
    if target is None:
        if seeds != 1:
            raise InputError("seeds repeats the SLO-capacity search per seed: add target (e.g. 0.9), or see one "
                             "run's figures over seeds with kvledger.simulate(seeds=N)")
        args, synthetic = _sim_request(model, gpu, values, None, sessions, (None, axis), tier)
        check_tier_sizes(tier, args.gpu, args.tp)
        run = (simulated_goodput(args, the_slo, synthetic) if tier is None else
               simulated_goodput_with_tier(args, the_slo, tier, synthetic))
        doc = python_document(goodput_document([to_jsonable(x) for x in run.lines()]), _GOODPUT_PARAMS)
        return GoodputResult(doc, run.result, run.tiers)
    args, synthetic = _sim_request(model, gpu, values, PROBE_NUM_REQUESTS, sessions, (target, axis), tier)
    check_tier_sizes(tier, args.gpu, args.tp)
    search = simulated_goodput_search if tier is None else partial(search_with_tier, tier=tier)  # as goodput_cmd
    found = search(args, the_slo, target, axis, lo=lo, hi=hi, tol=tol, synthetic=synthetic, seeds=seeds)
    return GoodputResult(python_document(goodput_document([to_jsonable(x) for x in found.lines()]), _GOODPUT_PARAMS),
                         found.search)


_GOODPUT_PARAMS = frozenset(inspect.signature(goodput).parameters)
