"""``spec-decode --draft-model mtp``: DeepSeek-V3's MTP layer (num_nextn_predict_layers 1) as vLLM loads it, its
weights and its KV out of the pool, by hand.

Per GPU at TP 8 (FP8 e4m3 with an fp32 scale per 128 × 128 block; vLLM's DeepSeekMTP, module doc of spec_mtp.py):

* the MTP block, one MoE decoder layer as the target's layer 60: routed experts 3 × 256 × (2,048 × 7,168 B + 16 × 56
  × 4 B of scales) ÷ 8 = 1,409,630,208 B; attention, shared expert, gate and norms 45,853,344 B (q_a 11,012,736 and
  kv_a 4,129,888 whole; q_b 4,719,744, kv_b 2,097,664, o 14,683,648 and the shared expert 3 × 1,835,456 split; gate
  3,670,016 + 512 B; norms 3,072 + 1,024 + 2 × 14,336): 1,455,483,552 B
* eh_proj, nn.Linear(2 × 7,168 → 7,168) in bf16, whole on every GPU: 2 × 7,168 × 7,168 × 2 B = 205,520,896 B
* enorm, hnorm, shared_head.norm: 3 × 7,168 × 2 B = 43,008 B
* vLLM 0.33.0 shares the target's embedding and LM head: 1,661,047,456 B (1.547 GiB) in all; 0.19.0 keeps its own
  head, 129,280 × 7,168 × 2 B ÷ 8 = 231,669,760 B more: 1,892,717,216 B
* KV: one more MLA layer a token, (512 + 64) × 2 B = 1,152 B, beside the target's 61 × 1,152 = 70,272 B
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.judgments.spec_decode import SpecDecodeModel
from kvledger.analyses.judgments.spec_decode_summary import make_draft
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

V3 = load_model("deepseek-ai/DeepSeek-V3")


def _model(version: str) -> SpecDecodeModel:
    plan = build_plan(V3, get_gpu("H200"), make_settings(tp=8, engine_version=version), with_advice=False)
    return SpecDecodeModel(plan, make_draft("mtp", None, V3), 1, 0.8)


def test_mtp_draft_weights_and_kv_come_out_of_the_pool():
    assert V3.num_nextn_predict_layers == 1
    sm = _model("0.33.0")
    assert sm.draft.kind == "model" and sm.draft.mtp and "MTP (1 layer, vLLM method mtp)" in sm.draft.name
    assert sm.draft_weight_bytes == 1_455_483_552 + 205_520_896 + 43_008 == 1_661_047_456
    assert sm.draft_kv_bytes_per_token == 1152 and sm.plan.kv.bytes_per_token == 70_272
    m = sm.plan.memory
    # blocks of 16 tokens at (70,272 + 1,152) B a token, from the pool less the MTP weights
    assert sm.pool_blocks() == (m.available_kv_bytes - 1_661_047_456) // ((70_272 + 1_152) * 16)
    assert sm.pool_blocks() < m.num_gpu_blocks
    # the --draft-cost-fraction form (a head priced as a share of the step) took nothing from the pool
    frac = SpecDecodeModel(sm.plan, make_draft(None, 0.05, V3), 1, 0.8)
    assert frac.pool_blocks() == m.num_gpu_blocks


def test_vllm_019_keeps_the_mtp_head_its_own():
    assert _model("0.19.0").draft_weight_bytes == pytest.approx(1_661_047_456 + 231_669_760)


def test_a_model_without_mtp_layers_is_refused():
    llama = load_model("meta-llama/Llama-3.1-8B")
    with pytest.raises(InputError, match="has no MTP layers \\(its config's num_nextn_predict_layers is absent or 0"):
        make_draft("mtp", None, llama)
