"""Whether a quantized checkpoint's TP shards line up with its quantization groups and blocks, as vLLM checks at load.

vLLM splits a column-parallel linear (q/k/v, gate/up, w1/w3, fc1, ...) by its output features and a row-parallel one
(o_proj, down_proj, w2, fc2, ...) by its input features (``layers/linear.py``); each quantization method checks the
rank's part against its packing when it creates the weights, and a failed check stops the load (the server does not
start). Read in vLLM 0.11.0, 0.12.0, 0.13.0, 0.19.0 and 0.33.0 (``model_executor/layers/quantization/``):

* AWQ (``awq.py``; 0.33 ``auto_awq.py``) and GPTQ (``gptq.py``; 0.33 ``auto_gptq.py``) ``create_weights``: the rank's
  input features must be a multiple of ``group_size`` ("The input size is not aligned with the quantized weight
  shape. This can be caused by too large tensor parallel size."); AWQ also packs 8 4-bit values per int32 along the
  output features, so the rank's output features must be a multiple of 8. Their Marlin kernels
  (``utils/marlin_utils.py::verify_marlin_supports_shape``) add output % 64 and input % 128, but a layer Marlin
  cannot take falls back to the plain AWQ kernel or another WNA16 kernel, so the group rule is the one that refuses.
  MoE experts on Marlin need the rank's intermediate size % max(64, group_size), else they fall back to
  ``moe_wna16.py``, which halves its group down to 32 until it divides; an intermediate size that 32 does not divide
  is refused there (``assert group_size >= 32``).
* Block FP8 (``weight_block_size`` [block_n, block_k]; ``utils/fp8_utils.py::validate_fp8_block_shape``): under TP
  the rank's input features of a row-parallel linear must be a multiple of block_k ("Weight input_size_per_partition =
  … is not divisible by weight quantization block_k"), and each output part of a column-parallel one a multiple of
  block_n; from 0.14 (absent in 0.11–0.13, present in 0.14–0.33) a merged column-parallel layer (qkv_proj,
  gate_up_proj) whose parts are not multiples of block_n skips the check (``linear.py``
  ``_maybe_allow_fp8_block_shape_mismatch``), so only unmerged column layers keep it. MoE experts
  (``fp8.py::Fp8MoEMethod.create_weights``; 0.33 ``validate_fp8_block_shape_moe``): the rank's intermediate size must
  be a multiple of block_n and, under TP, of block_k.
* Under ``--enable-expert-parallel`` routed experts are whole on each rank (no intermediate split), so only the
  dense layers are checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.weights import Weight
from kvledger.errors import InputError

__all__ = ["Misalignment", "tp_misalignment", "check_quant_tp", "working_tp_words", "MERGED_BLOCK_MISMATCH_FROM",
           "shard_features", "heads_divide"]

MERGED_BLOCK_MISMATCH_FROM = (0, 14, 0)
"""The first release read whose merged column-parallel layers skip the block_n check (0.13.0 still checks them)."""
_ROW = re.compile(r"(?:^|\.)(o_proj|down_proj|w2|out_proj|dense|fc2|c_proj|wo|dense_4h_to_h|o)(?:\.weight)?$")
_MERGED = re.compile(r"(?:^|\.)(q_proj|k_proj|v_proj|gate_proj|up_proj|w1|w3)(?:\.weight)?$")
_SRC = {"awq": "awq.py", "gptq": "gptq.py", "compressed-tensors": "marlin_utils.py verify_marlin_supports_shape"}
_AWQ_PACK = 8  # 32 // 4: AWQ packs eight 4-bit values per int32 along the output features
_NOT_ALIGNED = ("\"The input size is not aligned with the quantized weight shape. This can be caused by too large "
                "tensor parallel size.\"")
_AWQ_OUT = "awq.py: \"The output size is not aligned with the quantized weight shape\" (eight 4-bit values per int32)"
_WNA16_MOE = "moe_wna16.py: the group halves to no less than 32 and must divide the rank's intermediate size"
_FP8_MOE = "fp8.py Fp8MoEMethod: the expert intermediate size per rank is not divisible by weight quantization"
_FP8_LINEAR = "fp8_utils.py validate_fp8_block_shape: \"Weight"


@dataclass(frozen=True)
class Misalignment:
    """One layer vLLM refuses at this TP: its path, the size on one rank, the multiple it needs, and why (vLLM's
    words and file)."""

    path: str
    size: float
    full: int
    what: str
    multiple: int
    why: str


def shard_features(w: Weight, model: ModelSpec, tp: int, ep: int) -> tuple[float, float, bool]:
    """(output features, input features) of ``w`` on one rank, and whether it is row-parallel."""
    row = bool(_ROW.search(w.path))
    if w.tp == "replicate" or (w.expert and ep > 1):
        return float(w.rows), float(w.cols), row
    if w.tp == "kv":
        nkv = model.num_kv_heads or 1
        return w.rows * max(1, nkv // tp) / nkv, float(w.cols), row
    return (float(w.rows), w.cols / tp, True) if row else (w.rows / tp, float(w.cols), False)


def _group_rule(q: QuantScheme, w: Weight, out_p: float, in_p: float) -> Misalignment | None:
    g = q.group_size
    if w.expert:  # moe_wna16.py: group halves down to 32 until it divides the rank's intermediate size
        inter = in_p if _ROW.search(w.path) else out_p
        if g > 0 and inter % min(g, 32):
            full = w.cols if _ROW.search(w.path) else w.rows
            return Misalignment(w.path, inter, full, "intermediate features", min(g, 32), _WNA16_MOE)
        return None
    if g > 0 and g < w.cols and in_p % g:
        return Misalignment(w.path, in_p, w.cols, "input features", g, f"{_SRC[q.method]}: {_NOT_ALIGNED}")
    if q.method == "awq" and out_p % _AWQ_PACK:
        return Misalignment(w.path, out_p, w.rows, "output features", _AWQ_PACK, _AWQ_OUT)
    return None


def _block_rule(q: QuantScheme, w: Weight, out_p: float, in_p: float, row: bool, tp: int, ep: int,
                version: tuple[int, int, int]) -> Misalignment | None:
    bn, bk = q.block
    if w.expert:
        if ep > 1:
            return None
        inter = in_p if row else out_p
        for need, name in ((bn, "block_n"), (bk, "block_k") if tp > 1 else (0, "")):
            if need and inter % need:
                return Misalignment(w.path, inter, w.cols if row else w.rows, "intermediate features", need,
                                    f"{_FP8_MOE} {name}")
        return None
    if tp == 1 or w.tp == "replicate":
        return None
    if row and in_p % bk:
        return Misalignment(w.path, in_p, w.cols, "input features", bk, f"{_FP8_LINEAR} input_size_per_partition "
                            "is not divisible by weight quantization block_k\"")
    merged_skips = version >= MERGED_BLOCK_MISMATCH_FROM and _MERGED.search(w.path)
    if not row and out_p % bn and not merged_skips:
        return Misalignment(w.path, out_p, w.rows, "output features", bn, f"{_FP8_LINEAR} output_partition_size "
                            "is not divisible by weight quantization block_n\"")
    return None


def tp_misalignment(model: ModelSpec, q: QuantScheme, tp: int, ep: int = 1,
                    version: tuple[int, int, int] = (0, 33, 0)) -> Misalignment | None:
    """The first quantized layer whose TP shard vLLM ``version`` refuses for scheme ``q``; None when all line up."""
    group = q.method in ("awq", "gptq") or (q.method == "compressed-tensors" and q.scale_bytes is None)
    block = q.block is not None and q.method in ("fp8", "compressed-tensors")
    if tp == 1 and not block or not (group or block):
        return None
    for w in model.weights:
        if not q.converts(w):
            continue
        out_p, in_p, row = shard_features(w, model, tp, ep)
        bad = (_block_rule(q, w, out_p, in_p, row, tp, ep, version) if block
               else _group_rule(q, w, out_p, in_p) if tp > 1 else None)
        if bad:
            return bad
    return None


def heads_divide(model: ModelSpec, t: int) -> bool:
    nkv = model.num_kv_heads
    return model.num_attention_heads % t == 0 and (not nkv or (nkv % t == 0 if nkv >= t else t % nkv == 0))


def working_tp_words(model: ModelSpec, q: QuantScheme, tp: int, ep: int = 1,
                     version: tuple[int, int, int] = (0, 33, 0)) -> str:
    """``--tp T`` for the nearest TP (a power of two up to 2 × ``tp``, the largest below ``tp`` first) whose heads
    divide and whose shards pass this check (with expert parallelism, at EP = T); "" when none does."""
    ok = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= 2 * tp and t != tp and heads_divide(model, t)
          and tp_misalignment(model, q, t, ep if ep == 1 else t, version) is None]
    below = [t for t in ok if t < tp]
    return f"--tp {max(below)}" if below else (f"--tp {min(ok)}" if ok else "")


def _fixes(model: ModelSpec, q: QuantScheme, tp: int, ep: int, version: tuple[int, int, int]) -> str:
    """A TP (power of two up to 2 × ``tp``) that passes the heads and this check, and expert parallelism if it does."""
    words = working_tp_words(model, q, tp, ep, version)
    if ep == 1 and model.is_moe and tp_misalignment(model, q, tp, tp, version) is None:
        words += (" or " if words else "") + f"--enable-expert-parallel at --tp {tp} (experts whole on each rank)"
    return words or "no TP up to twice this one"


def check_quant_tp(model: ModelSpec, q: QuantScheme, tp: int, ep: int = 1,
                   version: tuple[int, int, int] = (0, 33, 0)) -> None:
    """Refuse a TP whose shards vLLM ``version`` cannot quantize (it does not start), naming the layer and a fix.

    Raises:
        InputError: a quantized layer's shard is not a multiple of its group or block.
    """
    bad = tp_misalignment(model, q, tp, ep, version)
    if bad is None:
        return
    vtxt = ".".join(map(str, version))
    raise InputError(f"--tp {tp}: vLLM {vtxt} does not start {model.name}: {bad.path.removesuffix('.weight')} has "
                     f"{bad.size:,.6g} {bad.what} per GPU ({bad.full:,}/{tp}), not a multiple of {bad.multiple} "
                     f"({q.method}; {bad.why}); a TP that works: {_fixes(model, q, tp, ep, version)}")
