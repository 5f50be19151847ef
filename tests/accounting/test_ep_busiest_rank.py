"""Expert parallelism's fused-MoE term on the busiest rank (moe_rows.py, moe_kernel.py), worked by hand for
DeepSeek-V3 on 8 H200s, and the property that a decode step never gets cheaper as the batch grows."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.accounting.moe_kernel import moe_kernel_fit
from kvledger.accounting.moe_rows import busiest_rank_rows, padded_rows_moments
from kvledger.accounting.moe_terms import ep_read_imbalance
from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


@functools.cache
def _rc(name: str, gpu: str, tp: int, ep: bool):
    s = make_settings(tp=tp, max_model_len=16384, enable_expert_parallel=ep)
    return build_plan(load_model(name), get_gpu(gpu), s, with_advice=False).step_cost()


def test_deepseek_v3_on_8_h200s_with_expert_parallelism_by_hand():
    # DeepSeek-V3: 58 MoE layers of 256 routed experts, top-8, each expert 3 × 7,168 × 2,048 = 44,040,192 FP8 weights
    # + 3 × 56 × 16 fp32 block scales (10,752 B) = 44,050,944 B. EP 8 (vLLM linear placement): n₀ = 32 whole experts
    # per rank and layer, r = 8 ranks that full: 58 × 32 × 44,050,944 = 81,758,552,064 B and W = 58 × 32 × 44,040,192
    # = 81,738,596,352 weights on a GPU, exactly TP 8's 1/8 of every expert. vLLM ships the tuned
    # E=32,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json: 16-row blocks, factor 1.
    # Per step: 58·t0 + max(read / (β·4.8 TB/s), 2·W·(m_b + m½) / (η∞ · 989.5 TFLOP/s)), with the fit's t0 42.64 µs,
    # β 0.85874, η∞ 0.33099, m½ 5.39876 (β·BW = 4.12198e12 B/s, η∞·P16 = 3.27519e14 FLOP/s, 58·t0 = 2.4731 ms).
    rc, tp = _rc("deepseek-ai/DeepSeek-V3", "h200-sxm", 8, True), _rc("deepseek-ai/DeepSeek-V3", "h200-sxm", 8, False)
    assert (rc.ep, rc.moe_layers, rc.expert_bytes, rc.moe_config.tuned) == (8, 58, 81_758_552_064, True)
    assert rc.expert_params_per_token * 256 / 8 == 81_738_596_352
    f = moe_kernel_fit()
    assert (f.floor_s * 1e6, f.read_fraction, f.gemm_efficiency, f.half_tokens) == pytest.approx(
        (42.640, 0.85874, 0.33099, 5.39876), abs=1e-4)
    # batch 1: an expert's c ~ Bernoulli(1/32), padded P = 16·c: E[P] = 0.5, Var[P] = 256 · (1/32)(31/32) = 7.75.
    # A rank's 32 experts: mean 16 rows, variance 32 · 7.75 · (256 − 32)/255 = 217.85 (σ 14.760); the busiest of 8
    # ≈ 16 + 14.760 · √(2 ln 8) = 16 + 14.760 · 2.03933 = 46.100 rows: m_b = 1.44063 per expert.
    # GEMMs: 2 · 81.7386e9 · (1.44063 + 5.39876) / 3.27519e14 = 3.4138 ms. Reads: touched experts on a rank mean 1,
    # σ² = 32 · (1/32)(31/32) · 224/255 = 0.85098: busiest 1 + 0.92249 · 2.03933 = 2.88126 experts, 81.7586e9 ·
    # 2.88126/32 B / 4.12198e12 = 1.7859 ms < 3.4138: GEMM-bound, 2.4731 + 3.4138 = 5.8869 ms.
    assert padded_rows_moments(1, 8, 256, 32, 16) == pytest.approx((0.5, 7.75), rel=1e-12)
    assert busiest_rank_rows(1, 8, 256, 8, 16) == pytest.approx(1.44063, abs=1e-5)
    assert ep_read_imbalance(1, 8, 256, 8) == pytest.approx(2.88126, abs=1e-5)
    assert rc.costs(decode_shape(1, 8192)).moe_kernel_s * 1e3 == pytest.approx(5.8869, abs=2e-4)
    # batch 2: P(c ≥ 1) = 1 − (31/32)² = 0.0615234, P = 16 then: E[P] = 0.984375, E[P²] = 256 · 0.0615234 = 15.75,
    # Var[P] = 14.7810; a rank: mean 31.5, σ² = 32 · 14.7810 · 224/255 = 415.49 (σ 20.384): busiest 31.5 + 41.569 =
    # 73.069 rows, m_b = 2.28341. GEMMs 2 · 81.7386e9 · 7.68217 / 3.27519e14 = 3.8345 ms; reads: busiest 1.96875 +
    # √(32 · 0.0615234 · 0.9384766 · 224/255) · 2.03933 = 4.56682 experts, 11.6679e9 B → 2.8307 ms < 3.8345:
    # 2.4731 + 3.8345 = 6.3076 ms, more than batch 1's 5.8869 (before: 10.05 ms at batch 2 < 11.15 at batch 1, the
    # imbalance scaling the GEMM term's m½ part, which does not grow with the rows).
    assert busiest_rank_rows(2, 8, 256, 8, 16) == pytest.approx(2.28341, abs=1e-5)
    assert rc.costs(decode_shape(2, 8192)).moe_kernel_s * 1e3 == pytest.approx(6.3076, abs=2e-4)
    # batch 64: E[P] = 13.9027, Var[P] = 29.1587 (16-row blocks; c ~ Bin(64, 1/32) above 16 has probability 5e-12);
    # a rank: 444.885 ± √(32 · 29.1587 · 224/255) = 28.630 → busiest 444.885 + 58.386 = 503.27 rows, m_b = 15.7272:
    # GEMMs 2 · 81.7386e9 · 21.1260 / 3.27519e14 = 10.545 ms. Reads: p = 1 − (31/32)^64 = 0.868916, a rank touches
    # 27.8053 of its 32 on average, the busiest 27.8053 + √(32 · 0.868916 · 0.131084 · 224/255) · 2.03933 = 31.4544:
    # 81.7586e9 · 31.4544/32 = 80.364e9 B → 19.496 ms > GEMMs: bandwidth-bound, 2.4731 + 19.496 = 21.970 ms.
    assert busiest_rank_rows(64, 8, 256, 8, 16) == pytest.approx(15.7272, abs=1e-4)
    assert ep_read_imbalance(64, 8, 256, 8) * 0.868916 * 32 == pytest.approx(31.4544, abs=1e-3)
    assert rc.costs(decode_shape(64, 8192)).moe_kernel_s * 1e3 == pytest.approx(21.970, abs=1e-3)
    # TP 8 at batch 64 reads 27.8053 expert-equivalents: 81.7586e9 · 0.868916 B → 17.235 ms + 2.4731 = 19.708 ms; EP
    # pays 31.4544/27.8053 = +13.1% on the expert reads, the whole step (attention, all-reduces the same) +6.5%
    assert tp.costs(decode_shape(64, 8192)).moe_kernel_s * 1e3 == pytest.approx(19.708, abs=1e-3)
    ep_s, tp_s = rc.step_time_s(decode_shape(64, 8192)), tp.step_time_s(decode_shape(64, 8192))
    assert ep_s / tp_s == pytest.approx(1.065, abs=0.002)


MOES = [("deepseek-ai/DeepSeek-V3", "h200-sxm", 8), ("Qwen/Qwen3-235B-A22B", "h200-sxm", 8),
        ("mistralai/Mixtral-8x7B-v0.1", "H100", 4), ("Qwen/Qwen3-30B-A3B", "H100", 2)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(MOES), st.booleans(), st.sampled_from([1024, 8192]), st.integers(1, 256), st.integers(1, 64))
def test_a_decode_step_never_gets_cheaper_with_a_bigger_batch(moe, ep, context, batch, more):
    rc = _rc(*moe, ep)
    small, big = rc.step_time_s(decode_shape(batch, context)), rc.step_time_s(decode_shape(batch + more, context))
    assert big >= small * (1 - 1e-12)
