"""Shared experts counted from the standard config keys for a model_type the catalog does not know: a granite-4.0-h-
style config (tests/fixtures/configs/granite-4.0-h-style.json) with ``shared_intermediate_size``."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.catalog.modelspec import parse_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _spec(**over):
    raw = json.loads((FIXTURES / "granite-4.0-h-style.json").read_text())
    return parse_config({**raw, **over}, source="granite-4.0-h-style")


def test_shared_intermediate_size_adds_the_shared_mlp():
    # The shared MLP (vLLM granitemoeshared.py GraniteMoeSharedMLP): input_linear 2 × 8,192 × 4,096 and output_linear
    # 4,096 × 8,192 per layer, in all 40 layers: 40 × 3 × 4,096 × 8,192 = 4,026,531,840 parameters (7.5 GiB in bf16).
    with_shared, without = _spec(), _spec(shared_intermediate_size=0)
    assert with_shared.num_params - without.num_params == 40 * 3 * 4096 * 8192 == 4_026_531_840
    assert round(without.num_params / 1e9, 2) == 31.45  # what plan counted before the shared MLP (the user's figure)


def test_the_note_says_what_was_parsed():
    note = next(n for n in _spec().notes if n.startswith("model_type 'granitemoehybrid'"))
    assert "read as a standard decoder" not in note
    assert ("36 Mamba-2 + 4 attention layers; 72 routed experts (10 per token) + a shared MLP of 8,192") in note


def test_qwen2_moe_and_deepseek_keys_on_an_unknown_type():
    # shared_expert_intermediate_size 8,192: 40 × (3 × 4,096 × 8,192 + a 1 × 4,096 gate) = 4,026,531,840 + 163,840;
    # n_shared_experts 2 × moe_intermediate_size 768 (the routed width): 40 × 3 × 4,096 × 1,536 = 754,974,720.
    base = _spec(shared_intermediate_size=0)
    qwen = _spec(shared_intermediate_size=0, shared_expert_intermediate_size=8192)
    dsk = _spec(shared_intermediate_size=0, n_shared_experts=2, moe_intermediate_size=768)
    assert qwen.num_params - base.num_params == 4_026_531_840 + 163_840
    assert dsk.num_params - base.num_params == 754_974_720
