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
    # The routed experts are priced by the fused-MoE kernel term (moe_kernel.py), whose GEMM efficiency
    # η(m) = η∞·m/(m + m½) takes ``grouped_gemm_half_tokens`` as m½ when set (the fit's 5.60 otherwise): the penalty
    # moves the experts' GEMM time and nothing else.
    from kvledger.accounting.moe_kernel import moe_kernel_fit, padded_rows_per_expert

    base, slow = _roofline(), _roofline(grouped_gemm_half_tokens=16.0)
    f = moe_kernel_fit()
    # experts: 48 layers × 128 × 3 matrices × 2,048 × 768 = 28,991,029,248 weights; top-8 of 128 per token:
    # 28,991,029,248 × 8/128 = 1,811,939,328 expert weights per token
    assert slow.expert_params_per_token == 1_811_939_328
    # a 64-sequence decode step: 64 ≤ 128 experts → BLOCK_M 16; c ~ Bin(64, 1/16), 4 per expert on average, so an
    # expert's padded rows are 16·(P(c > 0) + P(c > 16) + …) = 16·(1 − (15/16)^64) + 16 × 2.7e-7 = 15.742 (the
    # binomial tail summed exactly below, from math.comb, independent of the module's pmf). GEMM FLOPs on padded rows
    # 2 × 1,811,939,328 × (128 × 15.742 / 8) = 0.913 TFLOP at η = 0.339 × 15.742/(15.742 + 16) = 0.168 of 989 TFLOP/s
    # = 5.5 ms, under the touched experts' read (0.98387 × 57.98 GB / (0.860 × 3.35 TB/s) = 19.8 ms): the step is
    # bandwidth-bound in the kernel, so the GEMM penalty is hidden
    dec = StepShape(num_decode_seqs=64, decode_kv_tokens=64 * 1000)
    pmf = [math.comb(64, j) * (1 / 16) ** j * (15 / 16) ** (64 - j) for j in range(65)]
    assert padded_rows_per_expert(64, 8, 128) == pytest.approx(16 * sum(sum(pmf[16 * b + 1:]) for b in range(4)),
                                                               rel=1e-12)
    assert padded_rows_per_expert(64, 8, 128) == pytest.approx(16 * (1 - (15 / 16) ** 64), rel=1e-6)
    assert slow.step_time_s(dec) == base.step_time_s(dec)
    shape = StepShape(num_prefill_tokens=8192, num_prefill_seqs=1, prefill_kv_tokens=8192,
                      prefill_attn_pairs=8192 * 8193 / 2)
    c = slow.costs(shape)
    # the plain expert FLOPs are still recorded (2 × 1,811,939,328 × 8,192), with no imbalance at EP 1
    assert c.expert_flops == 2 * 1_811_939_328 * 8192 and c.expert_time_factor == 1.0
    # 8,192 > 128 → BLOCK_M 64; c ~ Bin(8192, 1/16): mean 512, σ = √(512 × 15/16) = 21.9, so
    # E[⌈c/64⌉·64] = 64·Σ_j P(c > 64 j) ≈ 64 × (7 + 0.998 + 0.49 + 0.002) = 543.3 padded rows per expert
    rows = padded_rows_per_expert(8192, 8, 128)
    assert rows == pytest.approx(543.3, abs=0.2)
    # compute-bound: FLOPs_pad = 2 × 1,811,939,328 × (128 × 543.3 / 8) = 31.5 TFLOP at η∞·m/(m + m½) of the BF16
    # peak, against 57.98 GB / 2.88 TB/s = 20.1 ms of reads; the step grows by exactly
    # FLOPs_pad / (η∞·peak) × (m½_slow − m½_fit) / m
    flops = 2 * 1_811_939_328 * (128 * rows / 8)
    extra = flops / (f.gemm_efficiency * slow.gpu.bf16_flops_per_s) * (16.0 - f.half_tokens) / rows
    assert extra * 1e3 == pytest.approx(1.88, abs=0.01)  # 31.50e12 / (0.3310 × 989.5e12) = 96.2 ms × 10.60 / 543.3
    assert slow.step_time_s(shape) - base.step_time_s(shape) == pytest.approx(extra, rel=1e-9)
    # decode stretches go through the same terms (no fast path skips them)
    assert list(slow.decode_steps_s(8, 4000, 3)) == list(decode_steps_by_loop(slow, 8, 4000, 3))
    assert base.step_time_s(shape) == _roofline(ep=1, grouped_gemm_half_tokens=0.0).step_time_s(shape)
