"""MXFP4 experts on Hopper run triton_kernels' matmul_ogs (vLLM 0.10.2–0.11 with triton_kernels installed; SGLang for
GPT-OSS), which pads each expert's rows to its own block_m — max(16, min(next_pow2(⌊T·k/E⌋), 128)) — not to Triton
fused_moe's default (16, then 64 once the step's tokens pass E); and an MoE model's layers get the measured norm, RoPE
and add kernels (layer_kernels.py) where the measured pricing is asked for, without an activation of their own when
every MLP is routed experts (the activation runs inside the fused-MoE call)."""

from __future__ import annotations

import pytest

from kvledger.accounting.gemm_efficiency import gemm_curve
from kvledger.accounting.layer_kernels import layer_ops
from kvledger.accounting.moe_rows import ogs_block, padded_rows_moments
from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.stepcost import StepShape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


@pytest.mark.parametrize("tokens,experts,block", [
    (1, 32, 16),  # ⌊4/32⌋ = 0 → at least 1 → next_pow2 1 → the floor, 16
    (128, 32, 16),  # 16 rows per expert → 16
    (256, 32, 32),  # 32 → 32 (fused_moe's default: 64, as 256 > E)
    (512, 32, 64),
    (8192, 32, 128),  # 1,024 → capped at 128
    (1000, 128, 32),  # gpt-oss-120b: ⌊4,000/128⌋ = 31 → 32
    (8192, 128, 128),  # 256 → 128
])
def test_ogs_block_is_the_rows_per_expert_rounded_to_a_power_of_two(tokens, experts, block):
    assert ogs_block(tokens, 4, experts) == block


def test_gpt_oss_120b_prefill_chunk_pads_to_128_row_blocks():
    # 8,192 tokens, k = 4 of E = 128: c ~ Binomial(8192, 1/32), mean 256, σ = √(8192·(1/32)·(31/32)) = 15.75, skew
    # γ = (1 − 2/32)/15.75 = 0.0595. Rows are 256 where c ≤ 256 and one more block where c > 256 (c ≤ 128 or > 384
    # is > 8 σ away). P(c ≥ 257) ≈ 1 − Φ(0.5/15.75) − φ(0.03)·γ/6·(0.03² − 1) = 0.4873 − 0.0040 = 0.4834 (Edgeworth),
    # so E[P] = 256 + 128 × 0.4834 = 317.9 at matmul_ogs' 128-row blocks and 256 + 64 × 0.4834 = 286.9 at 64
    assert padded_rows_moments(8192, 4, 128, 0, ogs_block(8192, 4, 128))[0] == pytest.approx(317.9, abs=0.1)
    assert padded_rows_moments(8192, 4, 128, 0, 64)[0] == pytest.approx(286.9, abs=0.1)


def _roofline(model: str, gpu: str, **kw) -> RooflineStepCost:
    m, g = load_model(model, allow_hub=False), get_gpu(gpu)
    kv = build_plan(m, g, PlanSettings(max_model_len=8192), with_roofline=False, with_advice=False).kv
    return RooflineStepCost(m, g, kv, **kw)


def test_gpt_oss_experts_take_matmul_ogs_on_hopper_and_marlin_on_ampere():
    h100, a100 = _roofline("openai/gpt-oss-20b", "H100"), _roofline("openai/gpt-oss-20b", "A100")
    assert (h100.ogs_moe, h100.marlin_moe, a100.ogs_moe, a100.marlin_moe) == (True, False, False, True)


def test_routed_only_moe_layers_have_no_activation_kernel_of_their_own():
    assert layer_ops(load_model("Qwen/Qwen3-30B-A3B", allow_hub=False)) == (
        "input_layernorm", "post_attention_layernorm", "attn_rope", "add")
    assert "mlp_act" in layer_ops(load_model("meta-llama/Llama-3.1-8B-Instruct", allow_hub=False))


def test_qwen3_moe_decode_step_pays_its_layer_kernels_on_an_a100():
    # A100's Vidur fit, per layer at one token (a + w·width, hidden 2,048, 32 + 4 heads × 128): input norm 2.72 µs,
    # post-attention norm 2.73, RoPE 4.27, add 1.90 = 11.63 µs; × 48 layers = 0.558 ms, added to the step as it is
    # to a dense model's, and only where the measured pricing (the GPU's curve) is asked for
    with_curve = _roofline("Qwen/Qwen3-30B-A3B", "nvidia_a100_80gb_sxm", gemm_curve=gemm_curve("nvidia_a100_80gb_sxm"))
    flat = _roofline("Qwen/Qwen3-30B-A3B", "nvidia_a100_80gb_sxm")
    assert with_curve.gemm_curve is None and flat.layer_kernels is None  # MoE GEMMs keep the flat fraction
    shape = StepShape(0, 0, 0, 0, 1, 2048)
    assert with_curve.step_time_s(shape) - flat.step_time_s(shape) == pytest.approx(0.558e-3, abs=0.002e-3)
