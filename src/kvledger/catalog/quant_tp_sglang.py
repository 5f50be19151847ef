"""Whether a quantized checkpoint's TP shards line up with its quantization blocks and groups, as SGLang checks them
when it creates the weights (a failed check stops the load: the server does not start).

Read in SGLang 0.5.23 (``srt/layers/quantization/``):

* Block FP8 (``fp8.py``): ``Fp8LinearMethod.validate_block_quant_shapes`` — under TP a row-parallel linear's input
  features per rank must be a multiple of block_k ("Weight input_size_per_partition = … is not divisible by weight
  quantization block_k"), and every output part of a column-parallel one (merged qkv_proj and gate_up_proj parts
  included: SGLang has no exception for merged layers, unlike vLLM from 0.14) a multiple of block_n.
  ``Fp8MoEMethod.create_weights``: the expert intermediate size per MoE-TP rank must be a multiple of block_n ("The
  output_size of gate's and up's weight = … is not divisible by weight quantization block_n") and, when the MoE TP
  size is above 1, of block_k ("The input_size of down's weight = …"); only ROCm's aiter path with a 128 × 128 block
  skips it.
* The MoE TP size is ``tp_size // ep_size // moe_dp_size`` (``runtime_context.py :: derive_parallel_widths``):
  ``--enable-dp-attention`` splits attention, not the experts, so the expert shards stay 1/TP unless ``--ep-size``
  is set; at ``--ep-size`` = TP (the one the plan prices, accounting/sglang_ep.py) each expert is whole (MoE TP 1).
* AWQ (``awq/awq.py``: a layer ``check_marlin_supports_layer`` refuses falls back to ``awq/schemes/awq_linear.py``):
  the input features per rank must be a multiple of ``group_size`` ("The input size is not aligned with the
  quantized weight shape. This can be caused by too large tensor parallel size.") and the output features of its
  pack factor (8: "The output size is not aligned ..."), as in vLLM; MoE experts Marlin cannot take fall back to
  ``moe_wna16.py``, which halves the group down to 32 until it divides the intermediate size per rank, as in vLLM.
  These are the rules of ``quant_tp.py``.
* GPTQ is served through Marlin only (no fallback to gptq_linear.py's checks, whose CUDA kernel is removed): its
  kernels' shape checks, read in ``quant_tp_gptq_sglang.py``.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.quant_rules_sglang import sglang_min_capability
from kvledger.catalog.quant_tp import Misalignment, tp_misalignment, working_tp_words
from kvledger.catalog.quant_tp_gptq_sglang import gptq_marlin_misalignment, gptq_marlin_refusal, gptq_marlin_working_tp
from kvledger.errors import EngineRefusalError, InputError

__all__ = ["sglang_tp_misalignment", "check_sglang_quant_tp", "SGLANG_QUANT_TP_READ", "NO_PLAIN_GPTQ_FROM"]

SGLANG_QUANT_TP_READ = "0.5.23"
"""The SGLang release whose weight-creation checks were read."""
NO_PLAIN_GPTQ_FROM = (0, 5, 20)
"""First SGLang release read without the plain GPTQ CUDA kernel (0.5.17 has it; 0.5.18 and 0.5.19 not read)."""
_AS_VLLM_013 = (0, 13, 0)
"""vLLM's last release that checks merged column-parallel parts against block_n, as SGLang does (quant_tp.py)."""


def sglang_tp_misalignment(model: ModelSpec, q: QuantScheme, tp: int, ep: int = 1) -> Misalignment | None:
    """The first quantized layer whose TP shard SGLang refuses for scheme ``q`` at TP ``tp`` (MoE TP = TP, or 1 at
    ``ep`` = TP); None when all line up. SGLang's rules are vLLM 0.13's (merged parts checked), read against its own
    files above; GPTQ's are Marlin's (``quant_tp_gptq_sglang.py``)."""
    if q.method == "gptq":
        return gptq_marlin_misalignment(model, q, tp)
    return tp_misalignment(model, q, tp, ep, _AS_VLLM_013)


def _reason(q: QuantScheme, bad: Misalignment) -> str:
    """SGLang's words for the refusal and the file that raises it."""
    size = f"{bad.size:,.6g}".replace(",", "")
    if q.method == "gptq":  # the kernel's own words, with its file
        return f"layers/quantization/gptq/gptq.py serves it as gptq_marlin; {bad.why}"
    if q.block is not None and bad.what == "intermediate features":
        if bad.multiple == q.block[0] and "block_n" in bad.why:
            return (f"layers/quantization/fp8.py Fp8MoEMethod.create_weights: \"The output_size of gate's and up's "
                    f"weight = {size} is not divisible by weight quantization block_n = {bad.multiple}.\"")
        return (f"layers/quantization/fp8.py Fp8MoEMethod.create_weights: \"The input_size of down's weight = {size} "
                f"is not divisible by weight quantization block_k = {bad.multiple}.\"")
    if q.block is not None:
        which, name = (("input_size_per_partition", "block_k") if bad.what == "input features"
                       else ("output_partition_size", "block_n"))
        return (f"layers/quantization/fp8.py Fp8LinearMethod.validate_block_quant_shapes: \"Weight {which} = {size} "
                f"is not divisible by weight quantization {name} = {bad.multiple}.\"")
    if bad.what == "intermediate features":
        return "layers/quantization/moe_wna16.py: the group halves to no less than 32 and must divide it"
    scheme = "awq/schemes/awq_linear.py" if q.method == "awq" else "gptq/schemes/gptq_linear.py"
    return (f"layers/quantization/{scheme}: \"The input size is not aligned with the quantized weight shape. This "
            "can be caused by too large tensor parallel size.\"")


def _working_tp(model: ModelSpec, q: QuantScheme, tp: int) -> str:
    """A TP (power of two up to 2 × ``tp``) SGLang takes for this checkpoint, and SGLang's expert-parallel way out."""
    if q.method == "gptq":  # Marlin's checks; its experts are repacked whatever the expert split
        return gptq_marlin_working_tp(model, q, tp) or "no TP up to twice this one"
    words = working_tp_words(model, q, tp, 1, _AS_VLLM_013) or "no TP up to twice this one"
    if model.is_moe and tp_misalignment(model, q, tp, tp, _AS_VLLM_013) is None:
        words += (f"; or SGLang's --ep-size {tp} at --tp {tp} (MoE TP = tp_size / ep_size = 1: experts whole on each "
                  "rank)")
    return words


def check_sglang_quant_tp(model: ModelSpec, tp: int, version: tuple[int, ...] = (0, 5, 23), gpu_arch: str = "",
                          ep: int = 1) -> None:
    """Refuse a TP whose shards SGLang cannot quantize (it does not start), naming the layer, SGLang's reason with its
    file, and a TP that works; and a GPU below the quantization's minimum compute capability (``gpu_arch`` "sm75"; ""
    unchecked: ``quant_rules_sglang.py``).

    Raises:
        EngineRefusalError: the GPU below the method's minimum, or a checkpoint SGLang's kernels do not load (exit 3).
        InputError: a quantized layer's shard is not a multiple of its block or group at this --tp.
    """
    q, vtxt = model.quant, ".".join(map(str, version))
    cap = int(gpu_arch[2:]) if gpu_arch.startswith("sm") and gpu_arch[2:].isdigit() else None
    need = sglang_min_capability(q, version)
    if need and cap is not None and cap < need[0]:
        where = ("layers/quantization/compressed_tensors/compressed_tensors.py: \"Quantization scheme is not supported "
                 f"for the current GPU. Min capability: {need[0]}" if need[1] == "compressed-tensors" else
                 f"model_loader/loader.py: \"The quantization method {need[1]} is not supported for the current GPU. "
                 f"Minimum capability: {need[0]}")
        raise EngineRefusalError(f"SGLang {vtxt} does not start {model.name}: the quantization method {need[1]} needs "
                                 f"compute capability {need[0]} or more, this GPU has {cap} ({where}\"); a GPU of "
                                 f"compute capability {need[0] // 10}.{need[0] % 10} or more loads it")
    refusal = gptq_marlin_refusal(q) if q.method == "gptq" and version >= NO_PLAIN_GPTQ_FROM else None
    if refusal:
        raise EngineRefusalError(f"SGLang {vtxt} does not start {model.name}: {refusal}; "
                                 "serve it with vLLM (kvledger plan --engine vllm)")
    bad = sglang_tp_misalignment(model, q, tp, ep)  # ep: --ep-size (= tp: experts whole)
    if bad is None:
        return
    dp_words = (f" (experts split over MoE TP = tp_size {tp}: --enable-dp-attention splits attention only)"
                if bad.what == "intermediate features" else "")
    raise InputError(f"--tp {tp}: SGLang {SGLANG_QUANT_TP_READ} does not start {model.name}: "
                     f"{bad.path.removesuffix('.weight')} has {bad.size:,.6g} {bad.what} per GPU ({bad.full:,}/{tp})"
                     f"{dp_words}, not a multiple of {bad.multiple} ({q.method}; {_reason(q, bad)}); a TP that "
                     f"works: {_working_tp(model, q, tp)}")
