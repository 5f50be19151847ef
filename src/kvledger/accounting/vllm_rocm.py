"""vLLM on ROCm (AMD Instinct): the non-torch residual per GPU and the weights figure's upward range, from MI300X logs.

What the code says (read in 0.11.2, 0.14.1, 0.16.0, 0.20.0): ``platforms/rocm.py::get_current_memory_usage`` measures
"Model loading took" as device-wide used memory (``mem_get_info`` total − free, no ``empty_cache``), where CUDA counts
``max_memory_allocated``; so on ROCm the weights figure also holds the caching allocator's slack and whatever HIP
allocates while the model loads. The ROCm fused-MoE padding is code (``catalog/vllm_load_extras.py``). What the code
does not size is measured: the non-torch term below is the residual of MI300X start-ups published with
vllm-memory-estimator's validation set (``benchmarks/data/vme_startups.csv``, Apache-2.0), budget − printed available
KV − printed weights − the activation peak from the code-derived rules, per TP (vLLM 0.11.2–0.18.0), the budget being
0.92 × the device total HIP reports, 191.98 GiB (``gpu_cuda.csv``; read against rocm-smi's 191.69 GiB before, every
residual was 0.92 × 0.297 = 0.273 GiB lower):

  TP 1: 1.12 (Llama-3.3-70B bf16, 7 start-ups), 1.26–1.32 (its FP8-dynamic checkpoint, 6): point 1.22, 1.12–1.32 GiB;
  TP 4: 1.55 (Llama-3.3-70B), 1.57 (Qwen3-235B bf16), 1.74 (Qwen3-235B FP8): point 1.62, 1.55–1.74 GiB;
  TP 8: 3.31 (Qwen3-235B bf16), 3.47 (FP8), 3.39–3.62 and 5.14 (DeepSeek-R1 FP8, 7): point 3.47, 3.31–5.14 GiB.

Two start-ups of a development build (0.13.1.dev8) leave −2.0 and −2.3 GiB and are not used. RCCL buffers and HIP's
code objects loaded during the profile run are the likely content; the split is not known. Other AMD GPUs, other
versions, PP and TP sizes between the measured ones get the nearest measured figure with a wider range, and say so.
"""

from __future__ import annotations

import math

from kvledger.catalog.gpus import GpuSpec
from kvledger.units import GiB

__all__ = ["is_rocm", "rocm_non_torch_term", "ROCM_WEIGHTS_UP"]

ROCM_NON_TORCH_GIB = {1: (1.22, 1.12, 1.32), 4: (1.62, 1.55, 1.74), 8: (3.47, 3.31, 5.14)}
"""TP → (point, low, high) GiB of the MI300X non-torch residual (module docstring: data and spread)."""

ROCM_WEIGHTS_UP = 0.025
"""Upward range of the weights on ROCm, fraction: "Model loading took" above the stored tensors (padding included) on
MI300X, DeepSeek-R1 FP8 TP 8 +2.2%, Qwen3-235B bf16 TP 8 +1.1% / TP 4 +0.8%, Llama-3.3-70B +0.1–0.2%."""


def is_rocm(gpu: GpuSpec) -> bool:
    """An AMD GPU: vLLM runs its ROCm platform there."""
    return gpu.gpu_id.startswith("amd_")


def rocm_non_torch_term(ver: tuple[int, int, int], tp: int, pp: int,
                        gpu: GpuSpec) -> tuple[float, float, float, str, str]:
    """Non-torch memory per GPU under vLLM on ROCm: (point, low, high) B, how the point is built, why the range."""
    keys = sorted(ROCM_NON_TORCH_GIB)
    if tp in ROCM_NON_TORCH_GIB:
        pt, lo, hi = ROCM_NON_TORCH_GIB[tp]
        how = f"MI300X residual at TP {tp}"
    else:
        below = max([k for k in keys if k < tp], default=keys[0])
        above = min([k for k in keys if k > tp], default=keys[-1])
        f = 0.0 if above == below else (math.log2(tp) - math.log2(below)) / (math.log2(above) - math.log2(below))
        pt = ROCM_NON_TORCH_GIB[below][0] + f * (ROCM_NON_TORCH_GIB[above][0] - ROCM_NON_TORCH_GIB[below][0])
        lo, hi = ROCM_NON_TORCH_GIB[below][1], max(ROCM_NON_TORCH_GIB[above][2], ROCM_NON_TORCH_GIB[below][2])
        how = f"MI300X residual, TP {tp} between the measured TP {below} and {above} (log2)"
    measured = gpu.gpu_id == "amd_mi300x" and (0, 11, 0) <= ver < (0, 19, 0) and tp in ROCM_NON_TORCH_GIB and pp == 1
    why = "MI300X start-ups, vLLM 0.11.2–0.18.0 (vme_startups.csv)"
    if not measured:
        lo, hi = lo * 0.5, hi * 1.5
        why = (f"not measured for vLLM {'.'.join(map(str, ver))} on {gpu.name} at TP {tp} PP {pp}: the MI300X range "
               "widened ×0.5–×1.5")
    src = (f"{how}: {pt:.2f} GiB (budget − printed available KV − printed weights − code activation peak; "
           "vllm-memory-estimator's validation set)")
    return pt * GiB, lo * GiB, hi * GiB, src, why
