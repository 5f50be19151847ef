"""vLLM 0.12–0.17's profile-run workspace under DP × EP, and FlashInfer CUTLASS's chunked (M, K) workspace, hand-worked.

Read in vLLM 0.12.0–0.17.0 ``fused_moe/modular_kernel.py::FusedMoEModularKernel._allocate_buffers``: when the kernel
carries a parallel config with dp_size > 1 and use_ep (``is_dp_ep``), its experts chunk, and the forward has no
attention metadata (the profile's dummy run), it first asks the workspace manager for ``workspace_shapes`` at
VLLM_FUSED_MOE_CHUNK_SIZE = 16,384 rows (workspace13, workspace2 and the output at once), whatever the rows; the
manager's one buffer keeps the larger request. deepep_high_throughput builds the kernel through
``FusedMoEModularMethod.make`` (with the config, 0.13.0–0.17.0; 0.12.0 tests the global config); the FP8 oracle
does for the gathering backends from 0.15.0 (``oracle/fp8.py::make_fp8_moe_kernel``); the unquantized oracle does
not.

Qwen3-30B-A3B (bf16) under EP: whole experts, I = 768, h = 2,048, top-8: a row is 8 × (max(768, 2,048) + max(1,536,
2,048)) × 2 B = 65,536 B of workspace13 + workspace2, and its output row 2,048 × 2 = 4,096 B.
DeepSeek-R1 (block FP8, activations bf16): h = 7,168, FlashInfer CUTLASS's workspace13 and output rows 14,336 B each.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.vllm_all2all import all2all_choice
from kvledger.accounting.vllm_moe_workspace import flashinfer_kept_bytes, profile_full_chunk
from kvledger.accounting.vllm_profile import activation_peak, moe_workspace
from kvledger.catalog.models import load_model


@pytest.fixture(scope="module")
def qwen():
    return load_model("Qwen/Qwen3-30B-A3B")


@pytest.fixture(scope="module")
def r1():
    return load_model("deepseek-ai/DeepSeek-R1")


def test_deepep_ht_profile_reserves_a_whole_chunk(qwen):
    # DP 8 × 1,024 tokens = 8,192 rows, one chunk: the regular call wants 8,192 × 65,536 = 536,870,912 B (output in
    # workspace13), the profile's worst case 16,384 × 65,536 + 16,384 × 4,096 = 1,073,741,824 + 67,108,864
    # = 1,140,850,688 B, the larger kept
    # (0.12.0 and 0.13.0 too: their _allocate_buffers make the same request, 0.12 on the global parallel config;
    # VLLM_FUSED_MOE_CHUNK_SIZE is 16 × 1024 from 0.12.0's envs.py)
    for ver in ((0, 12, 0), (0, 13, 0), (0, 14, 0), (0, 15, 0), (0, 16, 0), (0, 17, 0), (0, 17, 1)):
        assert moe_workspace(qwen, ver, 8192, 1, "sm90", 8, 8, "deepep_high_throughput")[0] == 1_140_850_688
    # 0.11.2's _allocate_buffers has no profile-run reservation
    assert not profile_full_chunk(qwen, (0, 11, 2), 8, 8, "deepep_high_throughput")
    # 65,536 rows, four chunks: the regular call is larger, 16,384 × 65,536 + 65,536 × 4,096 = 1,342,177,280 B
    assert moe_workspace(qwen, (0, 16, 0), 65_536, 1, "sm90", 8, 8, "deepep_high_throughput")[0] == 1_342_177_280
    # 0.18.0 has no chunking: 8,192 × 65,536; the default gathering backend with the unquantized oracle: no config
    assert moe_workspace(qwen, (0, 18, 0), 8192, 1, "sm90", 8, 8, "deepep_high_throughput")[0] == 536_870_912
    assert moe_workspace(qwen, (0, 16, 0), 8192, 1, "sm90", 8, 8, None)[0] == 536_870_912
    # DP 1 (TP 8 + EP): is_dp_ep is False; pplx/deepep_low_latency run batched experts (no chunking)
    assert not profile_full_chunk(qwen, (0, 16, 0), 1, 8, "deepep_high_throughput")
    assert not profile_full_chunk(qwen, (0, 16, 0), 8, 8, "deepep_low_latency")


def test_the_profile_peak_carries_it_on_0_14(qwen):
    # 0.14.0 with deepep_high_throughput: the modular kernel keeps its workspace-manager buffer (not the per-call
    # caches): the peak's workspace words name the whole chunk
    a2a = all2all_choice((0, 14, 0), "deepep_high_throughput")
    _, why = activation_peak(qwen, (0, 14, 0), 1024, 256, 1, arch="sm90", ep=8, dp=8, a2a=a2a)
    assert "+ 1.06 GiB fused-MoE workspaces" in why  # 1,140,850,688 / 2^30 = 1.0625
    assert "whole 16,384-row chunk" in why and "freed after each call" not in why


def test_fp8_oracle_under_dp_ep(r1):
    # 0.16.0, block FP8 on Hopper: FlashInfer CUTLASS; DP 8 × 1,024 = 8,192 rows. Regular: 8,192 × 14,336 =
    # 117,440,512 B; the profile's worst case workspace13 (16,384, K) + output (16,384, K) = 32,768 × 14,336
    # = 469,762,048 B
    assert moe_workspace(r1, (0, 16, 0), 8192, 1, "sm90", 8, 8, None)[:3] == (469_762_048,) * 3
    assert moe_workspace(r1, (0, 16, 0), 8192, 1, "sm90", 8, 8, "deepep_low_latency")[0] == 117_440_512
    # 0.15.0 (not read on Hopper block FP8: Triton's kept, range down to FlashInfer): whole experts I = 2,048, a row
    # 8 × (max(2,048, 7,168) + max(4,096, 7,168)) × 2 = 229,376 B: 16,384 × 229,376 + 16,384 × 14,336
    # = 3,758,096,384 + 234,881,024 = 3,992,977,408 B
    assert moe_workspace(r1, (0, 15, 0), 8192, 1, "sm90", 8, 8, None)[:3] == (3_992_977_408, 469_762_048,
                                                                                3_992_977_408)


def test_flashinfer_chunks_like_the_others(r1):
    # TP 8, no DP: 32,768 rows on 0.16.0 run in two chunks: workspace13 (16,384, K) apart from the output
    # (32,768, K): 49,152 × 14,336 = 704,643,072 B (was 32,768 × 14,336 = 469,762,048); one chunk (8,192 rows)
    # shares them: 117,440,512; 0.19.0 does not chunk: 469,762,048
    pt, lo, hi, why = moe_workspace(r1, (0, 16, 0), 32_768, 8, "sm90")
    assert (pt, lo, hi) == (704_643_072,) * 3 and "49,152 rows" in why
    assert moe_workspace(r1, (0, 16, 0), 8192, 8, "sm90")[0] == 117_440_512
    assert flashinfer_kept_bytes(r1, 32_768, (0, 19, 0)) == 469_762_048
