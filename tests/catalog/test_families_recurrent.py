"""Recurrent models (RWKV-4, xLSTM, RecurrentGemma) plan with transformers' own per-sequence state and no per-token
K/V."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.accounting.kvcache import kv_ledger
from kvledger.catalog.modelspec import parse_config

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs"


def _ledger(mt):
    return kv_ledger(parse_config(json.loads((CONFIGS / f"{mt}.json").read_text()), source=mt))


def test_rwkv_state_is_five_hidden_vectors_per_layer():
    # RwkvConfig default: hidden 4096, 32 layers. transformers' state: 5 tensors of (batch, 4096, 32 layers) — two token
    # shifts and the WKV numerator, denominator and maximum: 32 × 5 × 4096 × 2 B (bf16) = 1,310,720 B per sequence.
    led = _ledger("rwkv")
    assert led.bytes_per_token == 0
    assert led.state_bytes_per_seq == 1_310_720


def test_xlstm_state_is_the_mlstm_matrix_memory():
    # xLSTMConfig default: hidden 4096, 8 heads, qk_dim 4096 × 0.5 = 2048 (256 per head), v_dim 4096 (512 per head).
    # xLSTMCache per layer: C 8 × 256 × 512 = 1,048,576, n 8 × 256 = 2,048, m 8 → 1,050,632; × 32 layers × 2 B =
    # 67,240,448 B.
    led = _ledger("xlstm")
    assert led.bytes_per_token == 0
    assert led.state_bytes_per_seq == 67_240_448


def test_recurrent_gemma_local_attention_and_rg_lru_state():
    # 26 layers cycling (recurrent, recurrent, attention): 8 attention layers, 18 recurrent. Attention: 10 KV heads ×
    # 256,
    # window 2048: 8 × 2 × 10 × 256 × 2 B = 81,920 B/token for at most 2,048 tokens. Recurrent: conv (4 − 1) × 2560 +
    # RG-LRU 2560 = 10,240 elements per layer: 18 × 10,240 × 2 B = 368,640 B per sequence.
    led = _ledger("recurrent_gemma")
    assert led.bytes_per_token == 81_920
    assert led.state_bytes_per_seq == 368_640
    assert {g.spec.window_tokens for g in led.groups if g.kind == "sliding_window"} == {2048}


def test_state_only_and_hybrid_configs_plan_through_the_cli_with_strict_json():
    # End to end: vLLM's rules for a state-only model (RWKV: no KV, one state page per request) and a hybrid one
    # (Zamba2 with prefix caching at TP 2), strict JSON out; KV per token as the ledgers above (Zamba2 at TP 2:
    # 32 heads / 2 = 16 per GPU → 9 × 2 × 16 × 160 × 2 B = 92,160 B/token).
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    def strict(text):
        return json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))

    r = CliRunner().invoke(app, ["plan", str(CONFIGS / "rwkv.json"), "--gpu", "H100", "--json"], catch_exceptions=False)
    assert r.exit_code == 0 and strict(r.stdout)["model"]["kv_bytes_per_token"] == 0
    r = CliRunner().invoke(app, ["plan", str(CONFIGS / "zamba2.json"), "--gpu", "H100", "--tp", "2",
                                 "--enable-prefix-caching",
                                 "--json"], catch_exceptions=False)
    assert r.exit_code == 0 and strict(r.stdout)["kv"]["bytes_per_token_per_gpu"] == 92_160
