"""SGLang's DeepSeek-V3/R1 shared-expert fusion of 0.4.5.post2–0.4.6.post5: ``tp_size`` copies of the shared expert
cloned into the fused MoE, and the load-time rows of the memory plan (the RoPE buffer, the segment tails and those
copies) that SGLang's "Load weight end. ... mem usage" counts.

Read in the wheels (``sglang/srt/models/deepseek_v2.py``):

* 0.4.5 and 0.4.5.post1: ``n_share_experts_fusion`` defaults to 0 in ``server_args.py`` and the model turns fusion on
  only when it is None, so by default the shared expert stays its own TP-sliced ``DeepseekV2MLP``.
* 0.4.5.post2, 0.4.5.post3, 0.4.6, 0.4.6.post2, 0.4.6.post3, 0.4.6.post4, 0.4.6.post5
  (``DeepseekV2ForCausalLM.__init__`` / ``determine_n_share_experts_fusion``): at 0 it sets ``n_share_experts_fusion
  = tp_size`` where ``torch.cuda.get_device_capability() >= (9, 0)``, ``architectures[0] == "DeepseekV3ForCausalLM"``,
  ``n_routed_experts == 256`` and DeepEP is off (log: "Shared experts fusion optimization is enabled"; no check of
  the checkpoint's quantization). ``load_weights`` clones the shared expert's tensors into experts 256 … 255 + tp
  ("Cloning {n} replicas of the shared expert into MoE"), the MoE is built with ``n_routed_experts + tp`` experts
  (``FusedMoE``, each expert sliced over the TP group) and the separate shared MLP is not built. One GPU so holds
  tp × 1/tp = one whole shared expert per MoE layer where the unfused model holds 1/tp: (tp − 1)/tp of the shared
  experts' bytes more. From 0.4.6.post4 the check also asks ``_is_cuda`` (a ROCm build of PyTorch reports gfx9 as
  capability 9.x, so 0.4.5.post2–0.4.6.post3 fuse on an AMD GPU too). 0.4.6.post1 not read (0.4.6 and 0.4.6.post2,
  either side of it, agree).
* 0.4.7 and 0.4.8: ``num_fused_shared_experts = n_shared_experts`` (1 for V3/R1): one copy, sliced over TP, the
  unfused bytes; 0.5.23 (``get_num_fused_shared_experts``, asserted 0 or ``n_shared_experts``) the same.

Checked: llm-ie-benchmarks' DeepSeek-R1 TP 8 start-ups on 8 × H200 (0.4.5.post2 and 0.4.5.post3) print "Shared experts
fusion optimization is enabled", fused-MoE configs for E=264, and "mem usage=81.64 GB" against 79.54 GiB computed
without the copies (tests/accounting/test_sglang_shared_fusion.py).
"""

from __future__ import annotations

from kvledger.accounting import notes as N
from kvledger.accounting.memory import Deduction
from kvledger.accounting.platforms import platform
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_load import sglang_load_buffers
from kvledger.accounting.sglang_mla_copies import SGLANG_MLA_COPIES, sglang_mla_copy_bytes
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["SGLANG_SHARED_COPIES", "SGLANG_SHARED_FUSION_FROM", "SGLANG_SHARED_FUSION_UNTIL",
           "sglang_load_items", "sglang_shared_copies", "sglang_shared_fusion_bytes"]

SGLANG_SHARED_FUSION_FROM = (0, 4, 5, 2)
"""First release that fuses DeepSeek-V3/R1's shared expert tp_size times by default."""
SGLANG_SHARED_FUSION_UNTIL = (0, 4, 7)
"""First release that fuses one copy (``num_fused_shared_experts``), no more bytes than the unfused expert."""
SGLANG_SHARED_FUSION_ROCM_UNTIL = (0, 4, 6, 4)
"""First release whose check asks ``_is_cuda``: before it a ROCm GPU (capability 9.x) fuses too."""
SGLANG_SHARED_COPIES = "shared-expert copies"


def sglang_shared_copies(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver: tuple[int, ...]) -> int:
    """How many copies of the shared expert SGLang ``ver`` clones into the fused MoE (tp_size), 0 when it keeps the
    shared expert apart or fuses one copy (no extra bytes)."""
    if not SGLANG_SHARED_FUSION_FROM <= ver < SGLANG_SHARED_FUSION_UNTIL or s.tp == 1:
        return 0
    if model.architectures[:1] != ("DeepseekV3ForCausalLM",) or model.num_experts != 256:
        return 0
    if (s.moe_a2a_backend or "none") != "none":
        return 0
    if platform(gpu) == "ROCm":
        return s.tp if ver < SGLANG_SHARED_FUSION_ROCM_UNTIL else 0
    return s.tp if platform(gpu) == "CUDA" and (gpu.capability or 0) >= 90 else 0  # torch's get_device_capability


def _shared_weights(model: ModelSpec) -> list:
    return [w for w in model.weights if ".shared_experts." in w.path and not w.expert]


def sglang_shared_fusion_bytes(model: ModelSpec, tp: int, copies: int) -> tuple[float, str]:
    """(what ``copies`` cloned shared experts hold on one GPU beyond the unfused 1/tp, B; how)."""
    ws = _shared_weights(model)
    if not copies or not ws:
        return 0.0, ""
    whole = sum(sum(model.quant.tensor_bytes(w, model.dtype_bytes)) for w in ws)
    layers = len({w.path.split(".mlp.")[0] for w in ws})
    extra = whole * (copies - 1) / tp
    how = (f"{copies} copies of the shared expert cloned into the fused MoE ({model.num_experts} + {copies} experts, "
           f"each sliced over TP {tp}): one whole shared expert a GPU instead of 1/{tp}, "
           f"({copies} − 1)/{tp} × {whole:,.0f} B over {layers} MoE layers (models/deepseek_v2.py, "
           "n_share_experts_fusion = tp_size, 0.4.5.post2–0.4.6.post5)")
    return extra, how


def sglang_load_items(model: ModelSpec, gpu: GpuSpec, s: PlanSettings, ver: tuple[int, ...]) -> tuple[Deduction, ...]:
    """The computed rows SGLang's "Load weight end. ... mem usage" holds besides the parameters and the measured
    overhead: the RoPE buffer, the segment tails (sglang_load.py), the shared-expert copies and MLA's w_kc/w_vc copies
    (sglang_mla_copies.py); () when the weights figure is given (it is SGLang's own "mem usage")."""
    if s.weights_bytes is not None:
        return ()
    copies = sglang_shared_copies(model, gpu, s, ver)
    bufs = sglang_load_buffers(model, s.tp, ver, platform(gpu) == "ROCm", copies)
    items = (Deduction(N.SGLANG_ROPE_BUFFER, bufs.rope_bytes, N.sglang_load_buffers_source(bufs.rope_how)),
             Deduction(N.SGLANG_SEGMENT_TAILS, bufs.tail_bytes, N.sglang_load_buffers_source(bufs.tail_how)))
    extra, how = sglang_shared_fusion_bytes(model, s.tp, copies)
    mla, mla_how = sglang_mla_copy_bytes(model, gpu, s, ver)
    return (items + ((Deduction(SGLANG_SHARED_COPIES, extra, N.sglang_load_buffers_source(how)),) if extra else ())
            + ((Deduction(SGLANG_MLA_COPIES, mla, N.sglang_load_buffers_source(mla_how)),) if mla else ()))
