"""Tuned or default fused-MoE config (moe_config.py): the wheel lists, the file name rule, the fitted factor."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.moe_config import (
    config_file_name,
    default_config_factor,
    device_name,
    fit_constant,
    nearest_read,
    shipped_names,
)


def test_the_file_name_follows_get_config_file_name():
    assert config_file_name(64, 2048, "NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", "fp8_w8a8", (128, 128)) == (
        "E=64,N=2048,device_name=NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition,dtype=fp8_w8a8,block_shape=[128,128].json")
    assert config_file_name(128, 768, "NVIDIA_A100-SXM4-80GB", None, None) == (
        "E=128,N=768,device_name=NVIDIA_A100-SXM4-80GB.json")


def test_a_shape_with_and_without_a_shipped_file():
    v11, v28 = (0, 11, 0), (0, 28, 0)
    # Qwen3-30B-A3B BF16 at TP 1 (E 128, N 768): 0.11.0 ships H200's file, not A100's
    assert "E=128,N=768,device_name=NVIDIA_H200.json" in shipped_names(v11)
    assert "E=128,N=768,device_name=NVIDIA_A100-SXM4-80GB.json" not in shipped_names(v11)
    # block-FP8 on the RTX PRO 6000 Server: 0.28.0 ships E=256,N=512, not E=64,N=2048
    dev = device_name("nvidia_rtx_pro_6000_server", v28)
    assert config_file_name(256, 512, dev, "fp8_w8a8", (128, 128)) in shipped_names(v28)
    assert config_file_name(64, 2048, dev, "fp8_w8a8", (128, 128)) not in shipped_names(v28)
    assert (len(shipped_names(v11)), len(shipped_names(v28))) == (230, 330)


def test_versions_take_the_nearest_read_list_and_0_28_names_every_h200_alike():
    assert nearest_read((0, 19, 0)) == (0, 11, 0) and nearest_read((0, 20, 0)) == (0, 28, 0)
    assert nearest_read((0, 33, 0)) == (0, 28, 0) and nearest_read((0, 10, 2)) == (0, 11, 0)
    assert device_name("nvidia_h200_nvl", (0, 11, 0)) == "NVIDIA_H200_NVL"
    assert device_name("nvidia_h200_nvl", (0, 28, 0)) == "NVIDIA_H200"
    assert device_name("nvidia_a10", (0, 28, 0)) is None  # in no shipped file name


def test_the_constant_minimises_the_mean_absolute_error():
    # one table, ratios 1.0, 1.1, 1.2: Σ|s/r − 1| falls up to s = 1.1 (slope 1 − 1/1.1 − 1/1.2 < 0), rises after
    assert fit_constant(np.array([1.0, 1.1, 1.2]), np.array(["a", "a", "a"])) == pytest.approx(1.1, abs=1e-9)
    # two tables weigh alike: table b's one row counts as much as a's two
    assert fit_constant(np.array([1.0, 1.0, 1.3]), np.array(["a", "a", "b"])) == pytest.approx(1.0, abs=1e-9)


def test_the_bundled_pairs_give_a_three_percent_default_penalty():
    f = default_config_factor()
    assert (f.pairs, f.tables) == (87, 11)
    assert f.factor == pytest.approx(1.0315, abs=1e-9)
    assert (f.err_in, f.err_loso) == pytest.approx((0.058, 0.059), abs=0.001) and f.err_loso_max > 0.3


def test_a_plan_without_a_tuned_file_prices_the_kernel_term_times_the_factor():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    plan = build_plan(load_model("Qwen/Qwen3-30B-A3B"), get_gpu("A100 80GB SXM4"),
                      make_settings(max_model_len=8192, engine_version="0.11.0"), with_advice=False)
    rc = plan.step_cost()
    c = rc.moe_config
    assert c is not None and not c.tuned and c.file_name == "E=128,N=768,device_name=NVIDIA_A100-SXM4-80GB.json"
    assert "ships no tuned config for E=128,N=768" in c.note and "×1.031" in c.note
    plain = RooflineStepCost(plan.model, plan.gpu, plan.kv, 1)
    assert rc.moe_kernel_s(64) == pytest.approx(1.0315 * plain.moe_kernel_s(64), rel=1e-9)
    h200 = build_plan(load_model("Qwen/Qwen3-30B-A3B"), get_gpu("H200"),
                      make_settings(max_model_len=8192, engine_version="0.11.0"), with_advice=False)
    assert h200.step_cost().moe_config.tuned and h200.step_cost().moe_config.factor == 1.0


def test_expert_parallel_block_fp8_on_hopper_names_flashinfers_kernel():
    # vLLM 0.19.0–0.33.0 fused_moe/oracle/fp8.py: "On Hopper for Block Fp8, prefer Triton for TP and FI CUTLASS for
    # EP". DeepSeek-V3 (128×128 FP8) at DP 8 × TP 1 with EP 8 on H200: the tuned Triton file E=32,N=2048 is named,
    # but the note must not say the fit "applies as is" (it did): FlashInfer CUTLASS runs, a kernel not measured here
    from kvledger.accounting.moe_config import moe_config_choice
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    dsv3, h200 = load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200")
    ep = moe_config_choice(dsv3, h200, 1, 8, (0, 33, 0), 58, "0.33.0")
    assert ep.file_name == "E=32,N=2048,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json"
    assert "applies as is" not in ep.note and "vLLM 0.33.0 runs these 128-block FP8 experts with FlashInfer's " \
           "CUTLASS fused MoE" in ep.note
    # TP 8 alone (EP 1): Triton, E=256,N=2048/8=256, the fit as is; Qwen3-235B in bf16 under EP: Triton as well
    tp = moe_config_choice(dsv3, h200, 8, 1, (0, 33, 0), 58, "0.33.0")
    assert tp.note.endswith("E=256,N=256,device_name=NVIDIA_H200,dtype=fp8_w8a8,block_shape=[128,128].json; the "
                            "kernel fit applies as is")
    qwen = moe_config_choice(load_model("Qwen/Qwen3-235B-A22B"), h200, 8, 8, (0, 33, 0), 94, "0.33.0")
    assert "FlashInfer" not in qwen.note
