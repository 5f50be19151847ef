"""The layer kinds of a model in words, as the plan's model table and ``kvledger models`` print them.

``ModelSpec.layer_counts`` counts the layers that keep no cache of their own as "none"; printed, such a layer is named
by what it holds instead: a Nemotron-H MLP layer (``-`` in ``hybrid_override_pattern``) as "MLP (no cache)", a
Nemotron-3 MoE layer (``E``) as "MoE (no cache)", and a layer with attention weights but no cache (it reads another
layer's K/V: a draft model's, a KV-sharing layer's) as "attention reading other layers' K/V (no cache)"."""

from __future__ import annotations

import re
from collections import Counter

from kvledger.catalog.modelspec import ModelSpec

__all__ = ["cacheless_layer_kind", "layer_kinds_text"]

_ATTENTION = re.compile(r"q_proj|qkv|self_attn|\.attention\.|\.attn\.")


def cacheless_layer_kind(model: ModelSpec, index: int) -> str:
    """What decoder layer ``index`` (one keeping no cache) holds, in words: from its weights' paths."""
    mine = [w for w in model.weights if re.search(rf"layers\.{index}\.", w.path)]
    if any(w.expert for w in mine):
        return "MoE (no cache)"
    if any(_ATTENTION.search(w.path) for w in mine):
        return "attention reading other layers' K/V (no cache)"
    return "MLP (no cache)"


def layer_kinds_text(model: ModelSpec) -> str:
    """Layers per kind, in the order they first appear: "54 state, 54 MLP (no cache), 10 full" for Nemotron-H-56B."""
    kinds = Counter(cacheless_layer_kind(model, i) if layer is None else layer.kind
                    for i, layer in enumerate(model.layers))
    return ", ".join(f"{n} {k}" for k, n in kinds.items())
