"""A speculative verification step on MLA models: vLLM's MLA backends take spec-as-decode (query_len_support UNIFORM /
VARLEN → reorder_batch_threshold = 1 + num_speculative_tokens, mla_attention.py MLACommonMetadataBuilder, read in 0.19
and 0.33), so the k+1 tokens run the absorbed decode path, not the prefill path with the context re-expanded."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_spec_verify import verify_runs_as_decode, verify_step_costs
from kvledger.analyses.judgments.spec_decode import DraftSpec, SpecDecodeModel
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


@pytest.fixture(scope="module")
def dsv3():
    plan = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H200"), make_settings(tp=8), with_advice=False)
    return SpecDecodeModel(plan, DraftSpec("fraction", "MTP head", 0.05), 1, 0.85)


def test_rule_by_version_and_backend():
    # FLASH_ATTN_MLA (VARLEN) / FLASHMLA (UNIFORM) on SM90 and FLASHINFER_MLA (UNIFORM) on SM100 from 0.17;
    # TRITON_MLA (other GPUs) SINGLE_ONLY in 0.19, UNIFORM in 0.33; 0.11's FlashMLA builder keeps threshold 1
    assert verify_runs_as_decode("vllm", "0.19.0", "sm90", True)[0]
    assert verify_runs_as_decode("vllm", "0.33.0", "sm100", True)[0]
    assert not verify_runs_as_decode("vllm", "0.19.0", "sm80", True)[0]
    assert verify_runs_as_decode("vllm", "0.33.0", "sm80", True)[0]
    assert not verify_runs_as_decode("vllm", "0.11.0", "sm90", True)[0]
    assert verify_runs_as_decode("vllm", "0.33.0", "sm90", False) == (False, "")


def test_dsv3_verification_hand_worked(dsv3):
    # DeepSeek-V3, TP 8: 8 sequences of 8,192 KV tokens each verify k+1 = 2 tokens (16 query tokens).
    # GEMMs: active params 37,552,297,472 less embed and lm_head (129,280 × 7,168 = 926,679,040 each) over TP 8 =
    # 4,462,367,424 per token; 2 × that × 16 = 142,795,757,568; logits at all 16 positions: 2 × 926,679,040 / 8 × 16
    # = 3,706,716,160; total 146,502,473,728 FLOP and no kv_b_proj re-expansion of the context.
    # Attention (absorbed): 16 heads per GPU × (2·(512 + 64) + 2·512) × 61 layers = 2,123,776 FLOP per pair; pairs
    # 8 × (2 × 8,192 + 1) = 131,080 → 278,384,558,080 FLOP.
    # KV read once per sequence: 8 × (8,192 + 1) tokens × 70,272 B = 4,605,907,968 B.
    c = verify_step_costs(dsv3.rc, 8, 8 * 8192, 1, as_decode=True)
    assert c.matmul_flops == 146_502_473_728
    assert c.attn_flops == 278_384_558_080
    assert c.kv_bytes == 4_605_907_968 and c.prefill_kv_bytes == 0
    # the prefill path (vLLM 0.11) adds the context's re-expansion: 2 × 512 × 16 × (128 + 128) × 61 = 255,852,544 FLOP
    # per cached token, over 8 × 8,191 = 65,528 tokens before the verified ones
    old = verify_step_costs(dsv3.rc, 8, 8 * 8192, 1, as_decode=False)
    assert old.matmul_flops - c.matmul_flops == 255_852_544 * 65_528


def test_dsv3_verification_no_dearer_than_plain_step_of_same_tokens(dsv3):
    # verifying 2 tokens for b sequences puts the same 2b tokens through the GEMMs and experts as a plain step of 2b
    # sequences, and reads half their KV: it cannot cost more (before: 24.89 ms against 14.76 ms at b = 8, 8K)
    assert dsv3.verify_as_decode
    for b in (1, 8, 32):
        verify = dsv3.rc.time_s(dsv3.verify_costs(b, 8192))
        plain = dsv3.rc.time_s(dsv3.rc.costs(decode_shape(2 * b, 8192)))
        assert verify <= plain
    assert any(n.startswith("verification: vLLM 0.33.0 on sm90") for n in dsv3.notes)
