"""SGLang's minimum compute capability per quantization method and release (catalog/quant_rules_sglang.py), from its
``get_min_capability`` values read in the 0.5.3, 0.5.5, 0.5.14 and 0.5.23 wheels, and the start-up refusal it makes."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.catalog.quant_rules_sglang import sglang_min_capability
from kvledger.catalog.quant_tp_sglang import check_sglang_quant_tp
from kvledger.errors import EngineRefusalError

V0523, V0514, V055 = (0, 5, 23), (0, 5, 14), (0, 5, 5)


def _llama8b(qc: dict):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "meta-llama--Meta-Llama-3.1-8B.json")
                     .read_text())
    raw["quantization_config"] = qc
    return parse_config(raw, source="t", name="llama8b")


def _ct(weights: dict, acts: dict | None) -> dict:
    grp = {"targets": ["Linear"], "weights": weights} | ({"input_activations": acts} if acts else {})
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": grp}, "ignore": ["lm_head"]}


W8A8_INT8 = _ct({"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True},
                {"num_bits": 8, "type": "int", "strategy": "token", "dynamic": True})
W8A8_FP8 = _ct({"num_bits": 8, "type": "float", "strategy": "channel"},
               {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True})
W4A16 = _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}, None)


def test_each_methods_minimum_by_release():
    # fp8.py Fp8Config 80; modelopt_quant.py ModelOptFp8Config 89, ModelOptFp4Config 100 (0.5.3, 0.5.5) → 80 (0.5.14,
    # 0.5.23); awq.py AWQConfig 75 (awq_marlin, 80, only from 8.0); gptq.py GPTQConfig 60; mxfp4.py 80;
    # compressed-tensors W8A8 int8 89 (0.5.5) → 80 (0.5.14, 0.5.23), W8A8 fp8 falls back to W8A16 fp8 (80), wNa16 80
    cases = {
        "fp8": ({"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}, 80, 80),
        "modelopt": ({"quant_method": "modelopt", "quant_algo": "FP8"}, 89, 89),
        "modelopt_fp4": ({"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}, 80, 100),
        "awq": ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 75, 75),
        "gptq": ({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True, "desc_act": False}, 60, 60),
        "w8a8 int8": (W8A8_INT8, 80, 89),
        "w8a8 fp8": (W8A8_FP8, 80, 80),
        "w4a16": (W4A16, 80, 80),
    }
    for what, (qc, new, old) in cases.items():
        q = _llama8b(qc).quant
        assert sglang_min_capability(q, V0523)[0] == new, what
        assert sglang_min_capability(q, V0514)[0] == new, what
        assert sglang_min_capability(q, V055)[0] == old, what
    assert sglang_min_capability(load_model("openai/gpt-oss-20b").quant, V0523) == (80, "mxfp4")
    assert sglang_min_capability(load_model("meta-llama/Llama-3.1-8B").quant, V0523) is None


def test_a_gpu_below_the_minimum_does_not_start():
    # Qwen3-32B-FP8 (quant_method fp8) on a T4 (7.5): Fp8Config.get_min_capability 80 → loader.py refuses; an A10G
    # (8.6) loads it. ModelOpt FP8 on an A100 (8.0): 89. A W8A8 int8 checkpoint on a T4: the scheme check, 80
    fp8 = load_model("Qwen/Qwen3-32B-FP8")
    with pytest.raises(EngineRefusalError, match=r"^SGLang 0\.5\.23 does not start Qwen/Qwen3-32B-FP8: the "
                                                 r"quantization method fp8 needs compute capability 80 or more, this "
                                                 r"GPU has 75 \(model_loader/loader\.py"):
        check_sglang_quant_tp(fp8, 1, V0523, "sm75")
    check_sglang_quant_tp(fp8, 1, V0523, "sm86")
    with pytest.raises(EngineRefusalError, match="method modelopt needs compute capability 89 or more, this GPU has "
                                                 "80"):
        check_sglang_quant_tp(_llama8b({"quant_method": "modelopt", "quant_algo": "FP8"}), 1, V0523, "sm80")
    with pytest.raises(EngineRefusalError, match=r"compressed_tensors\.py: \"Quantization scheme is not supported for "
                                                 r"the current GPU\. Min capability: 80\"\)"):
        check_sglang_quant_tp(_llama8b(W8A8_INT8), 1, V0523, "sm75")
    check_sglang_quant_tp(_llama8b(W8A8_INT8), 1, V0523, "")  # not NVIDIA: no capability to compare
