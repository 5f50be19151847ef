"""The routed experts' fused-MoE workspaces with and without --enable-expert-parallel (vllm_moe_workspace), and the
BLOCK_SIZE_M test on the rank's local experts (moe_kernel.block_m). Values worked by hand from vLLM 0.11.0's shapes:
``fused_moe.py::fused_experts_impl`` (cache13 = M·k·max(N, K), cache2 = M·k·N/2, M = min(tokens, 32,768)),
``TritonExperts.workspace_shapes`` (max(N/2, K) and max(N, K) per pair), N = 2·I_local, K = hidden."""

from __future__ import annotations

import pytest

from kvledger.accounting.moe_kernel import block_m, padded_rows_per_expert
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_moe_workspace import (
    FUSED_MOE_CHUNK_SIZE,
    kept_workspace_bytes,
    moe_local_intermediate,
    moe_workspace_bytes,
    transient_workspace,
    transient_workspace_bytes,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

V11, V19 = (0, 11, 0), (0, 19, 0)


@pytest.fixture(scope="module")
def qwen():
    return load_model("Qwen/Qwen3-30B-A3B")  # E 128, top-8, moe_intermediate_size 768, hidden 2,048, bf16


def test_qwen3_30b_whole_experts_under_ep_take_i_not_i_over_tp(qwen):
    assert (qwen.num_experts, qwen.experts_per_token, qwen.hidden_size, qwen.dtype_bytes) == (128, 8, 2048, 2)
    # I_local: 768 / TP 2 = 384 without EP; under EP the MoE layers' tp_size is 1, so the whole 768
    assert moe_local_intermediate(qwen, 2) == 384 and moe_local_intermediate(qwen, 2, ep=2) == 768
    # 0.11.0 fused_experts_impl at 8,192 tokens, TP 2: N = 2·384 = 768, K = 2,048:
    # cache13 8,192 × 8 × max(768, 2,048) + cache2 8,192 × 8 × 384 = 8,192 × 8 × 2,432 × 2 B = 318,767,104 B
    assert transient_workspace_bytes(qwen, V11, 8192, 2) == 8192 * 8 * 2432 * 2 == 318_767_104
    # EP 2: N = 2·768 = 1,536: 8,192 × 8 × (max(1,536, 2,048) + 768) × 2 B = 8,192 × 8 × 2,816 × 2 = 369,098,752 B
    assert transient_workspace_bytes(qwen, V11, 8192, 2, ep=2) == 8192 * 8 * 2816 * 2 == 369_098_752
    # from 0.15 the kept workspaces: 8,192 × 8 × (max(I_local, 2,048) + max(2·I_local, 2,048)) × 2 B; the hidden size
    # bounds both at TP 2 and EP 2 (384, 768 and 768, 1,536 all under 2,048): 8,192 × 8 × 4,096 × 2 = 536,870,912 B
    assert moe_workspace_bytes(qwen, V19, 8192, 2) == moe_workspace_bytes(qwen, V19, 8192, 2, ep=2) == 536_870_912
    # ... and the per-call caches are not counted there (nor the kept ones before 0.15)
    assert transient_workspace_bytes(qwen, V19, 8192, 2, ep=2) == 0 and moe_workspace_bytes(qwen, V11, 8192, 2) == 0


def test_the_caches_are_sized_for_one_chunk_of_tokens(qwen):
    # VLLM_FUSED_MOE_CHUNK_SIZE 32,768 (vLLM 0.11.0 envs.py): 65,536 tokens run as two chunks over caches of 32,768:
    # 32,768 × 8 × 2,816 × 2 B = 1,476,395,008 B at EP 2
    assert FUSED_MOE_CHUNK_SIZE == 32768
    assert transient_workspace_bytes(qwen, V11, 65536, 2, ep=2) == 32768 * 8 * 2816 * 2 == 1_476_395_008
    b, why = transient_workspace(qwen, V11, 8192, 2, ep=2)
    assert b == 369_098_752 and "fused_moe/fused_moe.py::fused_experts_impl" in why
    assert "VLLM_FUSED_MOE_CHUNK_SIZE" in why and "FusedMoEParallelConfig.make" in why


def test_mixtral_kept_workspace_doubles_and_more_with_whole_experts():
    # Mixtral-8x7B TP 2, 8,192 tokens, top-2, hidden 4,096: I_local 14,336 / 2 = 7,168 without EP:
    # 8,192 × 2 × (7,168 + 14,336) × 2 B = 704,643,072; EP 2, I_local 14,336: 8,192 × 2 × (14,336 + 28,672) × 2 B
    # = 1,409,286,144 (twice: the hidden size bounds neither)
    m = load_model("mistralai/Mixtral-8x7B-v0.1")
    assert kept_workspace_bytes(m, 8192, 2) == 704_643_072
    assert kept_workspace_bytes(m, 8192, 2, ep=2) == 1_409_286_144


def test_the_plan_prints_the_rule_under_ep_at_0_11(qwen):
    # 32,768 batched tokens and 16 sequences: the forward (32,768 × 4 × 2,048 × 2 B = 0.5 GiB of hidden states + the
    # 1.38 GiB of caches above) outgrows the sampler (16 × 151,936 × (2 + 35.95) B + 0.125 GiB of hidden states), so
    # the term's source is the forward's, with the caches' rule
    s = make_settings(tp=2, max_model_len=8192, enable_expert_parallel=True, engine_version="0.11.0",
                      max_num_batched_tokens=32768, max_num_seqs=16)
    act = next(d for d in build_plan(qwen, get_gpu("H100"), s, with_advice=False).memory.deductions
               if d.name == "activation peak")
    assert "fused_experts_impl" in act.source and "whole experts, I 768" in act.source


def test_block_m_takes_the_local_experts_under_ep():
    # try_get_optimal_moe_config passes E = w2_shape[0] = local_num_experts to get_default_config: 128 experts over
    # EP 2 leave 64 on a rank, so a 100-token step (100 > 64) takes BLOCK_SIZE_M 64 where TP alone takes 16
    assert block_m(100, 128) == 16 and block_m(100, 64) == 64
    # c ~ Bin(100, 8/128 = 1/16): with B 64, E[⌈c/64⌉·64] = 64·P(c ≥ 1) (P(c > 64) < 1e-40) = 64·(1 − (15/16)^100)
    # = 63.9004...; the counts stay global (k/E per expert), only the block moves
    assert padded_rows_per_expert(100, 8, 128, 64) == pytest.approx(64 * (1 - (15 / 16) ** 100), rel=1e-9)
    assert padded_rows_per_expert(100, 8, 128, 64) == pytest.approx(63.90, abs=0.01)
    assert padded_rows_per_expert(100, 8, 128) < 17  # 16-row blocks: ≈ 16·(1 − (15/16)^100) + 16·P(c > 16)
