"""vLLM's MLA profile dummy, DeepSeek-V3.2's indexer workspace and FlashInfer's sparse MLA workspace, byte for byte
from the shapes in the 0.11.0 and 0.28.0 wheels (accounting/vllm_mla_profile.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.accounting import vllm_profile as P
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_mla_profile import (
    FLASHINFER_SPARSE_WORKSPACE_BYTES,
    chunked_prefill_workspace_tokens,
    flashinfer_sparse_workspace,
    indexer_workspace_bytes,
    mla_profile,
)
from kvledger.accounting.vllm_sparse_mla import sparse_mla_choice
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config

ROOT = Path(__file__).resolve().parents[2]
V32_16L = ROOT / "benchmarks" / "data" / "public-runs" / "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "model"
V28 = (0, 28, 0)


def _v32_16l():
    return parse_config(json.loads((V32_16L / "config.json").read_text()), source="deepseek_v32_16l64e")


def test_chunked_prefill_workspace_tokens_by_version():
    # min(max(8 × 163,840, 4 × 128 × 64), 65,536) = 65,536, a multiple of 64: 0.28 keeps it.
    assert chunked_prefill_workspace_tokens(V28, 163_840, 128, 64) == 65_536
    # 4,096 tokens: max(32,768, 4 × 256 × 16 = 16,384) = 32,768 under the 64Ki cap.
    assert chunked_prefill_workspace_tokens(V28, 4_096, 256, 16) == 32_768
    # 0.11.0 takes at least max_num_seqs × block: 2,048 × 64 = 131,072 above the cap; 0.28 only rounds to the block.
    assert chunked_prefill_workspace_tokens((0, 11, 0), 1_024, 2_048, 64) == 131_072
    assert chunked_prefill_workspace_tokens(V28, 1_024, 2_048, 64) == 65_536


def test_indexer_workspace_hand_count():
    # T = 40 × 163,840 = 6,553,600 entries: 6,553,600 × 128 FP8 = 838,860,800 B, 6,553,600 × 4 B scales =
    # 26,214,400 B, + 1,048,576 B radix top-k buffer (all multiples of 256) = 866,123,776 B = 0.807 GiB.
    assert indexer_workspace_bytes(163_840, 128) == 866_123_776


def test_v32_profile_terms_tp1_and_tp8():
    m = _v32_16l()
    # kv_b_proj: 128 heads × (128 nope + 128 v) = 32,768 rows; dummy 65,536 × 32,768 × 2 B = 4 GiB at TP 1.
    t = mla_profile(m, V28, 163_840, 128, 64, tp=1)
    assert t.dummy == 65_536 * 32_768 * 2 == 4_294_967_296
    assert t.kept == 866_123_776
    # TP 8: 16 heads per GPU, 4,096 rows: 512 MiB, still above the indexer's 512 MiB logits dummy (equal).
    assert mla_profile(m, V28, 163_840, 128, 64, tp=8).dummy == 536_870_912
    # sparse attention before 0.28 (its backends not read) and any MLA before 0.11: nothing counted
    assert mla_profile(m, (0, 27, 0), 163_840, 128, 64, tp=1) is None
    assert mla_profile(m, (0, 10, 0), 163_840, 128, 64, tp=1) is None


def test_activation_peak_attention_dummy_and_shared_workspace():
    # 2,048 tokens: 4 hidden copies 4 × 2,048 × 7,168 × 2 B = 117,440,512 B beside the 4 GiB dummy; the workspace
    # manager's one buffer is the indexer's 866,123,776 B (the fused-MoE workspaces, 2,048 × 8 × (7,168 + 7,168) × 2 =
    # 469,762,048 B, fit inside it); + the fixed 0.05 GiB.
    m = _v32_16l()
    t = mla_profile(m, V28, 163_840, 128, 64, tp=1)
    peak, why = P.activation_peak(m, V28, 2_048, 128, 1, None, 188, "pytorch", "sm120", 1, t)
    assert peak == 117_440_512 + 4_294_967_296 + 866_123_776 + P.ACTIVATION_FIXED_BYTES
    assert "MLAAttention.forward_impl" in why and "workspace-manager buffer" in why


def test_flashinfer_sparse_workspace_only_for_flashinfer_backends():
    m = _v32_16l()
    sm120 = sparse_mla_choice(m, V28, "sm120", "auto", 1)
    assert flashinfer_sparse_workspace(sm120, V28)[0] == FLASHINFER_SPARSE_WORKSPACE_BYTES == 394 * 1_048_576
    hopper = sparse_mla_choice(m, V28, "sm90", "fp8", 1)  # FLASHMLA_SPARSE: no FlashInfer workspace
    assert flashinfer_sparse_workspace(hopper, V28) == (0, "")


def test_plan_of_the_rtx_pro_6000_record_carries_the_terms():
    # The 16-layer DeepSeek-V3.2 on an RTX PRO 6000 (SM120, FLASHINFER_MLA_SPARSE_SM120), vLLM 0.28.0, 128 seqs,
    # 2,048 tokens: activation peak 117,440,512 + 4,294,967,296 + 866,123,776 B + fixed; CUDA graphs + 413,138,944 B.
    s = make_settings(engine_version="0.28.0", max_num_seqs=128, max_num_batched_tokens=2048,
                      gpu_memory_utilization=0.92, block_size=64)
    p = build_plan(_v32_16l(), get_gpu("RTX PRO 6000 Blackwell Server Edition"), s, with_roofline=False)
    d = {x.name: x for x in p.memory.deductions}
    assert d["activation peak"].bytes == 117_440_512 + 4_294_967_296 + 866_123_776 + P.ACTIVATION_FIXED_BYTES
    assert d["CUDA graphs (estimate)"].bytes == P.cudagraph_estimate(35)[0] + 413_138_944
    assert "_get_workspace_buffer" in d["CUDA graphs (estimate)"].source
