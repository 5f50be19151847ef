"""What a family parser returns (``Family``) and the config readings every family shares: heads, embeddings."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.hfread import KV_HEAD_KEYS
from kvledger.catalog.layers import LayerSpec
from kvledger.catalog.weights import Weight

__all__ = ["Family", "heads", "embed", "WARNING_NOTE"]

#: the start of a model note the plan shows first, as a warning: a part of the model not counted (a vision tower),
#: or an architecture the engine may not serve as it is read here
WARNING_NOTE = "WARNING: "


@dataclass
class Family:
    """What a family parser found.

    Attributes:
        layers: one KV spec per decoder layer; None for layers without attention or state (Nemotron-H MLP layers).
        weights: every parameter tensor.
        num_experts / experts_per_token: routed experts per MoE layer and top-k (0 for dense models).
        notes: remarks the ledger shows (e.g. which field decided the layout).
        hidden_size: the model's width when the config has no top-level ``hidden_size`` (BLT: its global
            transformer's), else 0.
    """

    layers: list[LayerSpec | None]
    weights: list[Weight]
    num_experts: int = 0
    experts_per_token: int = 0
    notes: list[str] = field(default_factory=list)
    hidden_size: int = 0


def heads(c: Cfg) -> tuple[int, int, int, int]:
    """(hidden, attention heads, KV heads, head_dim) as vLLM reads them.

    KV heads: the first of ``n_head_kv``, ``num_kv_heads``, ``num_key_value_heads``, ``multi_query_group_num``
    (vLLM ``ModelArchConfigConvertorBase.get_total_num_kv_heads``), else one head when ``multi_query`` (MQA:
    Falcon-7B, StarCoder), else as many as attention heads (MHA). head_dim: ``head_dim`` (aliases
    ``kv_channels``, ``hidden_size_per_head``, ``attention_head_dim``), else hidden ÷ heads (``get_head_size``).
    """
    h, nh = c.int("hidden_size"), c.int("num_attention_heads")
    key = next((k for k in KV_HEAD_KEYS if c.has(k)), None)
    if key is not None:
        nkv = c.int(key)
    elif c.get("multi_query", False) is True:
        nkv = 1
    else:
        nkv = nh
    if c.has("head_dim"):
        hd = c.int("head_dim")
    else:
        hd = h // nh  # vLLM get_head_size and transformers: floor division, even when it leaves a remainder
        if hd == 0:
            raise c.error("num_attention_heads", f"{nh} heads for hidden_size {h} leave no head dimension; give "
                                                 f"head_dim")
    if nkv > nh or nh % nkv:
        raise c.error(key or "num_key_value_heads",
                      f"{nkv} KV heads cannot serve {nh} attention heads (must divide it)")
    return h, nh, nkv, hd


def embed(c: Cfg, h: int, tied_default: bool = True) -> tuple[list[Weight], bool]:
    """Input embedding and, unless tied (transformers' PretrainedConfig default: tied), the LM head."""
    v = c.int("vocab_size")
    tied = c.bool("tie_word_embeddings", tied_default)
    w = [Weight("model.embed_tokens.weight", v, h, 1, False, "shard")]
    if not tied:
        w.append(Weight("lm_head.weight", v, h, 1, False, "shard"))
    return w, tied
