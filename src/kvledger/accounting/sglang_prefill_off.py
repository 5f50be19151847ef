"""What else turns SGLang's prefill CUDA graphs off, beyond the flags ``sglang_prefill_graphs.py`` reads: pipeline
parallelism, an AMD GPU, a multimodal model, and the model architectures each release lists.

Read in 0.5.10 and 0.5.12 (``server_args.py :: _handle_piecewise_cuda_graph``), 0.5.14 (``server_args.py ::
_disable_tc_piecewise_cudagraph_if_incompatible``), 0.5.17 (``server_args.py :: _disable_breakable_cudagraph_if_
incompatible``; ``model_executor/cuda_graph_config.py :: default_prefill_backend``: breakable on CUDA, tc_piecewise
elsewhere, which the non-CUDA rule turns off), 0.5.20, 0.5.22 and 0.5.23 (``arg_groups/cuda_graph_hook.py ::
apply_cuda_graph_compatibility`` and ``disable_breakable_cudagraph_if_incompatible``; ``default_prefill_backend``:
disabled off CUDA); the architecture lists from ``configs/model_config.py`` of each. A release between two read ones
takes the earlier one's rule.

  * ``--pp`` above 1: off in 0.5.10–0.5.16 and from 0.5.20 (opt-in there); 0.5.17's breakable rules have no PP rule.
  * an AMD GPU (HIP): off in every release read.
  * a multimodal model (a vision tower here; SGLang's ``is_multimodal``: its architecture list or a
    ``vision_config``/``audio_config``): off unless the architecture is on the release's allowlist (none in 0.5.10
    and 0.5.12; the tc_piecewise list in 0.5.14; the breakable list from 0.5.17).
  * ``piecewise_cuda_graph_disabled_model_archs`` (0.5.10–0.5.16; e.g. Qwen3NextForCausalLM); for the breakable
    graphs NemotronH (0.5.17 only), DeepSeek-V4 (0.5.17 on) and KDA linear attention (0.5.20 on; GLM-5 Next exempt
    from 0.5.22).

Speculative decoding, LoRA, two-batch overlap and HiCache, each in some of these releases: ``sglang_prefill_graphs.py``
(HiCache applied from the tier flag, the others assumed off and said). torch.compile, a MoE all-to-all backend and PD
disaggregation also turn them off in some releases; the plan has no flag for them.
"""

from __future__ import annotations

from kvledger.accounting.platforms import platform
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import sglang_version_text
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import StateLayer
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["prefill_off_for_model"]

_OFF_FROM, _BREAKABLE_FROM, _BREAKABLE_PP_FROM = (0, 5, 10), (0, 5, 17), (0, 5, 20)
_DSV4 = ("DeepseekV4ForCausalLM", "DeepseekV4ForCausalLMNextN", "DeepseekV4ForCausalLMDSpark")
_NEMOTRON_H = ("NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronHForCausalLMMTP")
_GLM5_NEXT = "Glm5NextForConditionalGeneration"
#: piecewise_cuda_graph_disabled_model_archs, by the first read release holding that list (used up to 0.5.16)
_OFF_ARCHS = {
    (0, 5, 10): ("DeepseekV32ForCausalLM", "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeV2_5ForCausalLM",
                 "LLaDAModelLM"),
    (0, 5, 12): ("DeepseekV32ForCausalLM", *_DSV4[:2], "Qwen3NextForCausalLM", "GlmMoeDsaForCausalLM",
                 "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"),
    (0, 5, 14): (*_DSV4[:2], "Qwen3NextForCausalLM", "BailingMoeV2_5ForCausalLM", "LLaDAModelLM"),
}
_BREAKABLE_MM_20 = ("Cohere2VisionForConditionalGeneration", _GLM5_NEXT, "InternS2MobiusForConditionalGeneration",
                    "PaddleOCRVLForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                    "Qwen3_5MoeForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
                    "KimiK3ForConditionalGeneration", "KimiK25ForConditionalGeneration")
#: the multimodal architectures each release lets keep the prefill graphs (tc_piecewise list in 0.5.14, then breakable)
_MM_KEEP = {
    (0, 5, 10): (),
    (0, 5, 14): ("Cohere2VisionForConditionalGeneration",),
    (0, 5, 17): ("Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration"),
    (0, 5, 20): _BREAKABLE_MM_20,
    (0, 5, 22): (*_BREAKABLE_MM_20, "Qwen4ExpForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
                 "MiniMaxM3SparseForConditionalGeneration"),
    (0, 5, 23): (*_BREAKABLE_MM_20, "Qwen4ExpForConditionalGeneration", "MiniMaxM3SparseForCausalLM",
                 "MiniMaxM3SparseForConditionalGeneration", "MuseSparkForConditionalGeneration"),
}


def _read(table: dict, ver: tuple[int, ...]) -> tuple[str, ...]:
    """The entry of the latest read release at or before ``ver``."""
    return table[max(k for k in table if k <= ver[:3])]


def _multimodal(model: ModelSpec) -> bool:
    """A vision tower counted, or one the notes say was not: SGLang's ``is_multimodal`` for a ``vision_config``."""
    return (any(w.path.startswith("vision_tower.") for w in model.weights)
            or any("vision tower not counted" in n for n in model.notes))


def _arch_reason(ver: tuple[int, ...], model: ModelSpec, v: str) -> str | None:
    """The architecture rule of ``ver`` that turns the prefill graphs off for ``model``, or None."""
    archs = set(model.architectures)
    if ver < _BREAKABLE_FROM:
        hit = sorted(archs & set(_read(_OFF_ARCHS, ver)))
        return (f"off ({hit[0]} is on SGLang {v}'s piecewise_cuda_graph_disabled_model_archs, "
                "configs/model_config.py)") if hit else None
    if archs & set(_DSV4):
        return f"off (SGLang {v} turns breakable prefill graphs off for DeepSeek-V4: capture-pool memory pressure)"
    if ver < _BREAKABLE_PP_FROM and archs & set(_NEMOTRON_H):
        return f"off (SGLang {v}'s breakable prefill graphs are turned off for NemotronH's hybrid Mamba2 prefill)"
    kda = any(isinstance(x, StateLayer) and x.mixer == "kda" for x in model.layers)
    if ver >= _BREAKABLE_PP_FROM and kda and not (ver >= (0, 5, 22) and _GLM5_NEXT in archs):
        return f"off (SGLang {v}'s breakable prefill graphs are turned off for KDA hybrid linear attention)"
    return None


def prefill_off_for_model(ver: tuple[int, ...], model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> str | None:
    """Why SGLang ``ver`` leaves the prefill graphs off for this model, GPU and ``--pp`` (module doc), or None."""
    if ver < _OFF_FROM:  # opt-in before 0.5.10 (sglang_prefill_graphs.py)
        return None
    v = sglang_version_text(ver)
    if s.pp > 1 and not (_BREAKABLE_FROM <= ver < _BREAKABLE_PP_FROM):
        src = "arg_groups/cuda_graph_hook.py, opt-in there" if ver >= _BREAKABLE_PP_FROM else "server_args.py"
        return f"off (pipeline parallelism, --pp {s.pp}, turns SGLang {v}'s prefill graphs off; {src})"
    if platform(gpu) == "ROCm":
        return (f"off (SGLang {v} captures prefill graphs on CUDA only: an AMD GPU runs HIP; "
                + ("model_executor/cuda_graph_config.py default_prefill_backend)" if ver >= _BREAKABLE_FROM
                   else "server_args.py)"))
    if _multimodal(model) and not set(model.architectures) & set(_read(_MM_KEEP, ver)):
        return f"off (a multimodal model: SGLang {v} turns prefill graphs off unless its architecture is allowlisted)"
    return _arch_reason(ver, model, v)
