"""Weight quantization from ``quantization_config``: bytes per parameter, scales and zero points as vLLM allocates them.

Per Linear weight of ``rows × cols`` (rows = output features, cols = input features), the tensors
vLLM's quantization methods create (``create_weights`` in ``vllm/model_executor/layers/quantization/``):

* fp8 (``quant_method: fp8``, and online ``--quantization fp8``): 1 B/param; fp32 scales: one per
  128×128 block with ``weight_block_size`` (``create_fp8_scale_parameter``), else one per tensor.
* compressed-tensors, by ``config_groups.*.weights``: 8-bit float or int weights with fp32 scales per
  tensor, per output channel (``strategy: channel``: ``rows`` scales — the "FP8-dynamic" format) or per
  block; 4/8-bit int weights without activation quantization (W4A16/W8A16, ``wNa16``) packed in int32 with
  scales in the model dtype per group of ``group_size`` inputs (channel: one group per row), int32-packed
  zero points when asymmetric and an int32 ``g_idx`` per input with group activation ordering; 4-bit float
  weights (NVFP4, group 16, fp8 scales; MXFP4, group 32, uint8 E8M0 scales).
* mxfp4 (gpt-oss): 4-bit E2M1 values + one E8M0 byte per 32 values (OCP Microscaling spec v1.0 §5).
* gptq (served as gptq_marlin / Machete): packed ``bits``-bit weights, model-dtype scales and packed
  ``bits``-bit zero points per group, and an int32 ``g_idx`` per input (``gptq_marlin.py::create_weights``).
* awq (awq_marlin): packed weights, model-dtype scales and packed zero points per group.
* bitsandbytes: 8-bit (1 B/param + an fp32 scale per row) or 4-bit NF4 (0.5 B/param + an fp32 absmax per 64).

Embeddings, ``lm_head`` (unless listed as quantized), norms, biases and router gates stay in the model
dtype, as vLLM loads them.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field, replace

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.quant_kv import kv_cache_quant
from kvledger.catalog.weights import Weight

__all__ = ["QuantScheme", "parse_quant"]


@dataclass(frozen=True)
class QuantScheme:
    """How linear weights are stored.

    Attributes:
        method: "none", "fp8", "mxfp4", "nvfp4", "awq", "gptq", "compressed-tensors" or "bitsandbytes".
        bits: bits per quantized weight value (16 for none).
        group_size: input features sharing one scale: -1 one scale per tensor, 0 one per output channel
            (a group spanning all inputs), k > 0 one per k inputs of each output row.
        block: (rows, cols) of a scale block (FP8 block quantization), or None.
        scale_bytes: bytes of one scale; None = the model dtype (GPTQ/AWQ/W4A16 scales).
        zero_bits: bits of one zero point per scale group (asymmetric int formats), 0 if none.
        g_idx: an int32 group index per input feature (GPTQ, activation ordering).
        not_convert: module-path patterns left in the model dtype (``modules_to_not_convert`` / ``ignore``).
        description: one line for the ledger.
        kv_algo: the KV-cache scheme the checkpoint declares ("fp8", "nvfp4", …; "" none), kv_algo_from where
            ("modelopt": vLLM's auto KV dtype reads it; "compressed-tensors": its scales only) (quant_kv.py).
        symmetric: GPTQ's ``sym`` (False: asymmetric zero points). config_method: the config's ``quant_method``.
        desc_act: GPTQ's ``desc_act`` (activation order: Marlin keeps a row-parallel layer's scales whole per rank).
    """

    method: str = "none"
    bits: float = 16
    group_size: int = -1
    block: tuple[int, int] | None = None
    not_convert: tuple[str, ...] = ()
    description: str = "unquantized: every weight in the model dtype"
    _regex: re.Pattern | None = field(default=None, compare=False, repr=False)
    scale_bytes: float | None = 4
    zero_bits: float = 0
    g_idx: bool = False
    kv_algo: str = ""
    kv_algo_from: str = ""
    symmetric: bool = True
    config_method: str = ""
    desc_act: bool = False

    def converts(self, w: Weight) -> bool:
        """True when ``w`` is stored quantized under this scheme."""
        if self.method == "none" or not w.linear:
            return False
        return self._regex is None or not self._regex.match(w.path)

    def bytes_of(self, w: Weight, dtype_bytes: float) -> float:
        """Stored bytes of ``w`` (values plus scales, zero points and group indices), B."""
        return sum(self.tensor_bytes(w, dtype_bytes))

    def tensor_bytes(self, w: Weight, dtype_bytes: float) -> tuple[float, float, float, float]:
        """Bytes of the separate tensors vLLM allocates for ``w``: (values, scales, zero points, g_idx), B."""
        if not self.converts(w):
            return (w.numel * dtype_bytes, 0.0, 0.0, 0.0)
        rows, cols, n = w.rows, w.cols, w.count
        values = w.numel * self.bits / 8
        sb = dtype_bytes if self.scale_bytes is None else self.scale_bytes
        if self.block:
            groups = n * math.ceil(rows / self.block[0]) * math.ceil(cols / self.block[1])
        elif self.group_size == -1:
            groups = n
        elif self.group_size == 0:
            groups = n * rows
        else:
            groups = n * rows * math.ceil(cols / self.group_size)
        g_idx = n * cols * 4 if self.g_idx else 0
        return (values, groups * sb, groups * self.zero_bits / 8, g_idx)


def _compile(patterns: list[str]) -> re.Pattern | None:
    if not patterns:
        return None
    parts = []
    for p in patterns:
        if p.startswith("re:"):
            parts.append(p[3:])
        else:
            body = fnmatch.translate(p).removesuffix(r"\Z").removeprefix("(?s:").removesuffix(")")
            parts.append(rf"(?:{body})(?:\..*)?")
    return re.compile("^(?:" + "|".join(parts) + ")$")


def parse_quant(c: Cfg) -> QuantScheme:
    """Read ``quantization_config`` (or compressed-tensors' ``compression_config``); absent → unquantized.

    Raises:
        ConfigError: an unsupported ``quant_method`` or bit width, naming the field.
    """
    key = (
        "quantization_config"
        if c.has("quantization_config")
        else ("compression_config" if c.has("compression_config") else None)
    )
    if key is None:
        return QuantScheme()
    q = Cfg(c.dict(key), c.source, c.prefix + key + ".")
    method = q.str("quant_method", "compressed-tensors" if key == "compression_config" else None)
    if method is None:
        raise q.error("quant_method", "is missing; cannot tell the weight format")
    method = method.lower().replace("compressed_tensors", "compressed-tensors")
    algo, where = kv_cache_quant(q, method)
    return replace(_weights(q, method), kv_algo=algo, kv_algo_from=where, config_method=method)


def _weights(q: Cfg, method: str) -> QuantScheme:
    """The weight scheme of ``quant_method`` ``method`` from its config ``q``."""
    skip = [p for p in (q.list("modules_to_not_convert", []) or []) + (q.list("ignore", []) or []) if isinstance(p,
        str)]
    try:
        rx = _compile(skip)
    except re.error as err:
        raise q.error("ignore", f"a module pattern is not a valid regular expression ({err.msg})") from None
    note = f" ({len(skip)} module patterns left unconverted)" if skip else ""
    if method == "fp8":
        return _fp8(q, skip, rx, note)
    if method == "mxfp4":
        return QuantScheme("mxfp4", 4, 32, None, tuple(skip), f"mxfp4: 4-bit values + 8-bit scale per 32 = 4.25 "
                                                              f"bit/weight{note}", rx, 1)
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return _awq_gptq(q, method.removesuffix("_marlin"), skip, rx, note)
    if method == "compressed-tensors":
        return _compressed_tensors(q, skip, rx)
    if method in ("modelopt", "modelopt_fp4"):
        return _modelopt(q)
    if method == "fbgemm_fp8":  # FBGEMM FP8: 1 B/weight + an fp32 scale per output channel (fbgemm_fp8.py)
        return QuantScheme("fp8", 8, 0, None, tuple(skip), f"fbgemm_fp8: 1 B/weight + fp32 scale per output "
                                                           f"channel{note}", rx)
    if method == "bitsandbytes":
        if q.get("load_in_4bit", False) is True:
            return QuantScheme("bitsandbytes", 4, 64, None, tuple(skip), f"bitsandbytes 4-bit NF4 + fp32 absmax per "
                                                                         f"64{note}", rx, 4)
        return QuantScheme("bitsandbytes", 8, 0, None, tuple(skip), f"bitsandbytes 8-bit + fp32 scale per row{note}",
                           rx, 4)
    raise q.error("quant_method", f"unsupported weight quantization {method!r:.60}; supported: fp8, mxfp4, awq, gptq, "
                                  f"compressed-tensors, modelopt, fbgemm_fp8, bitsandbytes")


def _fp8(q: Cfg, skip: list[str], rx: re.Pattern | None, note: str) -> QuantScheme:
    """FP8 weights: 1 B each and an fp32 scale per tensor or per ``weight_block_size`` block."""
    blk = q.list("weight_block_size", None)
    if blk is not None and (len(blk) != 2 or not all(isinstance(x, int) and not isinstance(x,
        bool) and 0 < x <= 1 << 20 for x in blk)):
        raise q.error("weight_block_size", f"must be two positive integers [rows, cols], got {blk!r:.60}")
    block = (blk[0], blk[1]) if blk else None
    per = "{}×{} block".format(*block) if block else "tensor"
    desc = f"fp8 {q.str('fmt', 'e4m3')}: 1 B/weight + fp32 scale per {per}{note}"
    return QuantScheme("fp8", 8, -1, block, tuple(skip), desc, rx)


def _awq_gptq(q: Cfg, method: str, skip: list[str], rx: re.Pattern | None, note: str) -> QuantScheme:
    """AWQ or GPTQ (``method``): 2–8-bit weights, a model-dtype scale and a zero point per group (GPTQ: g_idx)."""
    bits = q.int("bits", None, maximum=8) or q.int("w_bit", maximum=8)
    gs = q.int("group_size", None, minimum=-1, maximum=1 << 20) if q.has("group_size") else q.int("q_group_size",
        128, minimum=-1, maximum=1 << 20)
    if bits not in (2, 3, 4, 8):
        raise q.error("bits", f"{bits}-bit {method} is not a supported width (2, 3, 4, 8)")
    if method == "awq" and bits != 4:  # awq.py (0.11–0.19) and auto_awq.py (0.33): TYPE_MAP {4: uint4} only
        raise q.error("bits", f"{bits}-bit AWQ: vLLM refuses it at start-up (\"Currently, only 4-bit weight "
                              f"quantization is supported for AWQ, but got {bits} bits.\"; awq.py, read in 0.11.0 to "
                              f"0.33.0)")
    gs = 0 if gs == -1 else gs  # group_size -1: one group spanning the row
    if gs == 0:
        gs_text = "per output channel"
    else:
        gs_text = f"per {gs} inputs"
    g_idx = ", int32 g_idx" if method == "gptq" else ""
    desc = f"{method}: {bits}-bit weights, model-dtype scale + {bits}-bit zero {gs_text}{g_idx}{note}"
    return QuantScheme(method, bits, gs, None, tuple(skip), desc, rx, None, bits, method == "gptq",
                       symmetric=q.get("sym", True) is not False, desc_act=q.get("desc_act", False) is True)


def _modelopt(q: Cfg) -> QuantScheme:
    """NVIDIA ModelOpt checkpoints (vLLM ``quantization/modelopt.py``): FP8 per tensor or per channel, NVFP4 (4-bit E2M1
    values, an FP8 scale per 16 inputs and fp32 global scales)."""
    inner = q.dict("quantization", None)
    src = Cfg(inner, q.source, q.prefix + "quantization.") if inner is not None else q
    algo = src.str("quant_algo")
    excl = [p for p in (src.list("exclude_modules", []) or []) + (q.list("ignore", []) or []) if isinstance(p, str)]
    try:
        rx = _compile(excl)
    except re.error as err:
        raise src.error("exclude_modules", f"a module pattern is not a valid regular expression ({err.msg})") from None
    note = _n(excl)
    a = algo.upper()
    if a == "FP8":
        return QuantScheme("fp8", 8, -1, None, tuple(excl), f"modelopt FP8: 1 B/weight + fp32 scale per tensor{note}",
                           rx)
    if a == "FP8_PER_CHANNEL_PER_TOKEN":
        return QuantScheme("fp8", 8, 0, None, tuple(excl), f"modelopt FP8: 1 B/weight + fp32 scale per output "
                                                           f"channel{note}", rx)
    if a == "NVFP4":
        gs = src.int("group_size", 16, maximum=1 << 20)
        return QuantScheme("nvfp4", 4, gs, None, tuple(excl), f"modelopt NVFP4: 4-bit E2M1 + FP8 scale per {gs} "
                                                              f"inputs{note}", rx, 1)
    raise src.error("quant_algo",
                    f"unsupported ModelOpt algorithm {algo!r:.40} (FP8, FP8_PER_CHANNEL_PER_TOKEN, NVFP4)")


def online_fp8() -> QuantScheme:
    """vLLM's ``--quantization fp8`` on an unquantized checkpoint: every Linear cast to FP8 with one fp32 scale per
    tensor.

    Source: ``vllm/model_executor/layers/quantization/fp8.py`` (``Fp8LinearMethod`` for a checkpoint that is not
    FP8-serialized: weights loaded in the model dtype, then quantized per tensor in ``process_weights_after_loading``).
    """
    return QuantScheme("fp8", 8, -1, None, (), "fp8 (online --quantization fp8): 1 B/weight + fp32 scale per tensor")


def _compressed_tensors(q: Cfg, skip: list[str], rx: re.Pattern | None) -> QuantScheme:
    groups = q.dict("config_groups", {})
    if not groups:
        raise q.error("config_groups", "is missing or empty; cannot tell the weight format")
    name, grp = next(iter(groups.items()))
    where = f"config_groups.{name}"
    if not isinstance(grp, dict) or not isinstance(grp.get("weights"), dict):
        raise q.error(f"{where}.weights", "is missing; cannot tell the weight format")
    wc = Cfg(grp["weights"], q.source, q.prefix + where + ".weights.")
    bits = wc.int("num_bits", maximum=16)
    wtype = wc.str("type", "int")
    strategy = wc.str("strategy", "tensor")
    acts = grp.get("input_activations")
    sym = wc.get("symmetric", True) is not False
    fmt = f"compressed-tensors {strategy} {'float' if wtype == 'float' else 'int'}{bits}"
    if wtype == "float" and bits == 4:  # NVFP4 (group 16, fp8 scales) or MXFP4 (group 32, E8M0 scales)
        gs = wc.int("group_size", 16, maximum=1 << 20)
        desc = f"{fmt}: 4-bit E2M1 + 1-B scale per {gs} ({'NVFP4' if gs == 16 else 'MXFP4'}){_n(skip)}"
        return QuantScheme("compressed-tensors", 4, gs, None, tuple(skip), desc, rx, 1)
    if bits not in (4, 8):
        raise q.error(f"{where}.weights.num_bits", f"unsupported width {bits} (4 or 8)")
    if strategy not in ("tensor", "channel", "group", "block", "tensor_group"):
        raise q.error(f"{where}.weights.strategy", f"unsupported strategy {strategy!r:.40} (tensor, channel, group, "
                                                   f"block)")
    block = None
    if strategy == "block":
        bs = wc.list("block_structure", [128, 128])
        if len(bs) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x <= 1 << 20 for x in bs):
            raise q.error(f"{where}.weights.block_structure", f"must be two positive integers, got {bs!r:.60}")
        block = (bs[0], bs[1])
    gs = {"tensor": -1, "channel": 0}.get(strategy)
    if gs is None and block is None:
        gs = wc.int("group_size", 128, maximum=1 << 20)
    w8a8 = wtype == "float" or isinstance(acts, dict)  # W8A8 (int or fp8) and W8A16-fp8 keep fp32 scales
    if w8a8:
        weight_bytes = bits // 8 if bits == 8 else 0.5
        desc = f"{fmt}: {weight_bytes:g} B/weight + fp32 scale per {_per(strategy, gs, block)}{_n(skip)}"
        return QuantScheme("compressed-tensors", bits, gs if gs is not None else -1, block, tuple(skip), desc, rx, 4)
    # wNa16 (W4A16/W8A16 int): int32-packed values, model-dtype scales, packed zero points when asymmetric
    actorder = wc.get("actorder", None)
    g_idx = actorder == "group" or actorder is True
    desc = (f"{fmt} (W{bits}A16): packed {bits}-bit weights + model-dtype scale per {_per(strategy, gs, block)}"
            f"{'' if sym else f' + {bits}-bit zero'}{' + int32 g_idx' if g_idx else ''}{_n(skip)}")
    return QuantScheme("compressed-tensors", bits, gs if gs is not None else -1, block, tuple(skip), desc, rx, None,
                       0 if sym else bits, g_idx)


def _per(strategy: str, gs: int | None, block: tuple[int, int] | None) -> str:
    if block:
        return f"{block[0]}×{block[1]} block"
    return {"tensor": "tensor", "channel": "output channel"}.get(strategy, f"group of {gs} inputs")


def _n(skip: list[str]) -> str:
    return f" ({len(skip)} module patterns left unconverted)" if skip else ""
