"""DeepSeek-V3.2 sparse attention in the step cost: the indexer scores every cached token, the MLA reads the top-k."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import decode_shape, prefill_shape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config

CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v32.json"


def _models():
    raw = json.loads(CONFIG.read_text())
    dense = {k: v for k, v in raw.items() if not k.startswith("index_") and k != "layer_types"} | {
        "model_type": "deepseek_v3"}
    return parse_config(raw, source="deepseek_v32"), parse_config(dense, source="deepseek_v32 without its indexer")


def _cost(m):
    return RooflineStepCost(m, get_gpu("H200"), kv_ledger(m, "auto", tp=8), 8)


def test_v32_config_fields_reach_every_layer():
    dsa, dense = _models()
    assert {(sp.index_topk, sp.index_n_heads, sp.index_head_dim) for sp in dsa.layers} == {(2048, 64, 128)}
    assert {sp.index_topk for sp in dense.layers} == {0}


def test_decode_step_at_batch_64_context_32k_with_and_without_the_indexer():
    # H200 (989.5 TFLOP/s bf16, 1,979 fp8, 4.8 TB/s), TP 8, bf16 KV, 61 MLA layers, 16 heads per GPU.
    # Absorbed MLA per (query, key) pair per layer: 2·16·(512 + 64) + 2·16·512 = 34,816 FLOP; × 61 = 2,123,776.
    # Decode batch 64 at 32,768 tokens: 2,097,152 (query, key) pairs.
    # Without the indexer (dense MLA): 2,123,776 × 2,097,152 = 4,453,881,085,952 FLOP;
    #   KV read 61 × 576 × 2 B = 70,272 B/token × 2,097,152 = 147,371,065,344 B.
    # With DSA: the MLA sees min(2,097,152, 64 × 2,048 = 131,072) pairs: 2,123,776 × 131,072 = 278,367,567,872 FLOP;
    #   the indexer 2 × 64 × (128 + 1) = 16,512 FP8 FLOP per pair per layer, × 61 = 1,007,232, at the bf16 rate
    #   ÷ 2 (989.5 / 1,979) = 503,616 per pair × 2,097,152 = 1,056,159,301,632 bf16-rate FLOP;
    #   KV read: indexer keys 61 × 132 = 8,052 B × 2,097,152 tokens = 16,886,267,904 B, plus top-k latents
    #   70,272 B × 131,072 = 9,210,691,584 B: 26,096,959,488 B (5.6× less than dense).
    dsa, dense = _models()
    cd = _cost(dense).costs(decode_shape(64, 32_768))
    assert cd.attn_flops == pytest.approx(2_123_776 * 2_097_152)
    assert cd.kv_bytes == pytest.approx(147_371_065_344)
    rc = _cost(dsa)
    c = rc.costs(decode_shape(64, 32_768))
    assert c.attn_flops == pytest.approx(278_367_567_872 + 1_056_159_301_632)
    assert c.kv_bytes == pytest.approx(16_886_267_904 + 9_210_691_584)
    # attention time at 70% / 80%: max(1.33453e12 / 692.65e12 = 1.93 ms,
    # 26.097e9 / 3.84e12 = 6.796 ms) (bandwidth-bound),
    # against 147.37e9 / 3.84e12 = 38.38 ms dense
    assert rc.attention_s(c) == pytest.approx(26_096_959_488 / 3.84e12)
    assert _cost(dense).attention_s(cd) == pytest.approx(147_371_065_344 / 3.84e12)


def test_prefill_indexer_is_quadratic_and_the_mla_bounded_by_topk():
    # One 8,192-token prompt: 8,192 × 8,193 / 2 = 33,558,528 causal pairs. The indexer scores all of them:
    # 503,616 × 33,558,528 = 16,900,611,637,248; the MLA at most 2,048 keys per query:
    # min(33,558,528, 2,048 × 8,192 = 16,777,216) pairs × 2,123,776 = 35,631,048,687,616. Doubling the prompt to
    # 16,384 quadruples (≈) the indexer's pairs (134,225,920) but only doubles the MLA's (33,554,432).
    dsa, _ = _models()
    rc = _cost(dsa)
    c8, c16 = rc.costs(prefill_shape(8192)), rc.costs(prefill_shape(16_384))
    assert c8.prefill_attn_flops == pytest.approx(503_616 * 33_558_528 + 2_123_776 * 16_777_216)
    assert c16.prefill_attn_flops == pytest.approx(503_616 * 134_225_920 + 2_123_776 * 33_554_432)
    assert c8.matmul_flops == pytest.approx(2 * rc.matmul_params * 8192 + rc.head_flops_per_seq)  # no kv_b re-expansion
