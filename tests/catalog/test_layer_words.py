"""Layer kinds in words: the plan's model table and ``kvledger models`` name a layer without cache by what it holds."""

from __future__ import annotations

from kvledger.catalog.layer_words import layer_kinds_text
from kvledger.catalog.models import load_model


def test_nemotron_h_mlp_layers_are_named_as_mlp_layers():
    # Nemotron-H-56B: 118 layers, 54 Mamba-2 (M), 54 MLP (-), 10 attention (*); the MLP layers keep no cache
    m = load_model("nvidia/Nemotron-H-56B-Base-8K")
    assert dict(m.layer_counts()) == {"state": 54, "none": 54, "full": 10}  # the JSON keeps the counts' keys
    assert layer_kinds_text(m) == "54 state, 54 MLP (no cache), 10 full"


def test_a_model_whose_layers_all_keep_a_cache_reads_as_before():
    assert layer_kinds_text(load_model("Qwen/Qwen3-30B-A3B")) == "48 full"
