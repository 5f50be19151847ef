"""The measured matmul efficiency (accounting/gemm_efficiency.py): one point worked by hand from Vidur's CSV rows, the
regression worked by hand on three synthetic shapes, and the roofline's compute term priced with the curve."""

from __future__ import annotations

import math
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.accounting.gemm_efficiency import curve_points, fit_curve, gemm_curve
from kvledger.accounting.op_profiles import PROFILED_GPU
from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.catalog.gpus import get_gpu

H100 = "nvidia_h100_sxm"


def _vidur(path: str) -> Path:
    return Path(str(resources.files("kvledger.accounting") / "data" / "profiling" / "vidur" / "compute" / path))


def test_one_point_of_the_h100_curve_from_the_csv_rows():
    # h100/meta-llama/Llama-2-7b-hf/mlp_median.csv, TP 1 (d 4096, 32 heads, 32 KV heads, FFN 11008 gated):
    #   Σ N·K = 12288·4096 (QKV) + 4096·4096 (out) + 22016·4096 (up+gate) + 4096·11008 (down) = 202,375,168
    #   Σ (N + K) = 16384 + 8192 + 26112 + 15104 = 65,792
    # row num_tokens 384: attn_pre_proj 0.071, attn_post_proj 0.028, mlp_up_proj 0.142, mlp_down_proj 0.063 ms
    #   → t = 0.304 ms, F = 2·384·202,375,168 = 1.5542e11 FLOP, e = F / (989.5e12 FLOP/s · 0.304e-3 s) = 0.51669
    # row num_tokens 1: 0.038 + 0.016 + 0.064 + 0.038 = 0.156 ms; W(1) = 2·202,375,168 + 2·65,792 = 404,881,920 B
    #   → b₁ = W(1) / (3.35e12 B/s · 0.156e-3 s) = 0.7747 (the GEMV's bandwidth share)
    # row num_tokens 64: 0.040 + 0.016 + 0.066 + 0.040 = 0.162 ms, the weight read at b₁ W(64)/(BW·b₁) =
    #   413,171,712 / (3.35e12 · 0.7747) = 0.1592 ms, × 1.1 = 0.1751 ms > 0.162: the read explains it, not kept
    g = get_gpu(H100)
    pts = curve_points(_vidur("h100/meta-llama/Llama-2-7b-hf/mlp_median.csv"), g.bf16_flops_per_s,
                       g.hbm_bandwidth_bytes_per_s)
    tp1 = {m: (nk, e) for m, nk, e, _ in pts if nk == 202_375_168}
    assert tp1[384] == (202_375_168, pytest.approx(0.51669, abs=1e-4))
    assert 64 not in tp1 and min(tp1) == 72


def test_the_regression_over_shapes_by_hand():
    # three shapes at ΣNK = 2^26, 2^27, 2^28 (x = log2 NK − 27 = −1, 0, +1) measured at M = 256 and M = 1024, two
    # points each: e = 0.30, 0.40, 0.50 at 256 (a = 0.40, slope 0.10 per doubling) and 0.60, 0.65, 0.70 at 1024
    # (a = 0.65, slope 0.05). At M = 512 (half way in log2 M) and NK = 2^28: ½(0.40 + 0.10) + ½(0.65 + 0.05) = 0.60;
    # below 256 it holds 256's value; NK past the measured range is clamped (2^30 → 2^28).
    pts = [(m, float(2 ** (27 + x)), e, f"s{x}") for m, es in ((256, (0.30, 0.40, 0.50)), (1024, (0.60, 0.65, 0.70)))
           for x, e in zip((-1, 0, 1), es) for _ in range(2)]
    c = fit_curve("test", pts)
    assert c.grid == (256, 1024)
    assert c.efficiency(512, 2 ** 28) == pytest.approx(0.60)
    assert c.efficiency(16, 2 ** 27) == pytest.approx(0.40)
    assert c.efficiency(512, 2 ** 30) == pytest.approx(c.efficiency(512, 2 ** 28))


def test_the_bundled_curves_and_their_leave_one_shape_out_error():
    # measured neighbours of Llama-3.1-8B TP 1 (ΣNK = 4096·(4096 + 2·1024 + 4096 + 3·14336) = 218,103,808) on the
    # H100 at 384 tokens: Llama-2-7B TP 1 (202M) 0.52, Qwen-72B TP 4 (218M) 0.46, Llama-2-70B TP 4 (214M) 0.52
    h = gemm_curve(H100)
    assert 0.44 < h.efficiency(384, 218_103_808) < 0.54
    assert h.efficiency(4096, 218_103_808) > 0.65 and h.efficiency(384, 25e6) < h.efficiency(384, 8e8)
    assert h.loso_abs < 0.05 and gemm_curve("nvidia_a100_80gb_sxm").loso_abs < 0.04
    assert gemm_curve("nvidia_l40s") is None  # Ada: no profile, no twin


def test_the_roofline_prices_the_weight_matmuls_by_the_curve_and_flat_is_unchanged():
    args = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none", max_model_len=8192)
    flat = prepare(SimRequestArgs(**args, gemm_efficiency="flat")).cost
    meas = prepare(SimRequestArgs(**args, gemm_efficiency="measured")).cost
    assert flat.gemm_curve is None and meas.flops_fraction == 1.0  # no fraction given: the curve as measured
    default = prepare(SimRequestArgs(**args)).cost  # no flag, no GPU profile: measured where Vidur profiled the GPU
    assert default.gemm_curve is meas.gemm_curve and default.flops_fraction == 1.0
    shape = StepShape(384, 2, 384, 384 * 385 / 2, 0, 0)  # two 192-token prompts: matmuls compute-bound
    c = meas.costs(shape)
    e = gemm_curve(H100).efficiency(384, meas.gemm_nk)
    # the roofline's per-layer parameters also count the two RMSNorm weights (2·4096) and the final norm's share
    assert c.matmul_efficiency == e and math.isclose(meas.gemm_nk, 218_103_808, rel_tol=1e-4)
    gemm = c.matmul_flops / (meas.peak_flops * e)
    assert gemm > c.weight_bytes / (meas.bw * meas.bandwidth_fraction)
    # + the layers' norm, RoPE, activation and add kernels the measured pricing adds (test_layer_kernels.py)
    assert meas.step_time_s(shape) == pytest.approx(gemm + c.layer_kernels_s + meas.attention_s(c), rel=1e-12)
    assert flat.costs(shape).matmul_efficiency == 1.0


@settings(max_examples=60, deadline=None)
@given(pf=st.integers(0, 9000), seqs=st.integers(1, 8), cached=st.integers(0, 4000), n=st.integers(0, 300),
       kv=st.integers(0, 400_000))
def test_the_plain_form_with_the_curve_is_the_full_step_bit_for_bit(pf, seqs, cached, n, kv):
    # step_time_of (the simulator's hot path and the compiled core's form) divides the matmul term by the token
    # term's efficiency exactly as time_s(costs(shape)) does: the same float, whatever the step
    meas = _measured_cost()
    shape = StepShape(pf, seqs if pf else 0, pf + cached if pf else 0, (pf * (pf + 1) / 2 + pf * cached) if pf else 0,
                      n, kv if n else 0)
    if pf + n == 0:
        return
    assert meas.step_consts() is not False
    assert meas.step_time_s(shape) == meas.time_s(meas.costs(shape))


_CACHE: dict = {}  # the cost, built once (hypothesis calls the test many times)


def _measured_cost():
    if "c" not in _CACHE:
        args = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none",
                    max_model_len=8192, gemm_efficiency="measured")
        _CACHE["c"] = prepare(SimRequestArgs(**args)).cost
    return _CACHE["c"]


@pytest.mark.parametrize("gpu_id", sorted(PROFILED_GPU))
def test_the_bundled_curve_is_the_fit_of_the_bundled_profiles(gpu_id):
    # gemm_curve reads data/gemm_curves.json (benchmarks/build_gemm_curves.py --write) instead of fitting Vidur's
    # CSVs at every start-up: the file must hold exactly what fit_gemm_curve computes from them, float for float
    from kvledger.accounting.gemm_efficiency import fit_gemm_curve

    assert gemm_curve(gpu_id) == fit_gemm_curve(gpu_id)


def test_a_flop_fraction_given_alone_is_a_flat_share_of_peak():
    # --achievable-flops-fraction 0.6 without --gemm-efficiency means what its help says, 60% of peak for every matmul
    # (flat), not 0.6 × a curve the user did not ask for; with --gemm-efficiency measured it scales the curve
    args = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", num_requests=5, gpu_profile="none", max_model_len=8192,
                achievable_flops_fraction=0.6)
    setup = prepare(SimRequestArgs(**args))
    alone = setup.cost
    scaled = prepare(SimRequestArgs(**args, gemm_efficiency="measured")).cost
    # and the step-cost line says so, with the curve's span for this model (its grid's ends: 192 and 4,096 tokens)
    assert "--achievable-flops-fraction given alone is a share of peak for every matmul" in setup.cost_info["source"]
    assert "(37%–71% of peak for this model" in setup.cost_info["source"]
    flat = prepare(SimRequestArgs(**{**args, "achievable_flops_fraction": None}, gemm_efficiency="flat"))
    said = "flat (--gemm-efficiency flat): every matmul at the FLOP fraction of peak and no layer-kernel term; this"
    assert said in flat.cost_info["source"]
    assert alone.gemm_curve is None and alone.flops_fraction == 0.6
    assert scaled.gemm_curve is not None and scaled.flops_fraction == 0.6
    shape = StepShape(384, 2, 384, 384 * 385 / 2, 0, 0)
    # 384 tokens: flat at 0.6 of peak; measured at 0.6 × e(384, 218M) ≈ 0.6 × 0.48 of peak, about twice the time
    assert 1.8 < scaled.costs(shape).matmul_flops / (scaled.peak_flops * 0.6 * scaled.matmul_efficiency(384)) / (
        alone.costs(shape).matmul_flops / (alone.peak_flops * 0.6)) < 2.3


def test_a_gpu_on_the_same_die_takes_the_profiled_curve_and_says_so():
    # H200 SXM and GH200 are H100 SXM's GH100 die (132 SMs, 989.5 TFLOP/s BF16 dense in gpus.csv) with other HBM; A100
    # 40GB SXM is A100 80GB SXM's: the curve (the GEMMs' compute side) is the twin's, the weight read their own
    from kvledger.accounting.gemm_efficiency import SAME_DIE

    for gid, twin in SAME_DIE.items():
        assert get_gpu(gid).bf16_flops_per_s == get_gpu(twin).bf16_flops_per_s
        c = gemm_curve(gid)
        assert c.gpu == gid and c.coef == gemm_curve(twin).coef and f"taken for {gid}" in c.source
    assert gemm_curve("nvidia_h100_pcie") is None  # fewer SMs, lower clocks: not the same
    h200 = prepare(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H200", num_requests=5, gpu_profile="none",
                                  max_model_len=8192)).cost
    assert h200.gemm_curve is not None and h200.flops_fraction == 1.0
    assert h200.bw == get_gpu("H200").hbm_bandwidth_bytes_per_s


def test_moe_and_fp8_models_keep_the_flat_default_on_a_gpu_with_a_curve():
    # the curve prices dense BF16 GEMMs only; an MoE's grouped GEMMs and FP8 GEMMs were not measured, so they keep
    # the flat 0.7 default (before: the curve was dropped but its FLOP fraction of 1.0 kept: 100% of peak, a prefill
    # ~30% too fast — fresh-user trial, Qwen3-30B-A3B TTFT 30.7 ms against 43.7 ms flat)
    # (an FP8 checkpoint on an A100 runs Marlin's weight-only kernel on BF16 tensor cores: not measured either)
    for model, gpu in (("Qwen/Qwen3-30B-A3B", "H100"), ("Qwen/Qwen3-32B-FP8", "H100"), ("Qwen/Qwen3-32B-FP8", "A100")):
        s = prepare(SimRequestArgs(model=model, gpu=gpu, num_requests=5, max_model_len=8192))
        assert s.cost.gemm_curve is None and s.cost.flops_fraction == 0.7, model
        assert s.cost_info["gemm_efficiency"] == "flat" and "not measured" in s.cost_info["source"]
