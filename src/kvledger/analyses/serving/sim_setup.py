"""What a simulation run needs from what a user types (model, GPU, trace, flags); ``build_plan`` sizes the KV pool."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from kvledger.accounting.tp_network import unused_nic_note
from kvledger.analyses.serving.affinity_sessions import sessions_for_affinity
from kvledger.analyses.serving.all2all_note import all2all_note
from kvledger.analyses.serving.arrival_words import arrivals_words
from kvledger.analyses.serving.client_latency import client_latency_for
from kvledger.analyses.serving.from_plan import engine_config_from_plan
from kvledger.analyses.serving.long_prefill import long_prefill_overrides
from kvledger.analyses.serving.null_block_edge import null_block_edge_notes
from kvledger.analyses.serving.plan_pricing import plan_fractions
from kvledger.analyses.serving.prefix_ids import has_prefix_ids
from kvledger.analyses.serving.profile_scope import check_profile_scope, poor_profile_warning
from kvledger.analyses.serving.reasoning_note import trace_notes
from kvledger.analyses.serving.retention_flag import retention_interval_override
from kvledger.analyses.serving.sched_defaults import scheduler_overrides
from kvledger.analyses.serving.shared_prompts import refuse_with_sessions, shared_prompts
from kvledger.analyses.serving.sim_document import PACED_MODE
from kvledger.analyses.serving.sim_dp import lockstep_with_note
from kvledger.analyses.serving.sim_engine_flags import check_engine_flags
from kvledger.analyses.serving.sim_pp import pipelined_cost, pp_overrides
from kvledger.analyses.serving.step_cost_choice import gpu_profile_of, make_step_cost
from kvledger.analyses.serving.step_cost_memo import file_mtime_ns, kept_step_cost
from kvledger.argtypes import check_fields
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.errors import InputError
from kvledger.ranges import check_options

__all__ = ["SimRequestArgs", "SimSetup", "prepare", "make_step_cost", "load_plan", "plan_engine", "paced"]


@dataclass
class SimRequestArgs:
    """The user's choices, as the CLI flags name them (None: the engine's default); each of its declared type."""

    model: str
    gpu: str
    trace: str = "azure-conv"
    rate: float | None = None
    rate_scale: float | None = None
    num_requests: int | None = None
    seed: int = 0
    concurrency: int | None = None
    think_time_s: float = 0.0
    shared_prefix_tokens: int | None = None  # one system prompt every request starts with (workload/shared_prefix.py)
    document_pool: str | None = None  # K:L[:zipf=S]: a drawn document before each question (workload/document_pool.py)
    engine_version: str | None = None
    tp: int = 1
    max_model_len: str | int | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None  # SGLang's fraction; only with policy "sglang" (its plan sizes the pool)
    kv_cache_dtype: str = "auto"
    quantization: str | None = None  # vLLM --quantization: "fp8" quantizes the weights on load (plan and step cost)
    block_size: int | None = None
    max_num_batched_tokens: str | int | None = None
    max_num_seqs: int | None = None
    num_gpu_blocks_override: int | None = None
    kv_pool_source: str | None = None  # where num_gpu_blocks_override came from (validate --startup-log: the log line)
    kv_pool_block_size: int | None = None  # --startup-log: tokens per block of the log's pool (startup_pool.py)
    max_total_tokens: int | None = None  # SGLang's pool as a measured run's server sized it (server_info), tokens
    enable_prefix_caching: bool | None = None
    disable_hybrid_kv_cache_manager: bool = False  # vLLM flag: the plan's pool with sliding layers as full
    mamba_ssm_cache_dtype: str = "auto"  # vLLM flag: the SSM state dtype, read as plan reads it (vllm_ssm_dtype)
    enable_chunked_prefill: bool | None = None
    policy: str | None = None
    prefix_caching_policy: str | None = None
    scheduling_policy: str | None = None
    batching: str | None = None
    kv_allocation: str | None = None
    replicas: int = 1
    router: str = "round_robin"
    router_given: bool = False  # --router typed: the default named too earns the note that one replica needs none
    step_cost: str = "roofline"
    cpu_overhead: str | None = None
    client_latency: str | None = None  # --client-latency: added to each TTFT and E2E after the run (client_latency.py)
    async_scheduling: bool | None = None
    long_prefill_token_threshold: int | None = None  # vLLM v1's chunk cap per request and step (long_prefill.py)
    long_prefill_token_threshold_adaptive: bool | None = None  # vLLM ≥ 0.31: the cap floored at the budget's share
    max_num_partial_prefills: int | None = None  # vLLM V0's limits: 1 (default) or refused for a V1 engine
    max_long_partial_prefills: int | None = None
    prefix_cache_retention_interval: int | None = None  # vLLM ≥ 0.29: sparse checkpoints kept (retention_flag.py)
    enable_expert_parallel: bool | None = None  # vLLM --enable-expert-parallel (experts whole over DP × TP ranks)
    ep_size: int | None = None  # SGLang --ep-size with policy sglang (accounting/sglang_ep.py); 1: its default
    enable_dp_attention: bool | None = None  # SGLang's DP attention, ranks in lock-step (sim_sglang_dp.py)
    moe_a2a_backend: str | None = None  # SGLang --moe-a2a-backend under DP attention: none (default) or deepep
    data_parallel_size: int | None = None  # vLLM --data-parallel-size of a MoE model: ranks in lock-step (sim_dp.py)
    pp: int = 1  # vLLM --pipeline-parallel-size: stages of TP GPUs each (sim_pp.py, dynamics/pipeline.py)
    all2all_backend: str | None = None  # vLLM --all2all-backend: the DP + EP profile rows (accounting/vllm_all2all.py)
    enforce_eager: bool | None = None  # vLLM --enforce-eager: no CUDA graphs (memory plan and step cost's host term)
    wddm: bool | None = None  # Windows/WSL2 display driver: the whole board as the total, the driver's hold in use
    mxfp4_backend: str | None = None  # vLLM's MXFP4 experts' backend (accounting/vllm_mxfp4_backend.py); None: auto
    achievable_flops_fraction: float | None = None  # roofline: share of peak FLOP/s (None: the plan's default, 0.7)
    achievable_bandwidth_fraction: float | None = None  # roofline: share of peak HBM bandwidth (None: 0.8)
    allreduce_link_share: float | None = None  # TP all-reduces' share of their link (None: a profile's, else the rule)
    gpu_profile: str | None = None  # None/"auto": the GPU's bundled profile if any; "none"; or a GPU profile file
    gemm_efficiency: str | None = None  # roofline matmuls: flat or measured (gemm_efficiency.py); None: profile's
    inter_node_link: str | None = None  # --inter-node-link: a GPU's NIC, one direction, for TP over nodes (tp_network)
    enable_hierarchical_cache: bool | None = None  # SGLang HiCache: its prefill-graph rule (sglang_prefill_graphs.py)

    def __post_init__(self) -> None:  # a value of the wrong type refused here, named (argtypes.py)
        check_fields(self)


@dataclass
class SimSetup:
    """A ready-to-run simulation and where each input came from."""

    config: EngineConfig
    cost: Any
    workload: Any
    num_requests: int
    replicas: int
    router: str
    model_name: str
    gpu_name: str
    workload_info: dict[str, Any] = field(default_factory=dict)
    cost_info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    tp: int = 1
    plan: Any = None
    gpu_profile: Any = None  # the GpuProfile that priced the roofline (None: none), for the band (prediction_bands)
    client_latency: Any = None  # client_latency.ClientLatency added to each TTFT and E2E (None: none given)
    record_settings: dict[str, Any] = field(default_factory=dict)  # a measured run's own (calibration.api.engine_for)


_PLANS: dict[tuple, tuple[Any, int | None]] = {}  # (model, GPU, settings) → (plan, max_num_batched_tokens), per process
_PLAN_FIELDS = tuple(("model gpu engine_version tp max_model_len gpu_memory_utilization mem_fraction_static "
                      "kv_cache_dtype quantization max_num_batched_tokens max_num_seqs block_size cpu_overhead wddm "
                      "num_gpu_blocks_override max_total_tokens enable_prefix_caching disable_hybrid_kv_cache_manager "
                      "enforce_eager mamba_ssm_cache_dtype achievable_flops_fraction enable_expert_parallel "
                      "allreduce_link_share achievable_bandwidth_fraction gpu_profile gemm_efficiency mxfp4_backend "
                      "data_parallel_size inter_node_link enable_hierarchical_cache all2all_backend pp ep_size "
                      "enable_dp_attention moe_a2a_backend").split())


def plan_engine(a: SimRequestArgs) -> str:
    """The engine whose memory plan sizes the pool: SGLang's for policy "sglang", vLLM's for every other policy."""
    return "sglang" if a.policy == "sglang" else "vllm"


def load_plan(a: SimRequestArgs):
    """The memory plan for the user's model, GPU and flags (the KV pool the simulator serves from): SGLang's
    (``accounting/plan_other.py : sglang_plan``) for policy "sglang", vLLM's otherwise. Cached per (model, GPU,
    settings), a file's modification time in the key: a load or capacity search builds the plan once for its probes,
    and a configuration search once per candidate (its screening plans every candidate first: up to 128 kept)."""
    key = tuple(getattr(a, f) for f in _PLAN_FIELDS) + (plan_engine(a), file_mtime_ns(a.model), file_mtime_ns(a.gpu))
    hit = _PLANS.get(key)
    if hit is None:
        if len(_PLANS) >= 128:
            _PLANS.pop(next(iter(_PLANS)))
        hit = _PLANS[key] = _build_plan(a)
    return hit


def _build_plan(a: SimRequestArgs):
    from kvledger.accounting.dp_node import dp_hint
    from kvledger.accounting.plan import build_plan, roofline_model
    from kvledger.accounting.settings import make_settings
    from kvledger.accounting.vllm_auto_len import engine_token_flags
    from kvledger.accounting.vllm_ssm_dtype import check_ssm_dtype
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.dynamics.engine.kv_transfer import nic_bytes_per_s
    from kvledger.units import parse_duration_s

    engine = plan_engine(a)
    check_engine_flags(a, engine)
    gpu = resolve_gpu(a.gpu)
    model = load_model(a.model)
    quant = make_settings(quantization=a.quantization.lower() if a.quantization else None)  # as plan reads it (fp8)
    fractions = plan_fractions(a, gpu, roofline_model(model, quant))  # given, else the GPU profile's (plan_pricing)
    mml, auto, mnbt = engine_token_flags(a.max_model_len, a.max_num_batched_tokens, engine, a.engine_version)
    settings = make_settings(
        engine=engine, engine_version=a.engine_version, tp=a.tp, pp=a.pp,
        max_model_len=mml, auto_max_model_len=auto,
        gpu_memory_utilization=a.gpu_memory_utilization, mem_fraction_static=a.mem_fraction_static,
        kv_cache_dtype=a.kv_cache_dtype, quantization=quant.quantization,
        max_num_batched_tokens=mnbt, max_num_seqs=a.max_num_seqs, block_size=a.block_size,
        num_gpu_blocks_override=a.num_gpu_blocks_override, max_total_tokens=a.max_total_tokens,
        enable_prefix_caching=a.enable_prefix_caching, mamba_ssm_cache_dtype=check_ssm_dtype(a.mamba_ssm_cache_dtype),
        disable_hybrid_kv_cache_manager=bool(a.disable_hybrid_kv_cache_manager),
        cpu_overhead_s=parse_duration_s(a.cpu_overhead, what="--cpu-overhead") if a.cpu_overhead else 0.0,
        enforce_eager=bool(a.enforce_eager), wddm=bool(a.wddm), enable_expert_parallel=bool(a.enable_expert_parallel),
        mxfp4_backend=(a.mxfp4_backend or "auto").lower().replace("-", "_"), data_parallel_size=a.data_parallel_size,
        all2all_backend=a.all2all_backend, inter_node_link_bytes_per_s=nic_bytes_per_s(a.inter_node_link),
        ep_size=a.ep_size if engine == "sglang" and a.ep_size != 1 else None,
        enable_dp_attention=a.enable_dp_attention or None, moe_a2a_backend=a.moe_a2a_backend,
        enable_hierarchical_cache=True if a.enable_hierarchical_cache and engine == "sglang" else None,
        **{k: v for k, v in fractions.items() if v is not None})
    plan = build_plan(model, gpu, settings, with_advice=False)
    return replace(plan, dp_remedy=dp_hint(plan, build_plan)), mnbt  # MLA at TP > 1: DP attention's gain, one line


def _workload(a: SimRequestArgs, requests: list[RequestSpec] | None = None,
              label: str | None = None) -> tuple[Any, int, dict[str, Any]]:
    from kvledger.dynamics.workload.traces import load_trace, load_trace_columns, trace_has_arrivals

    specs = None
    if requests is not None:
        if not requests:
            raise InputError("the workload holds no request")
        specs, name = list(requests), label or "given requests"
    else:
        rate = a.rate
        if a.concurrency is not None and rate is None and not trace_has_arrivals(a.trace):
            rate = math.inf  # closed loop: arrival times are not used
        kw = dict(num_requests=a.num_requests, rate=rate, rate_scale=a.rate_scale, seed=a.seed)
        if a.concurrency is None and a.shared_prefix_tokens is None and a.document_pool is None:  # open: columns
            specs = load_trace_columns(a.trace, **kw)  # unless the trace has segments or clients
        specs = load_trace(a.trace, **kw) if specs is None else specs
        name = a.trace
    specs, shared = shared_prompts(a, specs, name, requests is not None)  # system prompt, documents
    span = specs[-1].arrival_s - specs[0].arrival_s if len(specs) > 1 else 0.0
    if isinstance(specs, WorkloadColumns):
        prompt_sum, output_sum = int(specs.num_prompt_tokens.sum()), int(specs.num_output_tokens.sum())
    else:
        prompt_sum, output_sum = sum(s.num_prompt_tokens for s in specs), sum(s.num_output_tokens for s in specs)
    info: dict[str, Any] = {"trace": name, "num_requests": len(specs), "prompt_tokens_mean": prompt_sum / len(specs),
                            "output_tokens_mean": output_sum / len(specs)}
    info.update(shared)
    if a.concurrency is not None:
        pace = paced(a)
        info.update(mode=PACED_MODE if pace else "closed loop", concurrency=a.concurrency, think_time_s=a.think_time_s)
        if pace:  # in arrival order, as a benchmark client sends
            specs = sorted(specs, key=lambda r: r.arrival_s)
            span = specs[-1].arrival_s - specs[0].arrival_s  # the offered rate below: over the sorted arrivals
            info.update(offered_rate_req_per_s=(len(specs) - 1) / span if span > 0 else math.inf,
                        requested_rate_req_per_s=a.rate)  # --rate (None: --rate-scale of a trace's own)
        return ClosedLoop(specs, a.concurrency, a.think_time_s, paced=pace), len(specs), info
    arrivals = arrivals_words(a) if requests is None else "the given requests' arrival times"
    info.update({"mode": f"open loop ({arrivals})",
                 "offered_rate_req_per_s": (len(specs) - 1) / span if span > 0 else math.inf})
    return specs, len(specs), info


def paced(a: SimRequestArgs) -> bool:
    """``--concurrency`` with a finite ``--rate`` or a ``--rate-scale``: a paced closed loop (``ClosedLoop.paced``)."""
    return a.concurrency is not None and (a.rate_scale is not None or (a.rate is not None and math.isfinite(a.rate)))


def prepare(a: SimRequestArgs, requests: list[RequestSpec] | None = None, label: str | None = None, *,
            workload: tuple[Any, int, dict[str, Any]] | None = None) -> SimSetup:
    """Build the plan, the engine settings, the step cost and the workload.

    ``requests`` (e.g. a synthetic workload) replaces the trace ``a.trace`` (``a.rate``, ``a.rate_scale`` and
    ``a.num_requests`` then do not apply), named ``label``; ``workload`` (a workload object the simulator takes, e.g.
    a ``SessionLoop``; its request count and description) replaces both.

    Raises:
        InputError / UnknownNameError / FormatError: bad names, flags or trace files, with the reason.
    """
    check_options("simulate", {"replicas": a.replicas})  # [1, 4,096]: kvledger.ranges
    plan, user_mnbt = load_plan(a)
    overrides: dict[str, Any] = dict(
        enable_prefix_caching=a.enable_prefix_caching, enable_chunked_prefill=a.enable_chunked_prefill,
        prefix_caching_policy=a.prefix_caching_policy, scheduling_policy=a.scheduling_policy,
        batching=a.batching, kv_allocation=a.kv_allocation, async_scheduling=a.async_scheduling)
    sched, notes = scheduler_overrides(a, plan, user_mnbt)  # the engine's own rules for these flags
    own = {k: v for k in ("max_num_batched_tokens", "max_num_seqs") if (v := sched.get(k)) is not None}
    if plan.memory.engine == "vllm" and any(v != getattr(plan.memory, k) for k, v in own.items()):
        plan = load_plan(replace(a, **own))[0]  # vLLM's profile_run profiles the limits it then runs
    overrides.update(sched)
    long_prefill, lp_notes = long_prefill_overrides(a, plan)  # vLLM's long-prefill flags, per release
    overrides.update(long_prefill)
    overrides.update((pp := pp_overrides(a, plan))[0])  # --pp: async scheduling as vLLM resolves it (sim_pp.py)
    interval, ri_notes = retention_interval_override(a, plan)  # vLLM's --prefix-cache-retention-interval
    notes += lp_notes + ri_notes
    config, plan_notes = engine_config_from_plan(plan, policy=a.policy, null_block_edge=True,
                                                 retention_interval=interval, **overrides)
    cost, cost_info = kept_step_cost(a, plan, config.async_scheduling, config.batching)  # a probe: the last's
    cost, cost_info = pipelined_cost(plan, config, cost, cost_info, pp[1], notes) if pp[0] else (cost, cost_info)
    cost = lockstep_with_note(plan, config, cost, notes) if a.data_parallel_size else cost  # DP ranks: sim_dp.py
    notes.extend(n for n in [all2all_note(plan), unused_nic_note(a.inter_node_link, cost)] if n)  # as plan says
    given = workload is not None
    if given:
        refuse_with_sessions(a)
    workload, n, info = workload if given else _workload(a, requests, label)
    if not given and requests is None:  # rows the reader left out (BurstGPT's failed ones); a reasoning model on it
        notes.extend(trace_notes(a.trace, plan.model, info["output_tokens_mean"]))
    if config.hybrid_caching and a.enable_prefix_caching is None and not given and not has_prefix_ids(workload):
        config = replace(config, enable_prefix_caching=False)
        notes.append("no prompt in this workload shares a prefix, so vLLM's hybrid prefix caching could not hit: "
                     "simulated with it off (faster; --enable-prefix-caching to keep it)")
    workload = sessions_for_affinity(a, workload, info, notes)
    notes[:0] = null_block_edge_notes(config, workload, plan)  # vLLM starts past the usable blocks: refused if hit
    check_profile_scope(cost_info, workload, config)  # a model-scope profile beyond its fitted range: warn, widen
    prof = gpu_profile_of(a, plan.gpu.name) if cost_info.get("scope") == "gpu" else None
    poor_profile_warning(prof, cost_info)  # a GPU profile that fits its own runs poorly: warn first
    client = client_latency_for(a, plan.gpu.name, notes)  # --client-latency, its note added
    return SimSetup(config, cost, workload, n, a.replicas, a.router, plan.model.name, plan.gpu.name, info, cost_info,
                    plan_notes + notes + ([plan.dp_remedy] if plan.dp_remedy else []), a.tp, plan, prof, client)
