"""What vLLM adds to a checkpoint's stored tensors while loading it, beyond their layout: the activation-dtype copy of a
quantized MLA ``kv_b_proj``, ROCm's fused-MoE padding and the embedding/LM head some model classes build on every
pipeline stage. Each is read from the engine code (see each)."""

from __future__ import annotations

import math
import re

from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.weights import Weight

__all__ = ["mla_dequant_copy_bytes", "rocm_moe_padding_bytes", "EVERY_STAGE_EMBED_AND_HEAD"]


def mla_dequant_copy_bytes(w: Weight, q: QuantScheme, tp: int, dtype_bytes: int,
                           engine_version: tuple[int, int, int]) -> int:
    """The activation-dtype copy of a quantized MLA ``kv_b_proj`` that vLLM keeps on each GPU, B.

    ``MLACommonImpl.process_weights_after_loading`` (0.11.2, 0.14.1 ``v1/attention/backends/mla/common.py``; 0.16.0,
    0.20.0 ``layers/attention/mla_attention.py``): "we currently do not have quantized bmm's ... we just store
    fp16/bf16 copies": a quantized ``kv_b_proj`` is dequantized (``quant_method.apply`` on an identity) into one
    ``[kv_lora_rank, heads/TP × (qk_nope + v)]`` tensor whose views become ``W_UV`` and ``W_UK_T``; an unquantized one
    is only viewed. It is allocated inside ``load_model``, so "Model loading took" counts it (DeepSeek-R1 FP8 at TP 8:
    512 × 16 × 256 × 2 B = 4 MiB per layer, 0.24 GiB over 61 layers). MLA arrived in 0.7.1; the ROCm AITER FP8/FP4
    BMM paths (off by default) re-quantize instead (not modelled). Unrounded: the caller rounds to the allocator."""
    if engine_version < (0, 7, 1) or not w.path.endswith("kv_b_proj.weight") or not q.converts(w):
        return 0
    return math.ceil(w.numel / tp) * dtype_bytes


_MOE_PROJ = re.compile(r"\.(gate_proj|up_proj|w1|w3|down_proj|w2)\.weight$")


def rocm_moe_padding_bytes(w: Weight, q: QuantScheme, tp: int, dtype_bytes: int) -> int:
    """Padding vLLM adds on ROCm to an unquantized fused-MoE weight, B per GPU.

    ``UnquantizedFusedMoEMethod._maybe_pad_weight`` (read in 0.11.2, 0.14.1, 0.16.0, 0.20.0), with
    ``VLLM_ROCM_MOE_PADDING`` on by default: on ROCm, a weight whose row stride is a multiple of 512 B gets
    ``F.pad(weight, (0, 256 // element_size))[..., :-pad]``, so its storage keeps 256 B more per row. ``w13`` is
    ``[experts, 2·I/TP, hidden]`` (row stride hidden × d), ``w2`` is ``[experts, hidden, I/TP]`` (row stride I/TP × d).
    Quantized MoE methods (FP8, MXFP4, ...) do not pad."""
    m = _MOE_PROJ.search(w.path)
    if not w.expert or not m or q.converts(w):
        return 0
    down = m.group(1) in ("down_proj", "w2")
    stride_elems, rows = (w.cols // tp, w.rows) if down else (w.cols, w.rows // tp)
    if (stride_elems * dtype_bytes) % 512:
        return 0
    return w.count * rows * 256


EVERY_STAGE_EMBED_AND_HEAD = frozenset({"Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", "MixtralForCausalLM",
                                        "GptOssForCausalLM", "Qwen3NextForCausalLM"})
"""vLLM model classes that build the input embedding, the final norm and the LM head on every pipeline stage: their
``__init__`` has no ``is_first_rank``/``is_last_rank`` gate (``models/qwen3_moe.py``, ``qwen2_moe.py``, ``mixtral.py``,
``gpt_oss.py`` read in 0.10.1, 0.11.0 and 0.19.0; ``qwen3_next.py`` in 0.11.0 and 0.19.0), where ``llama.py``,
``qwen2.py`` (Qwen3 too) and ``deepseek_v2.py`` build them only on the first / last stage. Checked: the Qwen3-30B-A3B
TP 4 × PP 2 start-up of vllm_public_startups.csv P15 prints 7.3272 GiB on both stages; one of the two 151,936 × 2,048
× 2 B / 4 = 0.145 GiB tensors a stage gives 7.18, both 7.325."""
