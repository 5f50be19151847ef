"""MoE step terms worked by hand: tokens per expert, grouped-GEMM efficiency, expert-parallel imbalance and all-to-all,
and what they add to a Qwen3-30B-A3B prefill step on the roofline."""

from __future__ import annotations

import math

import pytest

from kvledger.accounting.moe_terms import ep_all_to_all_bytes, ep_imbalance, grouped_gemm_efficiency, tokens_per_expert
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop


def test_tokens_per_expert_and_grouped_gemm_efficiency():
    # 256 tokens, top-8 of 128 experts: 256·8/128 = 16 tokens per expert; at m½ = 16 the GEMM runs at half rate
    assert tokens_per_expert(256, 8, 128) == 16.0
    assert grouped_gemm_efficiency(16.0, 16.0) == 0.5 and grouped_gemm_efficiency(16.0, 0.0) == 1.0


def test_expert_parallel_imbalance_and_all_to_all():
    # 64 tokens × top-8 = 512 pairs over 8 ranks: μ = 64, σ² = 512·(1/8)·(7/8) = 56, √(2 ln 8) = 2.0393;
    # busiest rank ≈ 64 + 7.4833·2.0393 = 79.261 → 79.261/64 = 1.23845
    assert ep_imbalance(64, 8, 8) == pytest.approx((64 + math.sqrt(56) * math.sqrt(2 * math.log(8))) / 64)
    assert ep_imbalance(64, 8, 8) == pytest.approx(1.23845, abs=1e-5)
    assert ep_imbalance(64, 8, 1) == 1.0  # TP only: every GPU holds a slice of every expert
    # 10 tokens × 8 experts × 2,048 hidden × 2 B, there and back, 3 of 4 ranks remote: 2·10·8·2048·2·3/4 = 491,520 B
    assert ep_all_to_all_bytes(10, 8, 2048, 2, 4) == 491_520.0


def _roofline(**kw):
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    plan = build_plan(load_model("Qwen/Qwen3-30B-A3B"), get_gpu("H100"), make_settings(max_model_len=8192),
                      with_advice=False)
    return RooflineStepCost(plan.model, plan.gpu, plan.kv, 1, **kw)


def test_a_prefill_step_pays_the_small_gemm_penalty_on_its_expert_flops_only():
    base, slow = _roofline(), _roofline(grouped_gemm_half_tokens=16.0)
    # experts: 48 layers × 128 × 3 matrices × 2,048 × 768 = 28,991,029,248 weights; top-8 of 128 per token:
    # 28,991,029,248 × 8/128 = 1,811,939,328 expert weights per token
    assert slow.expert_params_per_token == 1_811_939_328
    # a 2,048-token step reads every expert (61 GB: 22.7 ms at 0.8 × 3.35 TB/s) in less time than its FLOPs take
    # (2 × 3.35e9 × 2,048 / (0.7 × 989 TFLOP/s) = 19.8 ms): bandwidth-bound, the GEMM penalty is hidden
    small = StepShape(num_prefill_tokens=2048, num_prefill_seqs=1, prefill_kv_tokens=2048,
                      prefill_attn_pairs=2048 * 2049 / 2)
    assert slow.step_time_s(small) == base.step_time_s(small)
    shape = StepShape(num_prefill_tokens=8192, num_prefill_seqs=1, prefill_kv_tokens=8192,
                      prefill_attn_pairs=8192 * 8193 / 2)
    c = slow.costs(shape)
    # m = 8192·8/128 = 512 tokens per expert; η = 512/(512 + 16); the expert FLOPs take 1/η = 528/512 = 1.03125×
    assert c.expert_flops == 2 * 1_811_939_328 * 8192 and c.expert_time_factor == pytest.approx(528 / 512)
    p = slow.peak_flops * slow.flops_fraction
    # an 8,192-token prefill is compute-bound, so the step grows by exactly the extra expert time
    assert slow.step_time_s(shape) - base.step_time_s(shape) == pytest.approx(c.expert_flops * (528 / 512 - 1) / p)
    # decode stretches go through the same terms (no fast path skips them)
    assert list(slow.decode_steps_s(8, 4000, 3)) == list(decode_steps_by_loop(slow, 8, 4000, 3))
    assert base.step_time_s(shape) == _roofline(ep=1, grouped_gemm_half_tokens=0.0).step_time_s(shape)
