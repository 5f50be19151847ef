"""A GPU without measured kernel tables (accounting/carried_kernels.py): the layer-kernel floors carried from the
profiled GPUs in SM cycles, its measured bandwidth share where the catalog has one, both said in the step cost's
source; the profiled GPUs price as before."""

from __future__ import annotations

import pytest

from kvledger.accounting.carried_kernels import (
    CARRIED_OPS,
    carried_bandwidth,
    carried_layer_kernel_fit,
    carried_range,
    layer_floor_s,
    loo_errors,
)
from kvledger.accounting.layer_kernels import layer_kernel_fit
from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.catalog.gpus import get_gpu

L8 = "meta-llama/Llama-3.1-8B"


def test_the_mi300x_step_carries_the_floor_and_its_measured_bandwidth_share():
    # Bandwidth share: BabelStream Copy in one harness (Azure AI Benchmarking Guide): MI300X 4.11 TB/s of 5.3 =
    # 0.775472, H100 SXM 2.90 of 3.35 = 0.865672; the roofline's 0.8 is the H100's, so the MI300X gets
    # 0.8 × 0.775472 / 0.865672 = 0.716642.
    # Floor: per op of a Llama-3.1-8B layer (widths 4096, 4096, 5120, 14336), a + w · width in SM cycles at each
    # profiled GPU's boost clock (A100 1,410 / H100 1,980 / RTX PRO 6000 2,617 MHz):
    #   input norm 5,942 / 7,592 / 6,314 → 6,616.0;  post-attention norm 5,961 / 7,709 / 6,314 → 6,661.3
    #   RoPE 6,389 / 6,553 / 7,376 → 6,772.7;  activation 16,164 / 15,731 / 8,229 → 13,374.7
    # and no residual add (vLLM runs it inside fused_add_rms_norm). Σ = 33,424.7 cycles a layer; at the MI300X's
    # 2,100 MHz 15.92 µs; × 32 layers = 0.509 ms a step at its floor.
    args = dict(model=L8, gpu="MI300X", num_requests=5, gpu_profile="none", max_model_len=8192)
    rc = prepare(SimRequestArgs(**args)).cost
    assert rc.bandwidth_fraction == pytest.approx(0.716642, abs=2e-6)
    assert rc.layer_kernels_s(1) == pytest.approx(32 * 33424.7 / 2.1e9, rel=1e-4)
    assert rc.layer_kernels_s(1) == pytest.approx(0.509e-3, abs=1e-6)
    assert "add" not in rc.layer_kernels.ops
    # a decode step of 32 sequences at 1,000 tokens: the weight matmuls (bandwidth-bound: 16.06 GB at 0.7166 ×
    # 5.3 TB/s), then the kernels at their floors (32 × 8 KB of norm bytes is far under a floor), then attention
    shape = StepShape(0, 0, 0, 0, 32, 32 * 1000)
    c = rc.costs(shape)
    gemm = max(c.matmul_flops / (rc.peak_flops * 0.7), c.weight_bytes / (5.3e12 * 0.716642))
    assert c.weight_bytes / (5.3e12 * 0.716642) > c.matmul_flops / (rc.peak_flops * 0.7)
    assert rc.step_time_s(shape) == pytest.approx(gemm + rc.layer_kernels_s(32) + rc.attention_s(c), rel=1e-5)
    src = prepare(SimRequestArgs(**args)).cost_info["source"]
    assert "carried, no operator profile of this GPU" in src and "2,100 MHz" in src
    assert "bandwidth share 0.717" in src and "4.11 TB/s of 5.3" in src


def test_a_gpu_without_a_measured_bandwidth_keeps_the_default_and_says_so():
    args = dict(model=L8, gpu="B200", num_requests=5, gpu_profile="none", max_model_len=8192)
    run = prepare(SimRequestArgs(**args))
    assert run.cost.bandwidth_fraction == 0.8 and run.cost.layer_kernels_s(1) > 0
    assert "the catalog holds no measured sustained bandwidth" in run.cost_info["source"]
    # given on the command line, the share is the user's, and flat pricing has no floors (as on a profiled GPU)
    given = prepare(SimRequestArgs(**{**args, "gpu": "MI300X"}, achievable_bandwidth_fraction=0.6))
    assert given.cost.bandwidth_fraction == 0.6 and "bandwidth share" not in given.cost_info["source"]
    flat = prepare(SimRequestArgs(**args, gemm_efficiency="flat")).cost
    assert flat.layer_kernels is None


def test_the_profiled_gpus_price_as_before():
    for gpu in ("nvidia_h100_sxm", "nvidia_a100_80gb_sxm", "nvidia_h200_sxm", "nvidia_rtx_pro_6000_server"):
        assert carried_layer_kernel_fit(gpu) is None and carried_bandwidth(get_gpu(gpu)) is None
    rc = prepare(SimRequestArgs(model=L8, gpu="H100", num_requests=5, gpu_profile="none", max_model_len=8192)).cost
    assert rc.bandwidth_fraction == 0.8 and rc.layer_kernels.fit is layer_kernel_fit("nvidia_h100_sxm")


def test_the_floor_follows_the_clock_leaving_one_profiled_gpu_out():
    # Llama-3.1-8B's layer floors of the norms, RoPE and activation: A100 24.44 µs (34.5k cycles at 1.41 GHz), H100
    # 18.98 µs (37.6k at 1.98 GHz), RTX PRO 6000 10.79 µs (28.2k at 2.617 GHz). Held out and predicted from the other
    # two: in cycles 32.9k → −4%, 31.3k → −17%, 36.0k → +28%; averaged in seconds, no clock: −39% / −7% / +101%.
    # The clock rule is the better one (mean |error| 16% against 49%).
    cyc, sec = loo_errors(), loo_errors(by_clock=False)
    assert [round(cyc[g], 2) for g in sorted(cyc)] == [-0.04, -0.17, 0.28]
    assert [round(sec[g], 2) for g in sorted(sec)] == [-0.39, -0.07, 1.01]
    assert sum(map(abs, cyc.values())) < sum(map(abs, sec.values()))
    assert carried_range() == (min(cyc.values()), max(cyc.values()))
    a100 = layer_kernel_fit("nvidia_a100_80gb_sxm").params
    assert layer_floor_s(a100, CARRIED_OPS) == pytest.approx(24.44e-6, abs=0.01e-6)


def test_carried_mode_prices_the_h100_as_if_nobody_had_profiled_it():
    # --gemm-efficiency carried on the H100 (benchmarks/gpu_holdout.py's held-out pricing): the floors carried from
    # the A100 80GB SXM and RTX PRO 6000 only (the H100's own left out, and its die's: the H200's are the same),
    # per op in SM cycles (the MI300X test above), A100 / RTX PRO 6000 → mean:
    #   input norm 5,942 / 6,314 → 6,128;  post-attention norm 5,961 / 6,314 → 6,137.5
    #   RoPE 6,389 / 7,376 → 6,882.5;  activation 16,164 / 8,229 → 12,196.5
    # Σ = 31,344.5 cycles a layer at the H100's 1,980 MHz = 15.831 µs (its own floors: 37,585 cycles, 18.98 µs, so
    # −16.6%, loo_errors' H100 figure); × 32 layers = 0.5066 ms a step at its floor.
    # Bandwidth share 0.8 × (2.90/3.35) ÷ (2.90/3.35) = 0.8 exactly; matmuls flat at 0.7 of peak, no GEMM curve.
    args = dict(model=L8, gpu="H100", num_requests=5, gpu_profile="none", max_model_len=8192,
                gemm_efficiency="carried")
    run = prepare(SimRequestArgs(**args))
    rc = run.cost
    assert rc.layer_kernels_s(1) == pytest.approx(32 * 31344.5 / 1.98e9, rel=1e-4)
    assert layer_floor_s(rc.layer_kernels.fit.params, CARRIED_OPS) == pytest.approx(15.831e-6, rel=1e-4)
    assert rc.bandwidth_fraction == 0.8 and rc.flops_fraction == 0.7 and rc.gemm_curve is None
    assert "add" not in rc.layer_kernels.ops
    src = run.cost_info["source"]
    assert "the measured floors of the A100 80GB SXM, RTX PRO 6000 (" in src and "1,980 MHz" in src
    assert "bandwidth share 0.800" in src and run.cost_info["gemm_efficiency"] == "carried"
    # the H200 (the H100's die) carries the same two GPUs' floors, at its own 1,980 MHz, and its measured share:
    # BabelStream Copy 4.01 TB/s of 4.8 = 0.835417; 0.8 × 0.835417 / 0.865672 = 0.772040
    h200 = prepare(SimRequestArgs(**{**args, "gpu": "H200"})).cost
    assert h200.layer_kernels_s(1) == pytest.approx(rc.layer_kernels_s(1), rel=1e-9)
    assert h200.bandwidth_fraction == pytest.approx(0.772040, abs=2e-6)
    # the A100 without its own floors: A100 clock 1,410 MHz, H100 / RTX PRO 6000 cycles; Copy 1.61 of 2.039 TB/s:
    # 0.8 × 0.789603 / 0.865672 = 0.729702
    a100 = prepare(SimRequestArgs(**{**args, "gpu": "A100"})).cost
    assert a100.bandwidth_fraction == pytest.approx(0.729702, abs=2e-6)
    assert "the measured floors of the H100 SXM, RTX PRO 6000 (" in a100.layer_kernels.fit.source


def test_carried_mode_is_refused_with_a_gpu_profile():
    from kvledger.errors import InputError

    # the RTX PRO 6000's bundled profile prices it by default: carried means as if unprofiled, so it says how
    with pytest.raises(InputError, match="add --gpu-profile none"):
        prepare(SimRequestArgs(model=L8, gpu="RTX PRO 6000", num_requests=5, max_model_len=8192,
                               gemm_efficiency="carried"))
