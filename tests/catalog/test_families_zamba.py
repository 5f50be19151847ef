"""Zamba / Zamba2 (shared attention block at the hybrid layers) read from transformers 5.24's default configs."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.accounting.kvcache import kv_ledger
from kvledger.catalog.modelspec import parse_config

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs"


def _spec(mt):
    return parse_config(json.loads((CONFIGS / f"{mt}.json").read_text()), source=mt)


def test_zamba2_hybrid_layers_keep_a_state_and_their_own_kv():
    # Zamba2 default: 54 layers, 9 of them 'hybrid' (hybrid_layer_ids 6, 12, ..., 51). vLLM models/zamba2.py: one
    # Attention(32 heads, attention_head_dim 160) per hybrid layer, MHA → 9 × 2 × 32 × 160 × 2 B = 184,320 B/token
    # (bf16).
    # Mamba-2 state per layer (MambaStateShapeCalculator.mamba2_state_shape): conv (4 − 1) × (5120 + 2 × 1 × 64) =
    # 15,744,
    # SSM 8 heads × 640 mamba_headdim × 64 d_state = 327,680 → 54 × (15,744 + 327,680) × 2 B = 37,089,792 B per
    # sequence.
    led = kv_ledger(_spec("zamba2"))
    assert led.bytes_per_token == 184_320
    assert led.state_bytes_per_seq == 37_089_792


def test_zamba_v1_reads_attention_head_dim_not_hidden_over_heads():
    # Zamba v1 default: 13 hybrid layers of 16 KV heads × attention_head_dim 464 (over a 2 × 3712 = 7424-wide input),
    # 2 × 13 × 16 × 464 = 193,024 K+V elements per token (the meta-device cache holds the same).
    # State (vLLM Mamba-1 rule): d_inner 2 × 3712 = 7424; conv 7424 × 3 = 22,272, SSM 7424 × 16 = 118,784 per layer.
    spec = _spec("zamba")
    assert sum(layer.kv_elements_per_token(1) for layer in spec.layers) == 193_024
    assert kv_ledger(spec).state_bytes_per_seq == 76 * (22_272 + 118_784) * 2
