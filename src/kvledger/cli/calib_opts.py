"""The engine flags ``kvledger calibrate`` and ``kvledger validate`` share (spelled once, in
:class:`kvledger.cli.flag_groups.EngineFlags`; help as these commands read them), and their translation into
SimRequestArgs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import typer

from kvledger.cli.flag_groups import EngineFlags, option_info

__all__ = ["engine_args", "Model", "Gpu", "EngineVersion", "Tp", "MaxModelLen", "GpuMemUtil", "KvCacheDtype",
           "BlockSize", "MaxNumBatchedTokens", "MaxNumSeqs", "NumGpuBlocksOverride", "StartupLog", "PrefixCaching",
           "ChunkedPrefill",
           "Batching", "MaxPaddings", "CpuOverhead", "AsyncScheduling", "EnforceEager", "FlopsFraction",
           "BandwidthFraction", "GpuProfile", "GemmEfficiency", "Wddm", "Policy", "MemFractionStatic",
           "CalibEngineFlags"]

Model = Annotated[str, typer.Option("--model", help="The served model: bundled HF id or alias, a config.json path or a "
                                                    "Hub id.")]
Gpu = Annotated[str | None, typer.Option("--gpu", help="The GPU the runs ran on: catalog name (see `kvledger gpus`) or "
                                         "a GPU file (default: the runs' records, as a Kubernetes Deployment's "
                                         "accelerator or meta.json's hardware names it; all must name the same GPU).")]
EngineVersion = Annotated[str | None, option_info(EngineFlags, "engine_version", help=(
    "vLLM version whose defaults and memory rules apply; with --policy sglang, the SGLang release's (0.4.0 on; "
    "default 0.5.23)."))]
Tp = Annotated[int | None, option_info(EngineFlags, "tp", help="Tensor-parallel degree (default: the run's record, "
                                                                "else 1).")]
ExpertParallel = Annotated[bool | None, option_info(EngineFlags, "enable_expert_parallel", help="vLLM "
    "--enable-expert-parallel (data parallel 1; default: the run's record): experts whole over the TP ranks.")]
MaxModelLen = Annotated[str | None, option_info(EngineFlags, "max_model_len")]
GpuMemUtil = Annotated[float | None, option_info(EngineFlags, "gpu_memory_utilization",
                                                 help="vLLM fraction of device memory.")]
KvCacheDtype = Annotated[str, option_info(EngineFlags, "kv_cache_dtype", help="auto, bfloat16, float16, "
                                                                               "fp8, fp8_e4m3, fp8_e5m2.",
                                                                               show_default=True)]
BlockSize = Annotated[int | None, option_info(EngineFlags, "block_size", help="Tokens per KV block (vLLM default "
                                                                               "16).")]
MaxNumBatchedTokens = Annotated[str | None, option_info(EngineFlags, "max_num_batched_tokens")]
MaxNumSeqs = Annotated[int | None, option_info(EngineFlags, "max_num_seqs", help="Most running requests.")]
NumGpuBlocksOverride = Annotated[int | None, option_info(EngineFlags, "num_gpu_blocks_override", help="Fix the KV "
    "block count to your server's: the 'GPU blocks' `kvledger doctor LOG --verbose` reads from its start-up log "
    "(vLLM V1 prints 'GPU KV cache size: N tokens', N ÷ the block size; V0 '# GPU blocks: N').")]
PrefixCaching = Annotated[bool | None, option_info(EngineFlags, "prefix_caching")]
ChunkedPrefill = Annotated[bool | None, option_info(EngineFlags, "chunked_prefill")]
Batching = Annotated[str | None, option_info(EngineFlags, "batching", help="continuous (vLLM v1, default), vllm_v0 "
                                                                            "(vLLM V0's prefill-first scheduler), "
                                                                            "static or sglang.")]
Policy = Annotated[str | None, option_info(EngineFlags, "policy", help=(
    "Preset, one of:\n\n"
    "vllm: vLLM's scheduler and hash prefix cache, FCFS (the default).\n\n"
    "sglang: SGLang's scheduler, radix cache and memory plan (the pool, page size, chunked_prefill_size and "
    "max_running_requests as SGLang sizes them); the default for a run whose file names SGLang (bench_serving's "
    "backend).\n\n"
    "static: static batching, a batch runs until its last request ends and none joins it; no prefix caching.\n\n"
    "contiguous: vLLM's scheduler with max_model_len worth of KV blocks reserved per request at admission "
    "(pre-paging engines); no prefix caching."))]
MemFractionStatic = Annotated[float | None, option_info(EngineFlags, "mem_fraction_static")]
MaxPaddings = Annotated[int | None, typer.Option("--max-paddings", help="vLLM 0.2.x only (with --batching vllm_v0): "
                                                                        "padded prompt batches with at most this many "
                                                                        "padding tokens (0.2.3's default: 256); a run "
                                                                        "whose own prompt steps padded more is "
                                                                        "replayed uncapped, as vLLM before 0.2.2 "
                                                                        "(with a note).",
                                                                            show_default=False)]
AsyncScheduling = Annotated[bool | None, option_info(EngineFlags, "async_scheduling", help="vLLM v1 async "
    "scheduling (the step k+1 is scheduled while step k runs; CPU work overlaps the GPU). Default: the engine "
    "version's (on from vLLM 0.14). calibrate then fits the CPU overhead as max(GPU, CPU) per step.")]
FlopsFraction = Annotated[float | None, option_info(EngineFlags, "achievable_flops_fraction")]  # simulate's help
BandwidthFraction = Annotated[float | None, option_info(EngineFlags, "achievable_bandwidth_fraction", help="Roofline: "
    "share of peak HBM bandwidth (default: the GPU profile's, else 0.8).")]
GpuProfile = Annotated[str | None, option_info(EngineFlags, "gpu_profile", help="GPU-scope calibration pricing the "
    "roofline: a FILE from `kvledger calibrate --scope gpu`, 'none', a bundled one by name (bundled:h100-sxm, "
    "opt-in), or (default) the GPU's default bundled one.")]
CpuOverhead = Annotated[str | None, option_info(EngineFlags, "cpu_overhead")]
GemmEfficiency = Annotated[str | None, option_info(EngineFlags, "gemm_efficiency")]
LinkShare = Annotated[float | None, option_info(EngineFlags, "allreduce_link_share")]
EnforceEager = Annotated[bool | None, option_info(EngineFlags, "enforce_eager", help="vLLM --enforce-eager (or a "
    "release before 0.2.4, which had no CUDA graphs): every step launched eagerly; the step cost adds the launch "
    "time (accounting/host_overhead.py).")]
Wddm = Annotated[bool | None, option_info(EngineFlags, "wddm", help="The run was on Windows or WSL2: the pool is "
    "planned as `kvledger plan --wddm` plans it (the whole board as the total, the display driver's hold in use).")]

StartupLog = Annotated[str | None, typer.Option("--startup-log", help="The measured server's vLLM start-up log: "
    "the replay's KV pool is its block count (printed, or from its 'GPU KV cache size' line, as `kvledger doctor` "
    "reads it), in place of the planned one; a block count in the run's record that disagrees is said, the log's "
    "used.")]


@dataclass(frozen=True, slots=True)
class CalibEngineFlags:
    """The engine flags after --gpu, --engine-version and --tp, as one group for ``flag_groups.with_groups`` (each
    field keeps its option above)."""

    max_model_len: MaxModelLen = None
    enable_expert_parallel: ExpertParallel = None
    gpu_memory_utilization: GpuMemUtil = None
    kv_cache_dtype: KvCacheDtype = 'auto'
    block_size: BlockSize = None
    max_num_batched_tokens: MaxNumBatchedTokens = None
    max_num_seqs: MaxNumSeqs = None
    num_gpu_blocks_override: NumGpuBlocksOverride = None
    startup_log: StartupLog = None
    prefix_caching: PrefixCaching = None
    chunked_prefill: ChunkedPrefill = None
    batching: Batching = None
    policy: Policy = None
    mem_fraction_static: MemFractionStatic = None
    max_paddings: MaxPaddings = None
    cpu_overhead: CpuOverhead = None
    async_scheduling: AsyncScheduling = None
    gpu_profile: GpuProfile = None
    enforce_eager: EnforceEager = None
    wddm: Wddm = None
    achievable_flops_fraction: FlopsFraction = None
    achievable_bandwidth_fraction: BandwidthFraction = None
    gemm_efficiency: GemmEfficiency = None
    allreduce_link_share: LinkShare = None


def engine_args(model: str | None, gpu: str | None, params: dict[str, Any], step_cost: str = "roofline"):
    """SimRequestArgs from a command's parsed parameters (no prefix caching unless asked: measured prompts carry no
    prefix ids)."""
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.cli.kv_dtype_flag import sim_kv_dtype_check

    sim_kv_dtype_check(params.get("kv_cache_dtype"), params.get("policy"), params.get("engine_version"))
    blocks, source, block_size = _startup_pool(params, model, gpu)
    return SimRequestArgs(
        model=model, gpu=gpu, engine_version=params.get("engine_version"), tp=params.get("tp"),
        max_model_len=params.get("max_model_len"), gpu_memory_utilization=params.get("gpu_memory_utilization"),
        mem_fraction_static=params.get("mem_fraction_static"), policy=params.get("policy"),
        kv_cache_dtype=params.get("kv_cache_dtype") or "auto", block_size=params.get("block_size"),
        max_num_batched_tokens=params.get("max_num_batched_tokens"), max_num_seqs=params.get("max_num_seqs"),
        num_gpu_blocks_override=blocks, kv_pool_source=source, kv_pool_block_size=block_size,
        enable_prefix_caching=params.get("prefix_caching"), enable_chunked_prefill=params.get("chunked_prefill"),
        batching=params.get("batching"), step_cost=step_cost, cpu_overhead=params.get("cpu_overhead"),
        async_scheduling=params.get("async_scheduling"), gpu_profile=params.get("gpu_profile"),
        enforce_eager=params.get("enforce_eager"), wddm=params.get("wddm"),
        enable_expert_parallel=params.get("enable_expert_parallel"),
        achievable_flops_fraction=params.get("achievable_flops_fraction"),
        achievable_bandwidth_fraction=params.get("achievable_bandwidth_fraction"),
        gemm_efficiency=params.get("gemm_efficiency"), client_latency=params.get("client_latency_spec"),
        allreduce_link_share=params.get("allreduce_link_share"))


def _startup_pool(params: dict[str, Any], model: str | None,
                  gpu: str | None) -> tuple[int | None, str | None, int | None]:
    """(the replay's --num-gpu-blocks-override, where it came from, tokens per block): --startup-log's block count,
    its words and its blocks' size (``calibration.startup_pool``), else the flag's (None, None, None without either).

    Raises:
        InputError: both given (one pool), or a log that states none (``read_startup_pool``).
    """
    path, flag = params.get("startup_log"), params.get("num_gpu_blocks_override")
    if path is None:
        return flag, None, None
    from kvledger.errors import InputError

    if flag is not None:
        raise InputError(f"--startup-log {path} and --num-gpu-blocks-override {flag} both set the KV pool: give one")
    from kvledger.calibration.startup_pool import read_startup_pool

    pool = read_startup_pool(path, model, gpu)
    return pool.num_gpu_blocks, pool.source, pool.block_size
