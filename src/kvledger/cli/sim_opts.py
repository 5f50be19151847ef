"""The simulation flags ``kvledger cost --simulate`` and ``kvledger goodput --simulate`` share, and their translation into SimRequestArgs.

The flags keep ``kvledger simulate``'s names and meanings. Every one defaults to None here so a
command can tell "given" from "left at the default" (a simulation flag given without
``--simulate`` is an error); the engine's and ``kvledger simulate``'s defaults are filled in
by :func:`sim_request`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["SIM_FLAGS", "sim_request", "reject_sim_flags", "check_loop_flags", "Simulate", "MemFractionStatic"]

_S = "[--simulate] "
Simulate = Annotated[str | None, typer.Option("--simulate", help="Simulate this model (HF id, alias, config.json path or Hub id) on --gpu instead of reading a FILE.", show_default=False)]
Trace = Annotated[str | None, typer.Option("--trace", help=_S + "azure-conv (default), azure-code, mooncake, mooncake-synthetic, arxiv, or a CSV/JSONL path.", show_default=False)]
Rate = Annotated[float | None, typer.Option("--rate", help=_S + "target mean arrival rate, req/s (gaps rescaled, burstiness kept); 'inf' sends all at t=0.", show_default=False)]
RateScale = Annotated[float | None, typer.Option("--rate-scale", help=_S + "multiply the trace's own rate by this factor.", show_default=False)]
NumRequests = Annotated[int | None, typer.Option("--num-requests", help=_S + "replay only the first N requests (default: the whole trace; 2,000 per probe of a --target search or of cost's capacity search).", show_default=False)]
Seed = Annotated[int | None, typer.Option("--seed", help=_S + "RNG seed for synthetic or Poisson arrivals (default 0).", show_default=False)]
Concurrency = Annotated[int | None, typer.Option("--concurrency", help=_S + "closed loop: N users, each sends its next request when the last one ends.", show_default=False)]
ThinkTime = Annotated[float | None, typer.Option("--think-time", help=_S + "closed loop: seconds a user waits before its next request (default 0).", show_default=False)]
PromptLengths = Annotated[str | None, typer.Option("--prompt-lengths", help=_S + "synthetic workload instead of a trace: prompt lengths, e.g. fixed:512, uniform:1:512, exp:128:1536, lognormal:1000:0.8, trace:azure-conv:prompt (with --output-lengths, --rate, --num-requests).", show_default=False)]
OutputLengths = Annotated[str | None, typer.Option("--output-lengths", help=_S + "synthetic workload: output lengths (same forms as --prompt-lengths).", show_default=False)]
ArrivalCv = Annotated[float | None, typer.Option("--arrival-cv", help=_S + "synthetic workload: CV of inter-arrival gaps (default 1 = Poisson).", show_default=False)]
EngineVersion = Annotated[str | None, typer.Option("--engine-version", help=_S + "vLLM version whose defaults to apply.", show_default=False)]
Tp = Annotated[int | None, typer.Option("--tp", "--tensor-parallel-size", help=_S + "tensor-parallel degree (default 1); GPUs = replicas × TP.", show_default=False)]
MaxModelLen = Annotated[str | None, typer.Option("--max-model-len", help=_S + "tokens (8192, 8K); default: from the config.", show_default=False)]
GpuMemUtil = Annotated[float | None, typer.Option("--gpu-memory-utilization", help=_S + "vLLM fraction of device memory (not with --policy sglang).", show_default=False)]
MemFractionStatic = Annotated[float | None, typer.Option("--mem-fraction-static", help=_S + "with --policy sglang: SGLang's fraction (default computed as SGLang does).", show_default=False)]
KvCacheDtype = Annotated[str | None, typer.Option("--kv-cache-dtype", help=_S + "auto (default), bf16, fp16, fp8, fp8_e4m3, fp8_e5m2.", show_default=False)]
BlockSize = Annotated[int | None, typer.Option("--block-size", help=_S + "tokens per KV block (vLLM default 16); with --policy sglang, SGLang's page size (default 1).", show_default=False)]
MaxNumBatchedTokens = Annotated[str | None, typer.Option("--max-num-batched-tokens", help=_S + "token budget per step.", show_default=False)]
MaxNumSeqs = Annotated[int | None, typer.Option("--max-num-seqs", help=_S + "most running requests per replica.", show_default=False)]
NumGpuBlocksOverride = Annotated[int | None, typer.Option("--num-gpu-blocks-override", help=_S + "fix the KV block count.", show_default=False)]
PrefixCaching = Annotated[bool | None, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching", help=_S + "automatic prefix caching (default on, as vLLM v1).", show_default=False)]
ChunkedPrefill = Annotated[bool | None, typer.Option("--enable-chunked-prefill/--no-enable-chunked-prefill", help=_S + "chunked prefill (default on, as vLLM v1).", show_default=False)]
Policy = Annotated[str | None, typer.Option("--policy", help=_S + "preset: vllm, sglang (SGLang's scheduler, radix cache and memory plan), static, contiguous (see kvledger simulate --help).", show_default=False)]
PrefixCachingPolicy = Annotated[str | None, typer.Option("--prefix-caching-policy", help=_S + "vllm or sglang.", show_default=False)]
SchedulingPolicy = Annotated[str | None, typer.Option("--scheduling-policy", help=_S + "fcfs or lpm.", show_default=False)]
Batching = Annotated[str | None, typer.Option("--batching", help=_S + "continuous (vLLM v1, default), static, vllm_v0 (V0 prefill-first; with --no-enable-chunked-prefill --no-enable-prefix-caching) or sglang.", show_default=False)]
KvAllocation = Annotated[str | None, typer.Option("--kv-allocation", help=_S + "paged or contiguous.", show_default=False)]
AsyncScheduling = Annotated[bool | None, typer.Option("--async-scheduling/--no-async-scheduling", help=_S + "vLLM v1 async scheduling (default: as --engine-version does it; on in 0.33).", show_default=False)]
Replicas = Annotated[int | None, typer.Option("--replicas", help=_S + "identical engine replicas behind a router (default 1).", show_default=False)]
Router = Annotated[str | None, typer.Option("--router", help=_S + "round_robin (default), least_loaded or prefix_aware.", show_default=False)]
StepCost = Annotated[str | None, typer.Option("--step-cost", help=_S + "roofline (default; from the memory plan), calibrated (bundled measurements for this model/GPU/TP) or calibrated:SOURCE:MODEL@GPU/tpN (a bundled table by key), or PROFILE.json from kvledger calibrate.", show_default=False)]
CpuOverhead = Annotated[str | None, typer.Option("--cpu-overhead", help=_S + "per-step CPU time added to the roofline (e.g. 2ms).", show_default=False)]
FlopsFraction = Annotated[float | None, typer.Option("--achievable-flops-fraction", help=_S + "roofline: share of peak FLOP/s matmuls reach (default 0.7, an assumption).", show_default=False)]
BandwidthFraction = Annotated[float | None, typer.Option("--achievable-bandwidth-fraction", help=_S + "roofline: share of peak HBM bandwidth kernels reach (default 0.8, an assumption).", show_default=False)]

# command parameter name → (SimRequestArgs field or None for synthetic-only, default filled in, flag)
SIM_FLAGS: dict[str, tuple[str | None, Any, str]] = {
    "trace": ("trace", "azure-conv", "--trace"), "rate": ("rate", None, "--rate"),
    "rate_scale": ("rate_scale", None, "--rate-scale"), "num_requests": ("num_requests", None, "--num-requests"),
    "seed": ("seed", 0, "--seed"), "concurrency": ("concurrency", None, "--concurrency"),
    "think_time": ("think_time_s", 0.0, "--think-time"), "engine_version": ("engine_version", None, "--engine-version"),
    "tp": ("tp", 1, "--tp"), "max_model_len": ("max_model_len", None, "--max-model-len"),
    "gpu_memory_utilization": ("gpu_memory_utilization", None, "--gpu-memory-utilization"),
    "mem_fraction_static": ("mem_fraction_static", None, "--mem-fraction-static"),
    "kv_cache_dtype": ("kv_cache_dtype", "auto", "--kv-cache-dtype"), "block_size": ("block_size", None, "--block-size"),
    "max_num_batched_tokens": ("max_num_batched_tokens", None, "--max-num-batched-tokens"),
    "max_num_seqs": ("max_num_seqs", None, "--max-num-seqs"),
    "num_gpu_blocks_override": ("num_gpu_blocks_override", None, "--num-gpu-blocks-override"),
    "prefix_caching": ("enable_prefix_caching", None, "--enable-prefix-caching"),
    "chunked_prefill": ("enable_chunked_prefill", None, "--enable-chunked-prefill"),
    "policy": ("policy", None, "--policy"),
    "prefix_caching_policy": ("prefix_caching_policy", None, "--prefix-caching-policy"),
    "scheduling_policy": ("scheduling_policy", None, "--scheduling-policy"), "batching": ("batching", None, "--batching"),
    "kv_allocation": ("kv_allocation", None, "--kv-allocation"),
    "async_scheduling": ("async_scheduling", None, "--async-scheduling"), "replicas": ("replicas", 1, "--replicas"),
    "router": ("router", "round_robin", "--router"), "step_cost": ("step_cost", "roofline", "--step-cost"),
    "cpu_overhead": ("cpu_overhead", None, "--cpu-overhead"),
    "achievable_flops_fraction": ("achievable_flops_fraction", None, "--achievable-flops-fraction"),
    "achievable_bandwidth_fraction": ("achievable_bandwidth_fraction", None, "--achievable-bandwidth-fraction"),
    "prompt_lengths": (None, None, "--prompt-lengths"), "output_lengths": (None, None, "--output-lengths"),
    "arrival_cv": (None, None, "--arrival-cv"),
}


def check_loop_flags(rate: float | None, rate_scale: float | None, concurrency: int | None,
                     think_time: float | None) -> None:
    """Refuse arrival flags that the chosen loop would ignore: a closed loop (``--concurrency``) sends each user's next
    request when the last ends, so a rate means nothing there; a think time means nothing in an open loop.

    Raises:
        InputError: --rate or --rate-scale with --concurrency, or --think-time without it.
    """
    from kvledger.errors import InputError

    if concurrency is not None:
        given = [f for f, v in (("--rate", rate), ("--rate-scale", rate_scale)) if v is not None]
        if given:
            raise InputError(f"{' and '.join(given)} {'set' if len(given) > 1 else 'sets'} open-loop arrivals; with "
                             "--concurrency (a closed loop) each user "
                             "sends its next request when the last one ends, so it would be ignored: drop one of them")
    elif think_time is not None:
        raise InputError("--think-time is the pause of a closed-loop user; add --concurrency N, or drop it (an open loop "
                         "follows the trace's arrival times)")


def reject_sim_flags(params: dict[str, Any]) -> None:
    """Raise InputError naming the simulation flags given without ``--simulate``."""
    from kvledger.errors import InputError

    given = [flag for name, (_, _, flag) in SIM_FLAGS.items() if params.get(name) is not None]
    if given:
        raise InputError(f"{', '.join(given)} describe a simulation; add --simulate MODEL (with --gpu), or drop them to read FILE")


def sim_request(model: str, gpu: str | None, params: dict[str, Any], *, num_requests_default: int | None = None):
    """(SimRequestArgs, SyntheticSpec or None) from a command's parsed parameters (``typer.Context.params``).

    Raises:
        InputError: no --gpu, or half a synthetic workload, or --trace together with one.
    """
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.errors import InputError

    if gpu is None:
        raise InputError("--simulate needs --gpu (a catalog GPU such as H100, or a GPU file)")
    check_loop_flags(params.get("rate"), params.get("rate_scale"), params.get("concurrency"), params.get("think_time"))
    fields = {field: (params.get(name) if params.get(name) is not None else default)
              for name, (field, default, _) in SIM_FLAGS.items() if field is not None}
    if fields["num_requests"] is None:
        fields["num_requests"] = num_requests_default
    prompt, output, cv = params.get("prompt_lengths"), params.get("output_lengths"), params.get("arrival_cv")
    synthetic = None
    if prompt is not None or output is not None or cv is not None:
        if prompt is None or output is None:
            raise InputError("a synthetic workload needs both --prompt-lengths and --output-lengths")
        if params.get("trace") is not None:
            raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
        synthetic = SyntheticSpec(prompt, output, 1.0 if cv is None else cv)
    return SimRequestArgs(model=model, gpu=gpu, **fields), synthetic
