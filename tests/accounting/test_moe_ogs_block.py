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


@pytest.mark.parametrize("tokens,ragged_block,v35_block", [
    (1, 16, 16),  # ⌊4/32⌋ = 0 → 1; ragged: next_pow2(2·1) = 2 → the floor, 16
    (128, 32, 16),  # 16 rows per expert; ragged: next_pow2(32) = 32 (v3.5: 16)
    (256, 64, 32),  # 32; ragged: next_pow2(64) = 64 (v3.5: 32)
    (512, 64, 64),  # 64 (still ≤ 64): ragged next_pow2(128) capped at 64
    (520, 128, 128),  # ⌊2,080/32⌋ = 65 > 64: the v3.5 rule, next_pow2(65) = 128
])
def test_vllm_0_17_to_0_21_vendored_matmul_ogs_doubles_the_rows_per_expert_up_to_64(tokens, ragged_block, v35_block):
    # vllm/third_party/triton_kernels/matmul_ogs_details/opt_flags.py in the 0.17.0-0.21.0 wheels: with ragged routing
    # (expt_hist set) and tokens_per_expt <= 64, block_m = max(16, min(next_power_of_2(2 * tokens_per_expt), 64));
    # gpt-oss-20b, k = 4 of E = 32
    assert (ogs_block(tokens, 4, 32, ragged=True), ogs_block(tokens, 4, 32)) == (ragged_block, v35_block)


@pytest.mark.parametrize("engine,version,gpu,kernel", [
    ("vllm", "0.10.1", "H100", "marlin"),  # the wheel's torch 2.7.1: _should_use_marlin on Hopper
    ("vllm", "0.11.0", "H100", "marlin"),  # a stock install: no triton_kernels (no dependency of the wheel)
    ("vllm", "0.11.0+tk", "H100", "ogs"),  # --mxfp4-backend triton: triton_kernels 3.4-3.5 beside it
    ("vllm", "0.12.0", "H100", "ogs"),  # vendors triton_kernels with v3.5.0's opt_flags.py
    ("vllm", "0.17.0", "H100", "ogs_ragged"),
    ("vllm", "0.21.0", "H100", "ogs_ragged"),
    ("vllm", "0.22.0", "H100", "ogs"),  # vendors the v3.5.0 opt_flags.py again
    ("vllm", "0.19.0", "A100", "marlin"),  # below Hopper: Marlin on every release (mxfp4_uses_marlin)
    ("sglang", None, "H100", ""),
])
def test_each_vllm_release_prices_gpt_oss_experts_with_its_own_kernel(engine, version, gpu, kernel):
    from kvledger.accounting.plan_roofline import mxfp4_moe_kernel

    given = "triton" if version and version.endswith("+tk") else "auto"
    s = PlanSettings(engine=engine, engine_version=version and version.removesuffix("+tk"), mxfp4_backend=given)
    assert mxfp4_moe_kernel(load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu(gpu), s) == kernel


def test_a_0_19_plan_pads_gpt_oss_decode_rows_to_the_ragged_block():
    # a 128-token decode step of gpt-oss-20b on an H100, c ~ Binomial(128, 1/8) tokens an expert (mean 16): 0.12.0
    # (matmul_ogs with the v3.5 rule, as 0.11.0 with triton_kernels installed) pads each expert to 16 rows, 0.19.0's
    # vendored triton_kernels to 32. P(c ≤ 16) = 0.56611, P(17 ≤ c ≤ 32) = 0.43386, P(c > 32) = 3.4e-5, P(c = 0) =
    # (7/8)^128 = 3.8e-8 (summed from the pmf), so E[⌈c/16⌉·16] = 16 × 0.56611 + 32 × 0.43386 + 48 × 3.4e-5 = 22.943
    # and E[⌈c/32⌉·32] = 32 × (1 − 3.4e-5) + 64 × 3.4e-5 = 32.001
    m, g = load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu("H100")
    rc = {v: build_plan(m, g, PlanSettings(max_model_len=8192, engine_version=v), with_roofline=False,
                        with_advice=False).step_cost() for v in ("0.12.0", "0.19.0")}
    assert (rc["0.12.0"].ogs_ragged, rc["0.19.0"].ogs_ragged, rc["0.19.0"].ogs_moe) == (False, True, True)
    assert padded_rows_moments(128, 4, 32, 0, 16)[0] == pytest.approx(22.943, abs=0.001)
    assert padded_rows_moments(128, 4, 32, 0, 32)[0] == pytest.approx(32.001, abs=0.001)
    assert rc["0.19.0"].moe_kernel_s(128) > rc["0.12.0"].moe_kernel_s(128)
