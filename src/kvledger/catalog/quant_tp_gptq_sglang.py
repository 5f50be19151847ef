"""GPTQ's TP shards as SGLang 0.5.23 serves GPTQ on NVIDIA GPUs: through Marlin, whose repack and GEMM kernels check
the shapes of each rank's part (a failed check stops the start-up: the load, or the first forward of the warm-up).

Read in SGLang 0.5.23:

* ``layers/quantization/gptq/gptq.py``: ``GPTQMarlinConfig.override_quantization_method`` serves a GPTQ checkpoint as
  ``gptq_marlin`` when ``is_gptq_marlin_compatible``: ``TYPE_MAP`` holds (4, sym) and (8, sym) only and
  ``marlin_utils.MARLIN_SUPPORTED_GROUP_SIZES`` is [-1, 32, 64, 128]. Any other GPTQ checkpoint falls to
  ``gptq/schemes/gptq_linear.py``, whose CUDA kernel is gone from 0.5.20 (``GPTQLinearScheme._init_kernel`` raises
  "The non-Marlin GPTQ CUDA kernel has been removed"; 0.5.17 still has it): SGLang does not start it at any TP.
  The Marlin method has the same shape (its shape check's result dropped) in 0.5.9's ``gptq.py``.
* ``gptq/schemes/gptq_marlin.py`` ``create_weights`` checks nothing (scales: input_size_per_partition // group_size
  rows; with ``desc_act`` a row-parallel layer keeps input_size // group_size, ``marlin_repeat_scales_on_all_ranks``),
  and ``hardware_backend/gpu/quantization/gptq_kernels.py`` drops the result of ``check_marlin_supports_shape``. The
  refusals come from the kernels: ``kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh`` at load, "size_k = … is not
  divisible by tile_k_size = 16" and "size_n = … is not divisible by tile_n_size = 64" (``marlin.cuh``: tile_size 16,
  tile_n_size 4 × 16), size_k the rank's input features and size_n its output features (a merged qkv_proj or
  gate_up_proj: the sum of its parts); ``gptq_marlin.cuh`` at the first forward, with more than one scale group,
  "size_k = …, is not divisible by num_groups = …". These hold at TP 1 too.
* MoE experts (``GPTQMarlinMoEMethod``, no fallback): ``gptq_marlin_moe_repack`` repacks w13 with size_n = 2 ×
  the intermediate size per rank, so that size must be a multiple of 32 (tile_n_size 64).
"""

from __future__ import annotations

import re

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.quant_tp import Misalignment, heads_divide, shard_features

__all__ = ["gptq_marlin_refusal", "gptq_marlin_misalignment", "gptq_marlin_working_tp"]

TILE_K = 16  # marlin.cuh tile_size
TILE_N = 64  # marlin.cuh tile_n_size = tile_k_size * 4
MARLIN_GROUPS = (0, 32, 64, 128)  # MARLIN_SUPPORTED_GROUP_SIZES [-1, 32, 64, 128]; kvledger writes -1 as 0
_MERGED = re.compile(r"(?:^|\.)(?:q_proj|k_proj|v_proj|gate_proj|up_proj)(?:\.weight)?$")
_REPACK = "kernels/jit/csrc/gemm/marlin/gptq_marlin_repack.cuh"
_GEMM = "kernels/jit/csrc/gemm/marlin/gptq_marlin.cuh"


def gptq_marlin_refusal(q: QuantScheme) -> str | None:
    """Why SGLang 0.5.23 does not serve this GPTQ checkpoint at all (not Marlin-compatible), else None."""
    if q.bits in (4, 8) and q.symmetric and q.group_size in MARLIN_GROUPS:
        return None
    sym = "symmetric" if q.symmetric else "asymmetric"
    group = "-1" if q.group_size == 0 else f"{q.group_size}"
    return (f"{q.bits:g}-bit {sym} GPTQ with group_size {group} is not Marlin-compatible (gptq/gptq.py "
            "is_gptq_marlin_compatible: 4- or 8-bit symmetric, group_size -1, 32, 64 or 128), and the plain GPTQ "
            "kernel it falls to raises \"The non-Marlin GPTQ CUDA kernel has been removed\" "
            "(gptq/schemes/gptq_linear.py)")


def _merged_key(path: str) -> str:
    """The fused layer a part belongs to (q/k/v → qkv_proj, gate/up → gate_up_proj); else the path itself."""
    m = _MERGED.search(path)
    if not m:
        return path
    fused = "qkv_proj" if m.group(0).lstrip(".").startswith(("q_", "k_", "v_")) else "gate_up_proj"
    return path[:m.start()] + "." + fused


def _groups_bad(q: QuantScheme, in_p: float, full_in: int, row: bool, tp: int) -> tuple[int, str] | None:
    """(num_groups, gptq_marlin.cuh's words) where the GEMM refuses the scale groups, else None."""
    g = q.group_size
    if g <= 0 or g >= full_in:
        return None
    n = full_in // g if (q.desc_act and row and tp > 1) else int(in_p // g)  # scales rows on this rank
    if n > 1 and in_p % n:
        return n, f"{_GEMM}: \"size_k = {in_p:.6g}, is not divisible by num_groups = {n}\""
    return None


def gptq_marlin_misalignment(model: ModelSpec, q: QuantScheme, tp: int) -> Misalignment | None:
    """The first GPTQ layer whose shard SGLang 0.5.23's Marlin kernels refuse at TP ``tp`` (module doc), else None."""
    sizes: dict[str, tuple[float, int]] = {}
    for w in model.weights:  # merged column-parallel layers: Marlin repacks the sum of their parts
        if q.converts(w) and not w.expert:
            out_p, _, _ = shard_features(w, model, tp, 1)
            had = sizes.get(_merged_key(w.path), (0.0, 0))
            sizes[_merged_key(w.path)] = (had[0] + out_p, had[1] + w.rows)
    for w in model.weights:
        if not q.converts(w):
            continue
        out_p, in_p, row = shard_features(w, model, tp, 1)
        if w.expert:
            inter = in_p if row else out_p
            if not row and (2 * inter) % TILE_N:
                return Misalignment(w.path, inter, w.rows, "intermediate features", TILE_N // 2,
                                    f"{_REPACK} (gptq_marlin_moe_repack of w13, size_n = 2 × it): \"size_n = "
                                    f"{2 * inter:.6g} is not divisible by tile_n_size = {TILE_N}\"")
            continue
        size_n, full_n = sizes[_merged_key(w.path)]
        if in_p % TILE_K:
            return Misalignment(w.path, in_p, w.cols, "input features", TILE_K,
                                f"{_REPACK}: \"size_k = {in_p:.6g} is not divisible by tile_k_size = {TILE_K}\"")
        if size_n % TILE_N:
            what = "output features" if size_n == out_p else "output features with its fused parts"
            return Misalignment(_merged_key(w.path), size_n, full_n, what, TILE_N,
                                f"{_REPACK}: \"size_n = {size_n:.6g} is not divisible by tile_n_size = {TILE_N}\"")
        bad = _groups_bad(q, in_p, w.cols, row, tp)
        if bad:
            return Misalignment(w.path, in_p, w.cols, "input features", bad[0], bad[1])
    return None


def gptq_marlin_working_tp(model: ModelSpec, q: QuantScheme, tp: int) -> str:
    """``--tp T`` for the nearest power of two up to 2 × ``tp`` (the largest below first) whose heads divide and whose
    shards Marlin takes; "" when none does."""
    ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= 2 * tp and t != tp and heads_divide(model, t)
          and gptq_marlin_misalignment(model, q, t) is None]
    below = [t for t in ok if t < tp]
    return f"--tp {max(below)}" if below else (f"--tp {min(ok)}" if ok else "")
