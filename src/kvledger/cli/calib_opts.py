"""The engine flags ``kvledger calibrate`` and ``kvledger validate`` share (vLLM's names, as ``kvledger simulate``),
and their translation into SimRequestArgs."""

from __future__ import annotations

from typing import Annotated, Any

import typer

__all__ = ["engine_args", "Model", "Gpu", "EngineVersion", "Tp", "MaxModelLen", "GpuMemUtil", "KvCacheDtype",
           "BlockSize", "MaxNumBatchedTokens", "MaxNumSeqs", "NumGpuBlocksOverride", "PrefixCaching", "ChunkedPrefill",
           "Batching", "MaxPaddings", "CpuOverhead", "AsyncScheduling", "FlopsFraction", "BandwidthFraction",
               "GpuProfile"]

Model = Annotated[str, typer.Option("--model", help="The served model: bundled HF id or alias, a config.json path or a "
                                                    "Hub id.")]
Gpu = Annotated[str, typer.Option("--gpu", help="The GPU it ran on: catalog name (see `kvledger gpus`) or a GPU file.")]
EngineVersion = Annotated[str | None, typer.Option("--engine-version", help="vLLM version whose defaults and memory "
                                                                            "rules apply.", show_default=False)]
Tp = Annotated[int | None, typer.Option("--tp", "--tensor-parallel-size", help="Tensor-parallel degree (default: the "
                                                                               "run's record, else 1).",
                                                                                   show_default=False)]
MaxModelLen = Annotated[str | None, typer.Option("--max-model-len", help="Tokens (8192, 8K); default: from the config.",
                                                 show_default=False)]
GpuMemUtil = Annotated[float | None, typer.Option("--gpu-memory-utilization", help="vLLM fraction of device memory.",
                                                  show_default=False)]
KvCacheDtype = Annotated[str, typer.Option("--kv-cache-dtype", help="auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2.")]
BlockSize = Annotated[int | None, typer.Option("--block-size", help="Tokens per KV block (vLLM default 16).",
                                               show_default=False)]
MaxNumBatchedTokens = Annotated[str | None, typer.Option("--max-num-batched-tokens", help="Token budget per step.",
                                                         show_default=False)]
MaxNumSeqs = Annotated[int | None, typer.Option("--max-num-seqs", help="Most running requests.", show_default=False)]
NumGpuBlocksOverride = Annotated[int | None, typer.Option("--num-gpu-blocks-override", help="Fix the KV block count "
    "(e.g. the 'num_gpu_blocks' your engine logged).", show_default=False)]
PrefixCaching = Annotated[bool | None, typer.Option("--enable-prefix-caching/--no-enable-prefix-caching",
                                                    help="Automatic prefix caching (default on, as vLLM v1).",
                                                        show_default=False)]
ChunkedPrefill = Annotated[bool | None, typer.Option("--enable-chunked-prefill/--no-enable-chunked-prefill",
                                                     help="Chunked prefill (default on, as vLLM v1).",
                                                         show_default=False)]
Batching = Annotated[str | None, typer.Option("--batching", help="continuous (vLLM v1, default), vllm_v0 (vLLM V0's "
                                                                 "prefill-first scheduler) or static.",
                                                                     show_default=False)]
MaxPaddings = Annotated[int | None, typer.Option("--max-paddings", help="vLLM 0.2.x only (with --batching vllm_v0): "
                                                                        "padded prompt batches with at most this many "
                                                                        "padding tokens (0.2.3's default: 256).",
                                                                            show_default=False)]
AsyncScheduling = Annotated[bool | None, typer.Option("--async-scheduling/--no-async-scheduling", help="vLLM v1 async "
    "scheduling (the step k+1 is scheduled while step k runs; CPU work overlaps the GPU). Default: the engine "
    "version's (on from vLLM 0.33). calibrate then fits the CPU overhead as max(GPU, CPU) per step.",
        show_default=False)]
FlopsFraction = Annotated[float | None, typer.Option("--achievable-flops-fraction", help="Roofline: share of peak "
    "FLOP/s (default: the GPU profile's, else 0.7).", show_default=False)]
BandwidthFraction = Annotated[float | None, typer.Option("--achievable-bandwidth-fraction", help="Roofline: share of "
    "peak HBM bandwidth (default: the GPU profile's, else 0.8).", show_default=False)]
GpuProfile = Annotated[str | None, typer.Option("--gpu-profile", help="GPU-scope calibration pricing the roofline: a "
                                                                      "FILE from `kvledger calibrate --scope gpu`, "
                                                                      "'none', or (default) the GPU's bundled one.",
                                                                          show_default=False)]
CpuOverhead = Annotated[str | None, typer.Option("--cpu-overhead", help="Per-step CPU time added to the roofline (e.g. "
                                                                        "2ms).", show_default=False)]


def engine_args(model: str | None, gpu: str, params: dict[str, Any], step_cost: str = "roofline"):
    """SimRequestArgs from a command's parsed parameters (no prefix caching unless asked: measured prompts carry no
    prefix ids)."""
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    return SimRequestArgs(
        model=model, gpu=gpu, engine_version=params.get("engine_version"), tp=params.get("tp"),
        max_model_len=params.get("max_model_len"), gpu_memory_utilization=params.get("gpu_memory_utilization"),
        kv_cache_dtype=params.get("kv_cache_dtype") or "auto", block_size=params.get("block_size"),
        max_num_batched_tokens=params.get("max_num_batched_tokens"), max_num_seqs=params.get("max_num_seqs"),
        num_gpu_blocks_override=params.get("num_gpu_blocks_override"),
        enable_prefix_caching=params.get("prefix_caching"), enable_chunked_prefill=params.get("chunked_prefill"),
        batching=params.get("batching"), step_cost=step_cost, cpu_overhead=params.get("cpu_overhead"),
        async_scheduling=params.get("async_scheduling"), gpu_profile=params.get("gpu_profile"),
        achievable_flops_fraction=params.get("achievable_flops_fraction"),
        achievable_bandwidth_fraction=params.get("achievable_bandwidth_fraction"))
