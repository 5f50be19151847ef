"""A measured-mode GPU profile on a model its GEMM curve does not price (an MoE's grouped GEMMs)."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.plan_pricing import PricingFlags, plan_fractions
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_the_profiles_fraction_scales_the_flat_default_where_its_curve_does_not_price():
    # the bundled H100 profile is fitted in measured mode: its FLOP fraction 0.9881 scales the GPU's measured GEMM
    # efficiency (1.0: as measured), so a dense BF16 model takes 0.9881 × the curve. Qwen3-30B-A3B's routed experts
    # are grouped GEMMs the curve never measured: uncalibrated they get the flat default 0.7 of peak, and the profile
    # scales that, 0.9881 × 0.7 = 0.69167 — not 0.9881 as a share of peak (99% of peak FLOP/s, as it was priced)
    gpu, flags = get_gpu("H100-SXM"), PricingFlags(gpu_profile="bundled:h100-sxm.json")
    dense = plan_fractions(flags, gpu, load_model("meta-llama/Llama-3.1-8B"))
    moe = plan_fractions(flags, gpu, load_model("Qwen/Qwen3-30B-A3B"))
    assert dense["achievable_flops_fraction"] == pytest.approx(0.9881)
    assert moe["achievable_flops_fraction"] == pytest.approx(0.9881 * 0.7)
    assert moe["achievable_bandwidth_fraction"] == dense["achievable_bandwidth_fraction"] == pytest.approx(0.794)
    # a fraction given by hand is the user's, as given
    given = plan_fractions(PricingFlags(gpu_profile="bundled:h100-sxm.json", achievable_flops_fraction=0.5), gpu,
                           load_model("Qwen/Qwen3-30B-A3B"))
    assert given["achievable_flops_fraction"] == 0.5
