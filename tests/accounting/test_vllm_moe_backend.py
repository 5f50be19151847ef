"""The FP8 MoE kernel each vLLM release picks for block FP8 on Hopper, and the workspace it keeps (vllm_moe_backend)."""

from __future__ import annotations

import pytest

from kvledger.accounting.vllm_profile import moe_workspace
from kvledger.catalog.models import load_model
from kvledger.units import GiB

# DeepSeek-R1 (fp8, 128×128 blocks) at TP 8 over 8,192 tokens: routed intermediate 2,048 / 8 = 256, hidden 7,168,
# top-8. Triton/DeepGEMM kept: 8,192 × 8 × (max(256, 7168) + max(512, 7168)) × 2 B = 1,879,048,192 B (1.75 GiB);
# FlashInfer CUTLASS: workspace13 (M, K) = 8,192 × 7,168 × 2 B = 117,440,512 B (0.109 GiB), workspace2 (0,).
KEPT, FI = 8192 * 8 * (7168 + 7168) * 2, 8192 * 7168 * 2


@pytest.fixture(scope="module")
def r1():
    return load_model("deepseek-ai/DeepSeek-R1")


@pytest.mark.parametrize(("ver", "tp", "want"), [
    ((0, 11, 2), 8, (KEPT, 0, KEPT)),  # DeepGEMM if installed (kept), else Triton's freed caches
    ((0, 13, 0), 8, (0, 0, 0)),  # TP ≥ 8: DeepGEMM off by default, plain Triton fused_experts (freed)
    ((0, 13, 0), 4, (KEPT, 0, KEPT)),  # below TP 8: DeepGEMM when installed
    ((0, 12, 0), 8, (0, 0, KEPT)),  # not read: 0.13.0's rule, widened
    ((0, 14, 1), 8, (KEPT, KEPT, KEPT)),  # the modular kernel for TP: kept
    ((0, 15, 0), 8, (KEPT, FI, KEPT)),  # not read: between 0.14.1 and 0.16.0
    ((0, 16, 0), 8, (FI, FI, FI)),  # FlashInfer CUTLASS first on SM 9.0 block FP8
    ((0, 17, 0), 8, (KEPT, FI, KEPT)),  # not read
    ((0, 19, 0), 8, (KEPT, KEPT, KEPT)),  # Triton first on Hopper block FP8 for TP
])
def test_block_fp8_moe_on_hopper_by_release(r1, ver, tp, want):
    # at TP 4 too: I/TP = 512 and 2·I/TP = 1,024 are both below 7,168, so the same bytes per token-expert pair
    pt, lo, hi, why = moe_workspace(r1, ver, 8192, tp, "sm90")
    assert (pt, lo, hi) == pytest.approx(want) and why.startswith("FP8 MoE")


def test_other_gpus_keep_the_release_gate(r1):
    # Blackwell (sm100) is not this rule's case: moe_workspace_bytes's gate (kept from 0.15) stands
    assert moe_workspace(r1, (0, 14, 1), 8192, 8, "sm100")[:3] == (0.0, 0.0, 0.0)
    assert moe_workspace(r1, (0, 16, 0), 8192, 8, "sm100")[0] == pytest.approx(KEPT)
    assert KEPT / GiB == pytest.approx(1.75)


def test_block_fp8_moe_on_blackwell_from_018(r1):
    # 0.18.0 fused_moe/oracle/fp8.py: FlashInfer TRT-LLM heads the list and supports block FP8 on SM 10.x
    # (experts/trtllm_fp8_moe.py). DeepSeek-R1 has e_score_correction_bias, expert groups and sigmoid scoring:
    # DeepSeek-V3 routing, so the monolithic kernel runs and vLLM keeps no workspace: (0, 0, 0).
    assert moe_workspace(r1, (0, 18, 0), 8192, 8, "sm100")[:3] == (0.0, 0.0, 0.0)
    # 0.19 not read on Blackwell: the range reaches Triton's kept 1.75 GiB.
    assert moe_workspace(r1, (0, 19, 0), 8192, 8, "sm100")[:3] == pytest.approx((0.0, 0.0, KEPT))
    # Qwen3-30B-A3B-FP8 (softmax + renormalize: no DeepSeek-V3 routing) gets the modular kernel, whose only kept
    # buffer is its output (M, K): 8,192 × 2,048 × 2 B = 33,554,432 B.
    qwen = load_model("Qwen/Qwen3-30B-A3B-FP8")
    pt, lo, hi, why = moe_workspace(qwen, (0, 18, 0), 8192, 1, "sm100")
    assert (pt, lo, hi) == (8192 * 2048 * 2,) * 3 == (33_554_432,) * 3 and "modular" in why
    # Hopper keeps its own rule at 0.18 (Triton first, kept).
    assert moe_workspace(r1, (0, 18, 0), 8192, 8, "sm90")[0] == pytest.approx(KEPT)


def test_block_fp8_moe_on_hopper_under_expert_parallelism(r1):
    # vLLM 0.19.0–0.33.0 fused_moe/oracle/fp8.py: "On Hopper for Block Fp8, prefer Triton for TP and FI CUTLASS for
    # EP": with --enable-expert-parallel at TP 8 (EP 8, DP 1) FlashInfer CUTLASS runs and keeps only its (M, K)
    # workspace, 8,192 × 7,168 × 2 B = 117,440,512 B (0.109 GiB), not Triton's 1.75 GiB (which the TP-only rule keeps)
    for ver in ((0, 19, 0), (0, 28, 0), (0, 33, 0)):
        pt, lo, hi, why = moe_workspace(r1, ver, 8192, 8, "sm90", ep=8)
        assert (pt, lo, hi) == (FI, FI, FI) == (117_440_512,) * 3 and "FI CUTLASS for EP" in why
        assert moe_workspace(r1, ver, 8192, 8, "sm90")[0] == pytest.approx(KEPT)  # TP alone: Triton
    # before 0.19 not read for EP: the TP rule stands (0.18: Triton, kept over I_local = 2,048 whole experts);
    whole = 8192 * 8 * (max(2048, 7168) + max(4096, 7168)) * 2  # = KEPT: I = 2,048 is below hidden either way
    assert moe_workspace(r1, (0, 18, 0), 8192, 8, "sm90", ep=8)[0] == pytest.approx(whole) == pytest.approx(KEPT)
    # DP 8 over TP 1 (EP 8): the oracle looks at ep_size only, FlashInferExperts accepts DP (0.19.0, 0.33.0), and its
    # M is the 8 × 8,192 = 65,536 rows gathered from the DP ranks: 65,536 × 7,168 × 2 B = 939,524,096 B (0.875 GiB)
    assert moe_workspace(r1, (0, 33, 0), 65536, 1, "sm90", ep=8)[:3] == (939_524_096,) * 3


def test_deepseek_v3_tp8_ep_on_h200_gains_the_triton_workspace_back():
    # the plan at vLLM 0.33.0: TP 8 keeps Triton's 1.75 GiB; TP 8 + EP FlashInfer's 0.109 GiB, so 1,761,607,680 B
    # (1.64 GiB) more for KV: 42.26 → 43.90 GiB, and 1,761,607,680 ÷ (16 × 70,272 B) = 1,566.8 more blocks
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpu_file import resolve_gpu

    dsv3, h200 = load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200")
    tp = build_plan(dsv3, h200, make_settings(tp=8)).memory
    ep = build_plan(dsv3, h200, make_settings(tp=8, enable_expert_parallel=True)).memory
    assert ep.available_kv_bytes - tp.available_kv_bytes == pytest.approx(KEPT - FI, abs=1)
    assert (round(tp.available_kv_bytes / GiB, 2), round(ep.available_kv_bytes / GiB, 2)) == (42.26, 43.90)
    assert ep.num_gpu_blocks - tp.num_gpu_blocks in (1566, 1567)
