"""SGLang 0.5.23's cap on running requests for models with Mamba / linear-attention state.

Read from SGLang 0.5.23 (``srt/mem_cache/kv_cache_configurator.py : resolve_max_num_reqs`` and
``_calculate_mamba_ratio``, ``srt/arg_groups/overrides.py : _mamba_radix_cache_resolution`` and
``supports_mamba_cache_extra_buffer``, ``srt/mem_cache/allocation_sizing.py : get_mamba_tracking_slots``):
``max_running_requests`` is at most ``max_mamba_cache_size // ratio`` state slots, where with the radix cache on
(the default) the ratio is 3 (``MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO``) plus 2 tracking slots when the
"extra_buffer" strategy is chosen: the "auto" strategy picks it, with overlap scheduling on (the default) and the
default triton linear-attention backend, for the architectures below that are in both SGLang lists; those only in
the radix-cache list get "no_buffer" (ratio 3). Configs that SGLang matches by a registry predicate rather than by
architecture name are not recognised here (ratio 3).
"""

from __future__ import annotations

__all__ = ["sglang_mamba_ratio"]

_RADIX_ARCHS = frozenset({
    "KimiLinearForCausalLM", "KimiK3ForConditionalGeneration", "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM",
    "BailingMoeV3VLForConditionalGeneration", "Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "InternS2MobiusForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen4ExpForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
    "MiniCPMV4_7ForConditionalGeneration", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
    "NemotronH_Omni_Reasoning_V3", "FalconH1ForCausalLM", "JetNemotronForCausalLM", "JetVLMForConditionalGeneration",
    "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "ZayaForCausalLM", "Glm5NextForConditionalGeneration",
    "GraniteMoeHybridForCausalLM",  # in the branch when any layer is a Mamba layer (it is, to reach this rule)
})
"""Architectures SGLang 0.5.23 routes through its hybrid-Mamba radix cache (``_MAMBA_RADIX_CACHE_ARCHS``)."""
_EXTRA_BUFFER_ARCHS = frozenset({
    "KimiLinearForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "Qwen3_5MoeForCausalLM", "Qwen3_5ForCausalLM", "Qwen3NextForCausalLM", "Qwen4ExpForConditionalGeneration",
    "InternS2PreviewForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
    "BailingMoeV2_5ForCausalLM", "BailingMoeV3ForCausalLM", "BailingMoeV3VLForConditionalGeneration",
    "FalconH1ForCausalLM", "GraniteMoeHybridForCausalLM", "Glm5NextForConditionalGeneration", "NemotronHForCausalLM",
    "NemotronHPuzzleForCausalLM", "NemotronH_Omni_Reasoning_V3", "KimiK3ForConditionalGeneration",
    "InklingForConditionalGeneration", "InklingForConditionalGenerationMTP",
})
"""Architectures whose Mamba cache supports the extra_buffer strategy (``_MAMBA_EXTRA_BUFFER_ARCHS``)."""


def sglang_mamba_ratio(architectures: tuple[str, ...] | list[str]) -> tuple[int, str]:
    """State slots SGLang 0.5.23 counts per running request, and the rule in words."""
    arch = architectures[0] if architectures else ""
    if arch in _RADIX_ARCHS and arch in _EXTRA_BUFFER_ARCHS:
        return 5, (f"{arch}: the 'auto' Mamba radix-cache strategy resolves to extra_buffer (overlap scheduling, "
                   f"triton "
                   "linear-attention backend): 3 + 2 tracking slots per request")
    if arch in _RADIX_ARCHS:
        return 3, f"{arch}: the 'auto' Mamba radix-cache strategy resolves to no_buffer: 3 slots per request"
    return 3, f"{arch or 'this architecture'}: radix cache on, no extra buffer: 3 slots per request"
