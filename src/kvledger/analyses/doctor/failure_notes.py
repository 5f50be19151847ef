"""The words of the start-up failure finding: for each kind of failure, what it means and what to change."""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["CAUSE", "FIX", "RULE", "SMALLER_PROFILE", "fix_words", "graph_capture_words", "utilization_that_fits"]

#: the remedy that shrinks vLLM's profile run, whose activation and sampler peak the two batch limits set
SMALLER_PROFILE = "lower --max-num-seqs / --max-num-batched-tokens (a smaller profile run)"

CAUSE = {
    "negative_kv_memory": "the profile run left no memory for the KV cache: weights, activation peak, non-torch memory "
                          "and CUDA graphs already exceed gpu_memory_utilization × the device total",
    "no_kv_memory": "no memory is left for the KV cache blocks after the weights and the profile run",
    "max_model_len_too_large": "one request of max_model_len needs more KV cache than the pool holds",
    "free_memory_below_request": "at start-up the GPU had less free memory than gpu_memory_utilization × the device "
                                 "total asks for: something else holds device memory (another process, the desktop's "
                                 "display, an earlier server that has not exited)",
    "cuda_oom": "a CUDA allocation failed (out of device memory) while loading or profiling the model",
    "not_divisible": "tensor_parallel_size does not divide a dimension the model splits across GPUs (attention heads, "
                     "KV heads, vocabulary or MLP width)",
    "dp_rank_out_of_bounds": "data_parallel_size × tensor_parallel_size × pipeline_parallel_size asks for more "
                             "GPUs than this node shows (CUDA_VISIBLE_DEVICES)",
    "nccl_error": "NCCL, the GPU-to-GPU communication library, failed while setting up the workers",
    "worker_init_failed": "a GPU worker process failed to start",
    "engine_core_init_failed": "the engine core failed to initialise (it wraps a worker's error)",
    "traceback": "a Python exception stopped the server",
}
FIX = {
    "negative_kv_memory": "raise --gpu-memory-utilization, spread the model over more GPUs (--tensor-parallel-size), "
                          f"{SMALLER_PROFILE}{{quant}}; `kvledger plan` shows each term for the new settings",
    "no_kv_memory": "raise --gpu-memory-utilization, more --tensor-parallel-size, lower "
                    "--max-num-batched-tokens{quant}; `kvledger plan` shows each term for the new settings",
    "max_model_len_too_large": "lower --max-model-len to what the pool holds, --kv-cache-dtype fp8, raise "
                               "--gpu-memory-utilization or add GPUs; `kvledger plan` gives the largest length that "
                               "fits",
    "free_memory_below_request": "free the GPU of other processes (nvidia-smi lists them), or lower "
                                 "--gpu-memory-utilization to what is free",
    "cuda_oom": "free the GPU of other processes (nvidia-smi), lower --gpu-memory-utilization if another process "
                "shares the device, else more --tensor-parallel-size{quant}",
    "not_divisible": "choose a --tensor-parallel-size that divides the model's heads and vocabulary",
    "dp_rank_out_of_bounds": "make data × tensor × pipeline parallel sizes at most the GPUs visible on this node, or "
                             "expose more GPUs (CUDA_VISIBLE_DEVICES, the container's --gpus)",
    "nccl_error": "check that every GPU is visible and healthy, give the container shared memory (--ipc=host or "
                  "--shm-size), and rerun with NCCL_DEBUG=INFO; NCCL_P2P_DISABLE=1 works around broken peer access",
    "worker_init_failed": "read the worker's exception (the root cause line) and change the setting it names",
    "engine_core_init_failed": "read the root cause line above it (a worker's exception) and change the setting it "
                               "names",
    "traceback": "read the exception (the root cause line) and change the setting it names",
}
RULE = ("a start-up failure is any of: 'Available KV cache memory' below zero, 'No available memory for the cache "
        "blocks', max_model_len larger than the KV cache, less free memory at start-up than gpu_memory_utilization "
        "asks, CUDA out of memory, a 'not divisible' assertion, a data-parallel rank out of bounds, an NCCL error, "
        "'WorkerProc failed to start', 'EngineCore failed to start' / 'Engine core initialization failed', or a "
        "traceback; the root cause is the first exception after the first traceback")


def _quant_clause(model: Any) -> str:
    """The weight-format remedy for this model: none for a checkpoint already at 4 bits or so (MXFP4, NVFP4, AWQ/GPTQ
    int4), a 4-bit one for an 8-bit checkpoint, a quantized one for a 16-bit model; hedged when the model is unknown."""
    if model is None:
        return ", or a quantized checkpoint (if it is not one already: pass --model to know)"
    q = model.quant
    if q.bits >= 16:
        return ", or a quantized checkpoint (FP8 halves the weights' bytes)"
    if q.bits > 4.5:
        return f", or a 4-bit checkpoint (this one is already {q.method}, {q.bits:g}-bit)"
    return ""  # already about 4 bits a weight: nothing smaller to offer


def utilization_that_fits(text: str) -> str:
    """For vLLM's "Free memory on device (F/T GiB) on startup is less than desired GPU memory utilization (U, R GiB)":
    the largest 2-decimal --gpu-memory-utilization whose request the free memory covers, with the arithmetic; "" when
    the line does not parse. The printed figures are rounded to 0.01 GiB, so F − 0.005 over T + 0.005 is the bound."""
    m = re.search(r"\(([\d.]+)/([\d.]+) GiB\) on startup is less than desired GPU memory utilization "
                  r"\(([\d.]+), ([\d.]+) GiB\)", text)
    if m is None:
        return ""
    free, total, asked = float(m.group(1)), float(m.group(2)), float(m.group(3))
    util = math.floor((free - 0.005) / (total + 0.005) * 100) / 100
    if util <= 0:
        return ""
    return (f": --gpu-memory-utilization {util:.2f} at most — {free:.2f} GiB free of {total:.2f} GiB at vLLM's "
            f"start-up snapshot ({free / total:.4f} of the device; vLLM asks total × utilization), {total - free:.2f} "
            f"GiB in use, its own CUDA context included; at {util:.2f} the KV cache gets {total * (asked - util):.2f} "
            f"GiB less than at {asked:g}")


def fix_words(kind: str, model: Any, in_profile: tuple[int, str] | None = None) -> str:
    """``FIX[kind]`` with its weight-format remedy fitted to ``model`` (a ModelSpec, or None when unknown); for a CUDA
    out-of-memory error in vLLM's profile run (``in_profile``: the line and function of its first frame there), the
    batch limits that size that run as well."""
    words = FIX[kind].replace("{quant}", _quant_clause(model))
    if kind != "cuda_oom" or in_profile is None:
        return words
    return (f"{words}; or {SMALLER_PROFILE}: the allocation failed in vLLM's profile run (line {in_profile[0]}: "
            f"{in_profile[1]}), a forward pass of --max-num-batched-tokens tokens over up to --max-num-seqs sequences "
            "and a sampler step for them, whose peak those two limits set")


def graph_capture_words(frame: tuple[int, str], sized: str, estimate: str) -> tuple[str, str]:
    """(cause, fix) for a CUDA out-of-memory error while capturing CUDA graphs (``frame``: the line and function of the
    capture frame), which vLLM does after sizing the KV cache (``sized``: where the log shows it; ``estimate``: the
    log's own CUDA graph memory estimate, or ""): the graphs did not fit in the memory the KV cache left."""
    cause = (f"a CUDA allocation failed while capturing CUDA graphs (line {frame[0]}: {frame[1]}), after {sized}: the "
             f"graphs' memory did not fit in what the KV cache left{estimate}")
    fix = ("lower --gpu-memory-utilization to leave room for the graphs (the KV cache then takes less), capture fewer "
           "or smaller graphs (--max-cudagraph-capture-size, or fewer cudagraph_capture_sizes in "
           "--compilation-config), or --enforce-eager (no CUDA graphs; slower decode)"
           + ("; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 takes the estimate out of the KV cache's memory"
              if "not taken out" in estimate else "") + "; free the GPU of other processes (nvidia-smi)")
    return cause, fix
