"""The engine flags ``kvledger calibrate`` and ``kvledger validate`` share (the engine group's, as ``simulate``'s),
and their translation into SimRequestArgs."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

import typer

from kvledger.cli.flag_groups import EngineFlags, GroupUse, WorkloadFlags

__all__ = ["CALIB_ENGINE", "engine_args", "Model", "Gpu", "MaxPaddings"]

Model = Annotated[str, typer.Option("--model", help="The served model: bundled HF id or alias, a config.json path or a "
                                                    "Hub id.")]
Gpu = Annotated[str, typer.Option("--gpu", help="The GPU it ran on: catalog name (see `kvledger gpus`) or a GPU file.")]
MaxPaddings = Annotated[int | None, typer.Option("--max-paddings", show_default=False, help=(
    "vLLM 0.2.x only (with --batching vllm_v0): padded prompt batches with at most this many padding tokens (0.2.3's "
    "default: 256)."))]

#: a measured run is one vLLM replica: no SGLang policy, router or replicas; the step cost is the command's own flag.
CALIB_ENGINE = GroupUse(
    EngineFlags,
    only=("engine_version", "tp", "max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "block_size",
          "max_num_batched_tokens", "max_num_seqs", "num_gpu_blocks_override", "prefix_caching", "chunked_prefill",
          "batching", "cpu_overhead", "async_scheduling"),
    defaults={"tp": 1, "kv_cache_dtype": "auto"},
    help={"engine_version": "vLLM version whose defaults and memory rules apply.",
          "tp": "Tensor-parallel degree.",
          "gpu_memory_utilization": "vLLM fraction of device memory.",
          "kv_cache_dtype": "auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2.",
          "block_size": "Tokens per KV block (vLLM default 16).",
          "max_num_seqs": "Most running requests.",
          "num_gpu_blocks_override": "Fix the KV block count (e.g. the 'num_gpu_blocks' your engine logged).",
          "batching": "continuous (vLLM v1, default), vllm_v0 (vLLM V0's prefill-first scheduler) or static.",
          "async_scheduling": "vLLM v1 async scheduling (the step k+1 is scheduled while step k runs; CPU work "
                              "overlaps the GPU). Default: the engine version's (on from vLLM 0.33). calibrate then "
                              "fits the CPU overhead as max(GPU, CPU) per step."})


def engine_args(model: str, gpu: str, engine: EngineFlags, step_cost: str = "roofline") -> Any:
    """SimRequestArgs for replaying a measured run (no prefix caching unless asked: measured prompts carry no prefix
    ids), through the same :func:`kvledger.cli.sim_opts.sim_request` as ``kvledger simulate``."""
    from kvledger.cli.sim_opts import sim_request

    args, _ = sim_request(model, gpu, WorkloadFlags(), dataclasses.replace(engine, step_cost=step_cost))
    return args
