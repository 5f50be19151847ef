"""Reading a Hugging Face config the way vLLM does: the text sub-config, transformers' class defaults and attribute
aliases.

vLLM loads ``config.json`` through transformers' config classes (``vllm/transformers_utils/config.py``):
a key absent from the file takes the class default, and legacy names resolve through the class's
``attribute_map`` (GPT-2's ``n_embd`` is ``hidden_size``). The defaults and maps are bundled in
``catalog/data/hf_config_defaults.json`` (written from transformers' classes by
``benchmarks/hf_config_defaults.py``). Configs of a ``model_type`` transformers does not know are read
with the aliases vLLM itself tries (``vllm/transformers_utils/model_arch_config_convertor.py``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from kvledger.catalog.cfg import Cfg

__all__ = ["read_text_config", "hf_defaults_source", "CLASS_DEFAULTS_NOTE"]

# The start of the note on a sizing field absent from the file and taken from the transformers class default.
CLASS_DEFAULTS_NOTE = "absent from the config, filled with transformers'"
_DEFAULTS_FILE = resources.files("kvledger.catalog") / "data" / "hf_config_defaults.json"

# Names different families give the same quantity, canonical name first. The first present wins.
ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "n_embed", "d_model", "model_dim", "dim"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads", "n_attn_heads"),
    "num_hidden_layers": ("n_layer", "n_layers", "num_layers"),
    "intermediate_size": ("block_ff_dim", "n_inner", "ffn_hidden_size", "ffn_dim", "d_ff", "inner_hidden_size"),
    "tie_word_embeddings": ("tie_embedding",),
    "vocab_size": ("padded_vocab_size", "n_vocab"),
    "head_dim": ("kv_channels", "hidden_size_per_head", "attention_head_dim", "head_size", "attention_head_size"),
}
# vLLM ModelArchConfigConvertorBase.get_total_num_kv_heads: the first of these present, else MHA.
KV_HEAD_KEYS = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
# ... and _get_and_verify_max_len's possible_keys: the smallest present.
MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
_NESTED = {"ffn_config": ("moe_num_experts", "moe_top_k", "ffn_hidden_size"), "attn_config": ("kv_n_heads", "clip_qkv")}
# transformers get_text_config(): the sub-config that holds the language model.
_TEXT_KEYS = ("text_config", "llm_config", "language_config", "thinker_config")
_TOP_LEVEL_SHARED = ("quantization_config", "compression_config", "torch_dtype", "dtype", "tie_word_embeddings")


@lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    return json.loads(_DEFAULTS_FILE.read_text(encoding="utf-8"))


def hf_defaults_source() -> str:
    """Where the class defaults come from (transformers version), for notes."""
    return _table()["source"]


def _class_info(model_type: Any) -> dict[str, Any] | None:
    return _table()["model_types"].get(model_type) if isinstance(model_type, str) else None


def _resolve(d: dict[str, Any], model_type: Any) -> tuple[dict[str, Any], list[str]]:
    """The file's keys, then their aliases, then the class defaults for what is still absent; returns what was
    filled."""
    info = _class_info(model_type)
    out = dict(d)
    filled: list[str] = []
    amap = info["attribute_map"] if info else {}
    for alias, real in amap.items():
        if out.get(alias) is None and out.get(real) is not None:
            out[alias] = out[real]
    # DBRX keeps its MoE and KV-head fields in sub-dicts (vLLM models/dbrx.py reads them there)
    for sub, keys in _NESTED.items():
        if isinstance(out.get(sub), dict):
            for k in keys:
                if out.get(k) is None and out[sub].get(k) is not None:
                    out[k] = out[sub][k]
    for canon, names in ALIASES.items():
        if canon not in out:
            for n in names:
                if out.get(n) is not None and not isinstance(out.get(n), (dict, list)):
                    out[canon] = out[n]
                    break
    if (out.get("decoder_layers") is not None or out.get("num_decoder_layers") is not None) and out.get(
        "is_encoder_decoder", True
    ) is not False:
        # an encoder-decoder family's causal-LM head is its decoder (BartForCausalLM, MarianForCausalLM, ProphetNet's
        # num_decoder_* names, ...)
        for canon, decs in (("num_hidden_layers", ("decoder_layers", "num_decoder_layers")),
                            ("num_attention_heads", ("decoder_attention_heads", "num_decoder_attention_heads")),
                            ("intermediate_size", ("decoder_ffn_dim",))):
            dec = next((k for k in decs if out.get(k) is not None), None)
            if dec is not None:
                out[canon] = out[dec]
    if info:
        for k, v in info["defaults"].items():
            canon = next((a for a, r in amap.items() if r == k), k)
            # absent, not an explicit null (Mistral-7B-v0.3's "sliding_window": null)
            if k not in out and canon not in out:
                out[k] = v
                if canon != k:
                    out[canon] = v
                filled.append(canon)
    return out, filled


def read_text_config(raw: dict[str, Any], source: str) -> tuple[Cfg, list[str]]:
    """The language-model part of a config with defaults and aliases resolved, and notes on how it was read.

    A multimodal config (Gemma-3, Llama-4, Kimi-VL, ...) nests the language model under ``text_config``
    (or ``llm_config``/``language_config``); its quantization and dtype may sit at the top level.
    """
    notes: list[str] = []
    outer_mt = raw.get("model_type")
    sub_key = next((k for k in _TEXT_KEYS if isinstance(raw.get(k), dict)), None)
    if sub_key is None:
        merged, filled = _resolve(raw, outer_mt)
        prefix = ""
    else:
        inner = dict(raw[sub_key])
        if sub_key == "thinker_config" and isinstance(inner.get("text_config"), dict):
            inner, sub_key = dict(inner["text_config"]), "thinker_config.text_config"
        for k in _TOP_LEVEL_SHARED:
            if k in raw and k not in inner:
                inner[k] = raw[k]
        info = _class_info(outer_mt)
        inner_mt = inner.get("model_type") or (info or {}).get("sub_configs", {}).get(sub_key.split(".")[-1]) or None
        if inner_mt and "model_type" not in inner:
            inner["model_type"] = inner_mt
        merged, filled = _resolve(inner, inner_mt)
        prefix = sub_key + "."
    if filled:
        keys = [k for k in filled if k in ("vocab_size", "max_position_embeddings", "num_hidden_layers", "hidden_size",
                                            "num_attention_heads", "num_key_value_heads", "head_dim",
                                                "intermediate_size",
                                            "sliding_window")]
        if keys:
            mt = merged.get("model_type")
            shown = ", ".join(f"{k}={merged[k]!r}" for k in keys)
            notes.append(f"{CLASS_DEFAULTS_NOTE} {mt} class defaults as vLLM sees them: {shown}")
    return Cfg(merged, source, prefix), notes
