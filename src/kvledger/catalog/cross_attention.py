"""Encoder-decoder models that vLLM serves with a cross-attention KV cache group, which kvledger does not model yet.

vLLM 0.33 builds ``CrossAttention`` layers (``model_executor/layers/attention/cross_attention.py``) for
WhisperForConditionalGeneration (``models/whisper.py``), CohereAsrForConditionalGeneration (``cohere_asr.py``) and
NemotronParseForConditionalGeneration (``nemotron_parse.py``). Their layers get a ``CrossAttentionSpec``
(``v1/kv_cache_interface.py``) in a KV cache group of its own beside the decoder's self-attention group, and
``CrossAttentionManager`` (``v1/core/single_type_kv_cache_manager.py``) takes one static allocation per request of
cdiv(encoder tokens, block_size) blocks when the encoder input is scheduled (Whisper: ``max_source_positions``, 1500
per 30-s window). At start-up the group's demand is cdiv(``max_num_encoder_input_tokens``, block_size) blocks, and
``SchedulerConfig.__post_init__`` sets that field to ``max_num_batched_tokens`` (0.19.0 and 0.33.0 alike). The encoder's
weights (a convolutional front-end and its own layers) load beside the decoder's.

Read as a plain decoder, such a model gets the decoder's self-attention KV right but leaves out the cross-attention
blocks and the encoder's weights, so every capacity figure would be too high: it is refused instead.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import ConfigError

__all__ = ["CROSS_ATTENTION_ARCHITECTURES", "refuse_cross_attention"]

CROSS_ATTENTION_ARCHITECTURES: frozenset[str] = frozenset({
    "WhisperForConditionalGeneration", "CohereAsrForConditionalGeneration", "NemotronParseForConditionalGeneration"})
"""vLLM 0.33 model classes whose decoder layers hold a ``CrossAttention`` layer (a cross-attention KV group)."""


def refuse_cross_attention(raw: dict[str, Any], source: str) -> None:
    """Refuse a config whose architecture vLLM serves with a cross-attention KV cache group.

    Raises:
        ConfigError: an architecture in ``CROSS_ATTENTION_ARCHITECTURES``, or ``model_type`` "whisper".
    """
    archs = raw.get("architectures")
    archs = archs if isinstance(archs, list) else []  # a malformed list is parse_config's to refuse, by name
    hit = next((a for a in archs if isinstance(a, str) and a in CROSS_ATTENTION_ARCHITECTURES), None)
    if hit is None and raw.get("model_type") == "whisper":
        hit = "WhisperForConditionalGeneration"
    if hit is None:
        return
    encoder = raw.get("max_source_positions")
    held = f" ({encoder:,} encoder positions per request here)" if isinstance(encoder, int) else ""
    raise ConfigError(source, f"{hit}: cross-attention KV not modelled — vLLM serves this encoder-decoder model with a "
                              "second KV cache group (CrossAttentionSpec) that holds each request's encoder states"
                              f"{held} beside the decoder's self-attention blocks, and loads the encoder's weights "
                              "too; kvledger counts neither yet, so its blocks, start-up check and concurrency would "
                              "be too high", field="architectures")
