"""FP8 block-quantized weights (``weight_block_size`` [128, 128]: Qwen3-FP8, DeepSeek-V3/R1) on GPUs where vLLM runs
them through Marlin, a weight-only kernel: the 1-byte weights keep their size, but the scales do not.

``quantization/utils/marlin_utils_fp8.py`` (read in 0.19.0 and 0.33.0): ``prepare_fp8_layer_for_marlin`` casts the
checkpoint's block scales (``weight_scale_inv``: ⌈N/128⌉ × ⌈K/128⌉ fp32 per linear) to the layer's ``orig_dtype``
(the served dtype), transposes them and ``repeat_interleave``\\s them by ``block_n`` to ``K/128 × N`` — one 2-byte
scale per 128 inputs of every output row instead of one 4-byte scale per 128×128 block, 64× the bytes — and
``replace_parameter`` keeps that tensor (the fp32 one is freed before "Model loading took" is measured).
``prepare_moe_fp8_layer_for_marlin`` does the same to each expert's ``w13``/``w2`` scales
(``repeat_interleave(block_n, 2)``). Shapes that Marlin pads (``marlin_padded_nk``: N to 64 and K to 128, or N to 128
and K to 64) are multiples already in the bundled FP8 checkpoints; the padding is not added.

Where vLLM picks Marlin for block FP8:

* linears: below sm89 in every release read (0.19.0: ``init_fp8_linear_kernel`` finds no FP8 GEMM below sm89, so
  ``Fp8LinearMethod.use_marlin``); on sm89 from 0.26.0, whose ``_POSSIBLE_FP8_BLOCK_KERNELS`` (kernels/linear) reaches
  Marlin before Triton once DeepGEMM and CUTLASS block FP8 (sm90+) fail (read in 0.26.0, 0.33.0; 0.19.0 runs
  ``W8A8BlockFp8LinearOp`` on sm89 with the block scales as they are);
* routed experts: below sm89 (0.19.0 ``Fp8MoEMethod.use_marlin``; 0.33.0 ``fused_moe/oracle/fp8.py``: Triton's FP8
  fused MoE needs sm89, Marlin is next); on sm89 Triton keeps the block scales.

Not on ROCm (no Marlin there).
"""

from __future__ import annotations

import math

from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.weights import Weight

__all__ = ["MARLIN_DENSE_SM89_FROM", "fp8_marlin_applies", "tensor_bytes_as_loaded", "marlin_scales_text"]

MARLIN_DENSE_SM89_FROM = (0, 26, 0)
"""The first release read whose block-FP8 linears take Marlin on sm89 (``_POSSIBLE_FP8_BLOCK_KERNELS``)."""
_BELOW_SM89 = ("sm75", "sm80", "sm86")


def fp8_marlin_applies(q: QuantScheme, w: Weight, arch: str, engine_version: tuple[int, int, int],
                       rocm: bool = False) -> bool:
    """Whether vLLM ``engine_version`` on ``arch`` repacks ``w``'s FP8 block scales for Marlin (module docstring)."""
    if rocm or q.method != "fp8" or q.block is None or not q.converts(w):
        return False
    if arch in _BELOW_SM89:
        return True
    return arch == "sm89" and not w.expert and tuple(engine_version) >= MARLIN_DENSE_SM89_FROM


def tensor_bytes_as_loaded(q: QuantScheme, w: Weight, dtype_bytes: float, arch: str,
                           engine_version: tuple[int, int, int], rocm: bool = False) -> tuple[float, ...]:
    """``q.tensor_bytes(w, dtype_bytes)`` (values, scales, zero points, g_idx, B) with the scales as Marlin holds them
    where it runs the FP8 block weights: ``count × rows × ⌈cols / block_k⌉`` scales of ``dtype_bytes`` each."""
    parts = q.tensor_bytes(w, dtype_bytes)
    if not fp8_marlin_applies(q, w, arch, engine_version, rocm):
        return parts
    assert q.block is not None
    return (parts[0], w.count * w.rows * math.ceil(w.cols / q.block[1]) * dtype_bytes, *parts[2:])


def marlin_scales_text(q: QuantScheme, weights: list[Weight], target: tuple, dtype_name: str) -> str:
    """"; FP8 block scales repacked for Marlin …" where any of ``weights`` is, for ``target`` (GPU arch, vLLM version,
    ROCm or not); "" otherwise."""
    arch = target[0]
    if not any(fp8_marlin_applies(q, w, *target) for w in weights):
        return ""
    return f"; FP8 block scales repacked for Marlin on {arch} ({dtype_name}, one per 128 inputs of each output row)"
