"""TP shards against FP8 blocks as SGLang 0.5.23 checks them (catalog/quant_tp_sglang.py), worked by hand."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.catalog.quant_tp_sglang import sglang_tp_misalignment
from kvledger.errors import InputError

H200 = get_gpu("h200-sxm")
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def _sglang(model, **kw):
    return build_plan(model, H200, make_settings(engine="sglang", **kw), with_roofline=False)


def test_qwen3_30b_fp8_at_tp4_is_refused_with_sglangs_reason():
    # moe_intermediate_size 768 over MoE TP 4 = 192 per rank; 192 / 128 = 1.5 → Fp8MoEMethod.create_weights raises
    # (block_n 128). TP 2: 384 = 3 × 128 passes block_n and block_k; the 32 attention heads and 4 KV heads divide by 2.
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    with pytest.raises(InputError) as err:
        _sglang(m, tp=4)
    msg = str(err.value)
    assert msg.startswith("--tp 4: SGLang 0.5.23 does not start Qwen/Qwen3-30B-A3B-FP8: "
                          "model.layers.0.mlp.experts.*.gate_proj has 192 intermediate features per GPU (768/4)")
    assert ("layers/quantization/fp8.py Fp8MoEMethod.create_weights: \"The output_size of gate's and up's weight = "
            "192 is not divisible by weight quantization block_n = 128.\"") in msg
    assert "a TP that works: --tp 2; or SGLang's --ep-size 4 at --tp 4" in msg and "\n" not in msg
    # DP attention splits attention, not the experts (MoE TP = tp_size // ep_size // moe_dp_size): refused the same
    with pytest.raises(InputError, match="192 intermediate features per GPU"):
        _sglang(m, tp=4, data_parallel_size=2, enable_dp_attention=True)
    assert _sglang(m, tp=2).memory.fits


def test_qwen3_235b_fp8_block_config_at_tp8_is_refused():
    # Qwen3-235B-A22B with FP8 blocks [128, 128]: moe_intermediate_size 1,536 / 8 = 192, not a multiple of 128;
    # TP 4: 384 = 3 × 128 passes (64 heads, 4 KV heads divide by 4).
    raw = json.loads((resources.files("kvledger.catalog") / "data/models/Qwen--Qwen3-235B-A22B.json").read_text())
    raw.update(quantization_config=dict(FP8_BLOCK))
    m = parse_config(raw, source="t", name="qwen3-235b-fp8")
    bad = sglang_tp_misalignment(m, m.quant, 8)
    assert (bad.size, bad.full, bad.multiple) == (192, 1536, 128)
    with pytest.raises(InputError, match=r"^--tp 8: SGLang 0\.5\.23 does not start qwen3-235b-fp8: .* 192 "
                                         r"intermediate features per GPU \(1,536/8\).*a TP that works: --tp 4"):
        _sglang(m, tp=8)
    assert sglang_tp_misalignment(m, m.quant, 4) is None


def test_a_search_candidates_sglang_line_carries_ep_size_so_sglang_starts_it():
    # vLLM with --enable-expert-parallel keeps Qwen3-30B-A3B-FP8's experts whole at TP 4 (vLLM starts it). Before,
    # SGLang's line carried no --ep-size, so its experts were 768 / 4 = 192 per rank, which SGLang refuses, and the
    # search printed "# no SGLang line". Now the line carries SGLang's own --ep-size 4 (MoE TP = 4 // 4 = 1, the 768
    # intermediate features whole: 768 = 6 × 128 passes block_n and block_k), which SGLang starts and kvledger plans.
    from kvledger.analyses.search.launch import launch_for
    from kvledger.analyses.search.screen import plan_figures

    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    plan = build_plan(m, H200, make_settings(tp=4, enable_expert_parallel=True), with_roofline=False)
    entry = {"tp": 4, "enable_prefix_caching": None, "plan": plan_figures(plan)}
    cmd = launch_for("Qwen/Qwen3-30B-A3B-FP8", "nvidia_h200_sxm", entry)
    assert cmd["vllm"].startswith("vllm serve Qwen/Qwen3-30B-A3B-FP8 --tensor-parallel-size 4")
    assert cmd["sglang"].startswith("python -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B-FP8 --tp-size 4 ")
    assert cmd["sglang"].endswith(" --ep-size 4") and "--enable-expert-parallel" not in cmd["sglang"]
    assert _sglang(m, tp=4, ep_size=4).memory.fits  # SGLang's own plan of that line
    with pytest.raises(InputError, match=r"^--tp 4: SGLang 0\.5\.23 does not start"):  # without --ep-size: refused
        _sglang(m, tp=4)
    entry2 = {"tp": 2, "enable_prefix_caching": None, "plan": plan_figures(_sglang(m, tp=2))}
    assert launch_for("Qwen/Qwen3-30B-A3B-FP8", "nvidia_h200_sxm", entry2)["sglang"].startswith("python -m sglang")
