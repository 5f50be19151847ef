"""TensorRT-LLM's memory terms the config cannot give, and the low–high range of its KV plan.

What the code says (``_torch/pyexecutor/_util.py::KvCacheCreator``, 0.20 and 1.x; ``py_executor_creator.py``): the
PyTorch backend builds a first executor with a small KV pool (enough blocks for the dummy requests), warms it up
(CUDA graphs are captured here, and released only after the estimate), then resets torch's peak statistics and runs
dummy context requests of min(max_num_tokens, max_seq_len − 1) tokens each, max_num_tokens in all, one output token
each. peak = torch's allocated peak + (device used − torch allocated, after ``empty_cache``: "NCCL and CUDA graphs");
kv_mem = (total − peak + the small pool's bytes) × free_gpu_memory_fraction, so the temporary pool cancels out. Weights,
the forward over max_num_tokens and the CUDA context are modelled in ``plan_other.trtllm_plan``; what the logs show on
top of them (CUDA-graph pools captured before the estimate, sampler and workspace buffers, memory other processes hold
on a desktop GPU) is not in the config and is fitted below. The TensorRT-engine executor (before 1.0) takes the
fraction of the free memory after the engine and its runtime buffers load (``kvCacheManager.cpp``); the buffers are
sized by the engine's build (max batch size, max_num_tokens, decoder), which the config does not give either.

Ranges: available KV = (total − Σ terms) × fraction at each end (the device total's range, each term's low/high);
blocks, tokens and concurrency follow TensorRT-LLM's own pool rules (``engine_pools.trtllm_window_pools``) at each end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kvledger.accounting.engine_pools import trtllm_window_pools
from kvledger.accounting.memory import Deduction
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB

__all__ = ["TRTLLM_EXTRA_GIB", "trtllm_extra_term", "trtllm_ranges"]

TRTLLM_EXTRA_GIB = {"pytorch": (0.0, 1.94, 2.5), "tensorrt": (0.0, 3.74, 5.4)}
"""(low, point, high) GiB of the memory the logs show beyond the modelled terms (weights, forward peak, 0.13 GiB
non-torch), per runtime. Data: benchmarks/data/trtllm_public_startups.csv, residual = total − printed KV ÷ fraction
(PyTorch) or total − printed free memory (TensorRT engine) − the modelled terms.
PyTorch backend: TR01/TR02 (one set-up, SmolLM2-135M, RTX 4070 SUPER under WSL2, 1.2.1) 1.440 and 1.427 GiB, TR06
(Llama-3.1-8B FP8, H100, 0.20.0, trtllm-bench max_batch_size 4096) 2.449 GiB; point = mean of the two set-ups 1.94 GiB
(error −0.50 / +0.51 GiB); high 2.5 GiB = the largest residual rounded up to 0.1 GiB; low 0 = nothing beyond the
modelled terms. TensorRT engine: TR03 (Llama-3.1-8B FP8 engine, RTX 5090, max_batch_size 2048) 5.313 GiB, TR04
(Qwen1.5-7B, A100 40GB) 2.172 GiB; point = mean 3.74 GiB (error ±1.57 GiB), high 5.4 GiB (largest rounded up), low 0.
TR05 (engine of 6,695 MiB, H100) leaves 2.08 GiB besides the engine, inside. In-sample: two set-ups per runtime."""


def trtllm_extra_term(runtime: str) -> Deduction:
    """The fitted term beyond the modelled ones (``TRTLLM_EXTRA_GIB``) as a ledger deduction with its range."""
    lo, pt, hi = (g * GiB for g in TRTLLM_EXTRA_GIB[runtime])
    if runtime == "pytorch":
        name = "dry-run memory beyond the forward (CUDA-graph pools, sampler/workspace buffers, other processes)"
    else:
        name = "executor runtime buffers beyond the engine's activations (sized at engine build)"
    src = ("fit: mean residual of 2 public start-ups' printed KV memory (benchmarks/data/trtllm_public_startups.csv; "
           + ("TR01/TR02 1.43, TR06 2.45 GiB; error ±0.5 GiB)" if runtime == "pytorch" else
              "TR03 5.31, TR04 2.17 GiB; error ±1.57 GiB)"))
    why = (f"0 (nothing beyond the modelled terms) to {hi / GiB:.1f} GiB (the corpus's largest residual, rounded up)")
    return Deduction(name, pt, src, lo, hi, why)


def trtllm_ranges(model: ModelSpec, tp: int, elem_bytes: float, max_seq_len: int, tokens_per_block: int, runtime: str,
                  round_up: bool, fraction: float, total_low: float, total_high: float,
                  terms: Sequence[Deduction], given_available: float | None = None) -> dict[str, tuple[float, float]]:
    """Low/high of available KV (B), the full-attention pool's blocks and tokens, and concurrency at max_seq_len.

    ``terms``: the deductions taken before the fraction (not the reserve). Given the engine's printed KV memory, the
    range is its 2-decimal rounding (± 0.005 GiB)."""
    if given_available is not None:
        shown = round(given_available / GiB, 2)
        ends = [max(0.0, (shown - 0.005) * GiB), (shown + 0.005) * GiB]
    else:
        ends = []
        for total, pick in ((total_low, "high_bytes"), (total_high, "low_bytes")):
            free = total - sum(getattr(t, pick) for t in terms)
            ends.append(free * fraction if free > 0 else free)
    pools = [trtllm_window_pools(model, tp, elem_bytes, max_seq_len, a, tokens_per_block, runtime, round_up)[-1]
             for a in ends]
    per_req = math.ceil(max_seq_len / tokens_per_block)
    return {"available_kv_bytes": (float(ends[0]), float(ends[1])),
            "num_gpu_blocks": (pools[0].blocks, pools[1].blocks),
            "pool_tokens": (pools[0].max_tokens, pools[1].max_tokens),
            "max_concurrency": (pools[0].blocks / per_req, pools[1].blocks / per_req)}
