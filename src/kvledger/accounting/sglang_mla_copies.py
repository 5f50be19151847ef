"""SGLang's MLA absorption copies: after loading, DeepSeek-V2/V3's attention keeps ``w_kc`` and ``w_vc``, two copies of
each layer's ``kv_b_proj`` weight, besides the weight itself; SGLang's "Load weight end. ... mem usage" counts them.

Read in the wheels (``sglang/srt/models/deepseek_v2.py``; 0.5.23 ``models/deepseek_common/deepseek_weight_loader.py``):

* 0.4.0 (``load_weights``): ``w_kc`` / ``w_vc`` are copied from ``kv_b_proj.weight`` and then ``del
  self_attn.kv_b_proj``: the copies replace the weight, no bytes more. 0.4.0.post1, 0.4.0.post2, 0.4.1, 0.4.1.post7,
  0.4.2, 0.4.2.post4, 0.4.3 (``load_weights``) and 0.4.5.post3, 0.4.6, 0.4.6.post1–post5, 0.4.7, 0.4.8, 0.5.23
  (``post_load_weights``) keep ``kv_b_proj`` (the MHA prefill path still calls it) and store
  ``w_kc = w_kc.transpose(1, 2).contiguous().transpose(1, 2)`` and ``w_vc = w_vc.contiguous().transpose(1, 2)``,
  where ``w_kc, w_vc = w.unflatten(0, (-1, nope + v)).split([nope, v], dim=1)``: both slices are strided, so each
  ``.contiguous()`` is a new tensor, heads/TP × nope × kv_lora and heads/TP × v × kv_lora elements on a rank. Together
  the size of the rank's ``kv_b_proj``, in the dtype of ``w``. (One head a rank: the ``w_vc`` slice is contiguous, a
  view of ``w``, which then lives on whole.)
* ``w`` is ``kv_b_proj.weight`` for a model-dtype checkpoint (the copies are in the model dtype) and the AWQ
  dequantization for AWQ (model dtype). For FP8: 0.4.0.post1–0.4.6.post1 keep FP8 (``block_quant_to_tensor_quant``,
  or DeepGEMM's batched matmul on FP8 blocks, default on for sm90 in 0.4.6 and 0.4.6.post1: FP8 either way). From
  0.4.6.post2 (0.4.6.post2–post5, 0.4.7, 0.4.8, 0.5.23 read) a 128 × 128-block FP8 ``kv_b_proj`` on CUDA is
  dequantized to bfloat16 (``block_quant_dequant``; 0.4.6.post2–0.4.8 only when the model dtype is bfloat16) unless
  DeepGEMM's batched matmul is asked for (``SGL_USE_DEEPGEMM_BMM``, 0.5.23 ``SGLANG_USE_DEEPGEMM_BMM``, default off;
  from 0.4.8 never on Blackwell): bfloat16 copies, twice the FP8 bytes. ROCm and other block sizes: FP8
  (tensor-wise requantization). 0.4.9–0.5.22 not read (0.4.8 and 0.5.23 agree).

Not modelled: the DeepGEMM path's block-scale copies (a few hundred B a layer), the freed dequantization temporaries,
the copies' allocator segments, the MTP (NextN) layer's copies, other quantizations of ``kv_b_proj`` (int8, GPTQ,
FP4, compressed-tensors: none listed), MLA models served by other SGLang model files.
"""

from __future__ import annotations

from kvledger.accounting.dp_attention import attention_tp
from kvledger.accounting.platforms import platform
from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["SGLANG_MLA_BF16_FROM", "SGLANG_MLA_COPIES", "SGLANG_MLA_COPIES_FROM", "sglang_mla_copy_bytes"]

SGLANG_MLA_COPIES = "MLA w_kc/w_vc copies"
SGLANG_MLA_COPIES_FROM = (0, 4, 0, 1)
"""First release keeping ``kv_b_proj`` beside ``w_kc`` / ``w_vc`` (0.4.0 deletes it)."""
SGLANG_MLA_BF16_FROM = (0, 4, 6, 2)
"""First release dequantizing a 128 × 128-block FP8 ``kv_b_proj`` to bfloat16 for ``w_kc`` / ``w_vc`` on CUDA."""
_CLASSES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM")
"""Model classes whose ``post_load_weights`` was read (models/deepseek_v2.py; Kimi-K2 loads as DeepseekV3)."""


def _copy_elem_bytes(model: ModelSpec, gpu: GpuSpec, ver: tuple[int, ...], quantized: bool) -> tuple[int, str]:
    """(bytes of one element of the copies, why), 0 when the kv_b_proj's format is not modelled."""
    q = model.quant
    if not quantized or q.method == "awq":
        return model.dtype_bytes, f"{model.dtype}, as the checkpoint's kv_b_proj" if not quantized else \
            f"{model.dtype}, AWQ dequantized"
    if q.method != "fp8":
        return 0, ""
    bf16 = (ver >= SGLANG_MLA_BF16_FROM and q.block == (128, 128) and platform(gpu) == "CUDA"
            and (ver >= (0, 5) or model.dtype == "bfloat16"))
    if bf16:
        return 2, "bfloat16: the 128 × 128-block FP8 kv_b_proj dequantized (block_quant_dequant, from 0.4.6.post2)"
    return 1, "FP8, requantized per tensor (block_quant_to_tensor_quant)"


def sglang_mla_copy_bytes(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver: tuple[int, ...]) -> tuple[int, str]:
    """(the ``w_kc`` / ``w_vc`` copies SGLang ``ver`` keeps on one GPU beside every MLA layer's ``kv_b_proj``, B;
    how), (0, "") where there are none or they are not modelled."""
    mla = next((layer for layer in model.layers if isinstance(layer, MLAAttention)), None)
    if ver < SGLANG_MLA_COPIES_FROM or mla is None or model.architectures[:1] not in [(c,) for c in _CLASSES]:
        return 0, ""
    kvb = [w for w in model.weights if w.path.endswith("self_attn.kv_b_proj.weight")]
    if not kvb or not mla.num_attention_heads:
        return 0, ""
    quantized = model.quant.converts(kvb[0])
    elem, why = _copy_elem_bytes(model, gpu, ver, quantized)
    atp = attention_tp(s)
    heads = mla.num_attention_heads // atp
    if not elem or heads < 1:
        return 0, ""
    nope, lora = mla.qk_nope_head_dim, kvb[0].cols
    v = kvb[0].rows // mla.num_attention_heads - nope
    kc, vc = heads * nope * lora, heads * v * lora
    kept = vc if heads > 1 else ((nope + v) * lora if quantized else 0)  # one head: w_vc views w, kept whole
    per_layer = (kc + kept) * elem
    how = (f"{len(kvb)} MLA layers × (w_kc {heads} heads × {nope} × {lora} + w_vc {heads} × {v} × {lora}) × {elem} B "
           f"({why}): copies of each layer's kv_b_proj on attention TP {atp}, the weight itself kept "
           "(models/deepseek_v2.py post_load_weights; kv_b_proj kept from 0.4.0.post1)")
    return per_layer * len(kvb), how
