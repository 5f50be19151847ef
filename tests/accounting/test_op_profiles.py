"""LLMServingSim's operator profiles of vLLM 0.19 on the RTX PRO 6000, read into the rows the GEMM curve and the layer
kernels are fitted on (kvledger.accounting.op_profiles)."""

from __future__ import annotations

import pytest

from kvledger.accounting.gemm_efficiency import _gemm_dims, gemm_curve, rows_points
from kvledger.accounting.layer_kernels import LayerKernels, layer_kernel_fit
from kvledger.accounting.op_profiles import PROFILED_GPU, profile_shapes
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

PRO = "nvidia_rtx_pro_6000_server"


def _row(model: str, tp: int, tokens: int) -> dict[str, str]:
    (rows,) = [rs for _, name, rs in profile_shapes(PRO) if name == model]
    (r,) = [r for r in rows if r["num_tensor_parallel_workers"] == str(tp) and r["num_tokens"] == str(tokens)]
    return r


def test_a_qwen3_32b_tp2_row_carries_the_csv_times_and_its_own_head_size():
    # dense.csv (RTXPRO6000/Qwen/Qwen3-32B/bf16/tp2) at 128 tokens: qkv_proj 46.5063 µs, o_proj 37.8453, gate_up_proj
    # 206.166, down_proj 110.901, layernorm 3.32267 (both norms: vLLM's fused add + RMSNorm), rotary_emb 2.88,
    # act_fn 3.22133; no separate add kernel
    r = _row("Qwen3-32B", 2, 128)
    assert float(r["time_stats.attn_pre_proj.median"]) == pytest.approx(0.0465063)
    assert float(r["time_stats.mlp_up_proj.median"]) == pytest.approx(0.206166)
    assert r["time_stats.input_layernorm.median"] == r["time_stats.post_attention_layernorm.median"]
    assert float(r["time_stats.attn_rope.median"]) == pytest.approx(0.00288)
    assert r["time_stats.add.median"] == ""
    # Qwen3-32B: hidden 5120, 64 query heads and 8 KV heads of 128 (not 5120 / 64 = 80), intermediate 25,600; per GPU
    # at TP 2: QKV (64 + 16) · 128 / 2 = 5,120 × 5,120; output 5,120 × 8,192 / 2; gate+up 2 · 25,600 / 2 × 5,120;
    # down 5,120 × 12,800
    assert _gemm_dims(r, 2) == [(5120, 5120), (5120, 4096), (25600, 5120), (5120, 12800)]


def test_the_gemv_reads_weights_at_three_quarters_of_the_datasheet_bandwidth_and_128_tokens_is_kept():
    # at 1 token the four GEMMs take 39.158 + 30.5497 + 183.521 + 97.8983 = 351.127 µs for ΣNK = 243,793,920 weights
    # (2 B each) + 2 · Σ(N + K) = 2 · 68,096 activations: 487,724,032 B / 351.127 µs = 1.389 TB/s, 0.775 of 1.792.
    # At 128 tokens 401.419 µs exceeds 1.1 × the read at that share, (487,587,840 + 2 · 128 · 68,096) / 1.389 TB/s ×
    # 1.1 = 400.0 µs, so the point is kept: e = 2 · 128 · 243,793,920 / (500 TFLOP/s · 401.419 µs) = 0.311
    g = get_gpu(PRO)
    (rows,) = [rs for _, name, rs in profile_shapes(PRO) if name == "Qwen3-32B"]
    pts = rows_points(rows, "Qwen/Qwen3-32B", g.bf16_flops_per_s, g.hbm_bandwidth_bytes_per_s)
    at128 = [e for m, nk, e, _ in pts if m == 128 and nk == 243_793_920]
    assert at128 == [pytest.approx(2 * 128 * 243_793_920 / (500e12 * 401.419e-6), rel=1e-4)]
    assert at128[0] == pytest.approx(0.311, abs=0.001)


def test_the_rtx_pro_6000_has_a_measured_curve_from_its_own_profiles_and_its_twin_takes_it():
    assert PRO in PROFILED_GPU
    c = gemm_curve(PRO)
    assert c.shapes == ("Qwen/Qwen3-32B", "meta-llama/Llama-3.1-8B") and "LLMServingSim" in c.source
    # the staircase of dense.csv: Llama-3.1-8B TP 1 gate_up_proj at 1,024 tokens, 2 · 1,024 · 28,672 · 4,096 FLOP in
    # 586.218 µs = 410 TFLOP/s, 0.82 of 500; its QKV 0.59, down 0.76: the layer's sum sits near 0.72
    assert 0.65 < c.efficiency(1024, 4096 * 6144 + 4096 * 4096 + 4096 * 28672 + 14336 * 4096) < 0.78
    assert c.loso_abs < 0.05  # leaving one model out, points of peak
    work = gemm_curve("nvidia_rtx_pro_6000_workstation")
    assert work.coef == c.coef and "taken for nvidia_rtx_pro_6000_workstation" in work.source


def test_the_layer_kernels_of_vllm_019_have_no_separate_add_and_match_the_profile_at_16_tokens():
    fit = layer_kernel_fit(PRO)
    assert fit.params[-1] is None  # OPS' last, "add": fused into vLLM 0.19's RMSNorm, never timed alone
    m = load_model("meta-llama/Llama-3.1-8B")
    k = LayerKernels(fit, m, 1, get_gpu(PRO).hbm_bandwidth_bytes_per_s * 0.8)
    assert k.ops == ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act")
    # dense.csv Llama-3.1-8B TP 1 at 16 tokens: layernorm 2.43233 µs (twice), rotary_emb 2.795, act_fn 2.987:
    # 32 layers × 10.646 µs = 340.7 µs a step; the floors fitted on both models' ≤ 16-token rows come within 5%
    assert k.step_s(16) == pytest.approx(32 * (2 * 2.43233 + 2.795 + 2.987) * 1e-6, rel=0.05)


def test_the_kernels_bytes_run_at_the_profiles_pace_above_the_roofline_bandwidth_on_this_gpu():
    # vLLM 0.19's norms, RoPE and activation move their activations at 2.0–3.2 TB/s in these profiles, above the GPU's
    # 1.79 TB/s GDDR7 (the step's activations stay in L2): priced at 0.8 × 1.79 TB/s a 2,048-token prefill's kernels
    # came out ~2× the profile at 512 tokens. At the faster of the two, Llama-3.1-8B TP 1 at 2,048 tokens: the
    # profile's 32 × (2 × 15.7068 + 12.0107 + 94.3577) µs = 4.41 ms a step (dense.csv's layernorm, rotary_emb,
    # act_fn rows); at 512 tokens 32 × (2 × 4.30933 + 4.18133 + 9.86667) µs = 0.725 ms
    fit = layer_kernel_fit(PRO)
    assert fit.bytes_at_fit and not layer_kernel_fit("nvidia_h100_sxm").bytes_at_fit
    m = load_model("meta-llama/Llama-3.1-8B")
    k = LayerKernels(fit, m, 1, get_gpu(PRO).hbm_bandwidth_bytes_per_s * 0.8)
    r = _row("Llama-3.1-8B", 1, 2048)
    measured = 32 * sum(float(r[f"time_stats.{op}.median"]) for op in k.ops) * 1e-3
    assert k.step_s(2048) == pytest.approx(measured, rel=0.15)
    r512 = _row("Llama-3.1-8B", 1, 512)  # the L2 staircase: one bandwidth per op over-prices 512 tokens by ~36%
    assert k.step_s(512) < 1.5 * 32 * sum(float(r512[f"time_stats.{op}.median"]) for op in k.ops) * 1e-3


def test_a_layernorm_model_keeps_its_add_at_the_norm_floor_where_vllm_019_fuses_it_for_rmsnorm():
    # OPT's LayerNorms carry a bias and run the residual add as its own kernel; vLLM fuses the add only into RMSNorm
    fit = layer_kernel_fit(PRO)
    opt = LayerKernels(fit, load_model("facebook/opt-13b"), 1, 1.4e12)
    assert opt.ops == ("input_layernorm", "post_attention_layernorm", "mlp_act", "add")
    assert opt.params[-1][:2] == fit.params[0][:2]  # the add at the input norm's floor (a, w)
    llama = LayerKernels(fit, load_model("meta-llama/Llama-3.1-8B"), 1, 1.4e12)
    assert "add" not in llama.ops


def test_plan_says_the_curve_prices_only_where_no_flat_bundled_profile_does():
    # both editions' default is the bundled GPU profile fitted flat on the Server Edition (one board, two coolers):
    # plan must not claim the curve prices them; without the profile the curve and vLLM 0.19's kernels do, and the
    # step-cost line names the fused add
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    for gpu in ("rtx_pro_6000_server", "rtx_pro_6000_workstation"):
        out = CliRunner().invoke(app, ["plan", "Qwen/Qwen3-32B", "--gpu", gpu, "--tp", "2", "--verbose"]).output
        assert "measured efficiency instead" not in " ".join(out.split())
    sim = CliRunner().invoke(app, ["simulate", "Qwen/Qwen3-32B", "--gpu", "rtx_pro_6000_workstation", "--tp", "2",
                                   "--gpu-profile", "none", "--num-requests", "20"]).output
    assert "2 norms (the residual add fused in), RoPE and activation kernels" in " ".join(sim.split())

