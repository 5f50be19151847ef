"""Weight quantization from ``quantization_config``: bytes per parameter, scale overheads, modules left unconverted.

Formats and their storage (per Linear weight matrix of ``rows × cols``, cols = input features):

* fp8 (``quant_method: fp8``): 1 B/param; with ``weight_block_size [br, bc]`` one fp32 scale per
  block, ``cdiv(rows, br)·cdiv(cols, bc)·4`` B (DeepSeek-V3 ``weight_scale_inv``), else one fp32
  scale per matrix.
* mxfp4 (gpt-oss): 4-bit E2M1 values plus one 8-bit E8M0 scale per 32 values = 4.25 bit/param
  (OCP Microscaling spec v1.0 §5; gpt-oss model card: 12.8 GiB for the 20b checkpoint).
* awq / gptq (``bits``, ``group_size``): packed ``bits``-bit weights, an fp16 scale and a packed
  ``bits``-bit zero point per group of ``group_size`` input features; gptq adds an int32 ``g_idx``
  per input feature.
* compressed-tensors: ``config_groups.*.weights.num_bits`` and its group/channel/tensor strategy.
* bitsandbytes: 8-bit (1 B/param) or 4-bit NF4 (0.5 B/param + a 4-B absmax per 64 values).

Embeddings, ``lm_head``, norms, biases and router gates stay in the model dtype, as vLLM loads them.
"""

from __future__ import annotations

import fnmatch
import math
import re
from dataclasses import dataclass, field

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.weights import Weight

__all__ = ["QuantScheme", "parse_quant"]


@dataclass(frozen=True)
class QuantScheme:
    """How linear weights are stored.

    Attributes:
        method: "none", "fp8", "mxfp4", "awq", "gptq", "compressed-tensors" or "bitsandbytes".
        bits: bits per quantized weight value (16 for none).
        group_size: input features sharing one scale (0 = per channel, -1 = per tensor).
        block: (rows, cols) of an FP8 scale block, or None.
        not_convert: module-path patterns left in the model dtype (``modules_to_not_convert`` / ``ignore``).
        description: one line for the ledger.
    """

    method: str = "none"
    bits: float = 16
    group_size: int = -1
    block: tuple[int, int] | None = None
    not_convert: tuple[str, ...] = ()
    description: str = "unquantized: every weight in the model dtype"
    _regex: re.Pattern | None = field(default=None, compare=False, repr=False)

    def converts(self, w: Weight) -> bool:
        """True when ``w`` is stored quantized under this scheme."""
        if self.method == "none" or not w.linear:
            return False
        return self._regex is None or not self._regex.match(w.path)

    def bytes_of(self, w: Weight, dtype_bytes: float) -> float:
        """Stored bytes of ``w`` (values plus scales/zeros), B."""
        if not self.converts(w):
            return w.numel * dtype_bytes
        rows, cols, n = w.rows, w.cols, w.count
        values = w.numel * self.bits / 8
        if self.method == "fp8":
            if self.block:
                return values + n * math.ceil(rows / self.block[0]) * math.ceil(cols / self.block[1]) * 4
            return values + n * 4
        if self.method == "mxfp4":
            return w.numel * (4 + 8 / 32) / 8
        if self.method == "bitsandbytes":
            return values + (w.numel / 64 * 4 if self.bits == 4 else n * rows * 4)
        groups = 1 if self.group_size == -1 else (cols if self.group_size == 0 else math.ceil(cols / self.group_size))
        scales = n * rows * groups * 2
        zeros = n * rows * groups * self.bits / 8 if self.method in ("awq", "gptq") else 0
        g_idx = n * cols * 4 if self.method == "gptq" else 0
        return values + scales + zeros + g_idx


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
    return re.compile(r"^(?:%s)$" % "|".join(parts))


def parse_quant(c: Cfg) -> QuantScheme:
    """Read ``quantization_config`` (absent → unquantized).

    Raises:
        ConfigError: an unsupported ``quant_method`` or bit width, naming the field.
    """
    if not c.has("quantization_config"):
        return QuantScheme()
    q = Cfg(c.get("quantization_config"), c.source, c.prefix + "quantization_config.")
    method = q.str("quant_method").lower()
    skip = list(q.list("modules_to_not_convert", []) or []) + list(q.list("ignore", []) or [])
    rx = _compile(skip)
    note = f" ({len(skip)} module patterns left unconverted)" if skip else ""
    if method == "fp8":
        blk = q.list("weight_block_size", None)
        block = (int(blk[0]), int(blk[1])) if blk else None
        desc = f"fp8 {q.str('fmt', 'e4m3')}: 1 B/weight + fp32 scale per {'%d×%d block' % block if block else 'matrix'}{note}"
        return QuantScheme("fp8", 8, -1, block, tuple(skip), desc, rx)
    if method == "mxfp4":
        return QuantScheme("mxfp4", 4.25, 32, None, tuple(skip), f"mxfp4: 4-bit values + 8-bit scale per 32 = 4.25 bit/weight{note}", rx)
    if method in ("awq", "gptq"):
        bits = q.int("bits", None) or q.int("w_bit")
        gs = q.get("group_size", None) or q.get("q_group_size", 128)
        if bits not in (2, 3, 4, 8):
            raise q.error("bits", f"{bits}-bit {method} is not a supported width (2, 3, 4, 8)")
        desc = f"{method}: {bits}-bit weights, fp16 scale + {bits}-bit zero per {gs} inputs{note}"
        return QuantScheme(method, bits, int(gs), None, tuple(skip), desc, rx)
    if method == "compressed-tensors":
        return _compressed_tensors(q, skip, rx)
    if method == "bitsandbytes":
        bits = 4 if q.get("load_in_4bit", False) else 8
        return QuantScheme("bitsandbytes", bits, 64, None, tuple(skip), f"bitsandbytes {bits}-bit{note}", rx)
    raise q.error("quant_method", f"unsupported weight quantization {method!r}; supported: fp8, mxfp4, awq, gptq, compressed-tensors, bitsandbytes")


def _compressed_tensors(q: Cfg, skip: list[str], rx: re.Pattern | None) -> QuantScheme:
    groups = q.get("config_groups", {})
    if not isinstance(groups, dict) or not groups:
        raise q.error("config_groups", "is missing or empty; cannot tell the weight format")
    name, grp = next(iter(groups.items()))
    wcfg = (grp or {}).get("weights") or {}
    bits = wcfg.get("num_bits")
    if bits not in (4, 8):
        raise q.error(f"config_groups.{name}.weights.num_bits", f"unsupported width {bits!r} (4 or 8)")
    strategy = wcfg.get("strategy", "tensor")
    gs = {"tensor": -1, "channel": 0}.get(strategy, wcfg.get("group_size") or 128)
    desc = f"compressed-tensors: {bits}-bit {wcfg.get('type', 'int')} weights, {strategy} scales"
    return QuantScheme("compressed-tensors", bits, int(gs), None, tuple(skip), desc, rx)
