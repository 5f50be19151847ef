"""An fbgemm_fp8 checkpoint (Llama-3.1-405B-Instruct-FP8's method) is in vLLM's DEPRECATED_QUANTIZATION_METHODS from
0.14.0: ``config/model.py::_verify_quantization`` refuses it without ``--allow-deprecated-quantization``, so search's
``vllm serve`` line carries the flag from 0.14 and not before (0.13.0 has no such list); the ``kvledger plan`` check
line and the SGLang line do not take it."""

from __future__ import annotations

import json
from importlib import resources

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.search.launch import launch_commands
from kvledger.analyses.search.screen import plan_figures
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config


def _fbgemm_entry(version: str):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "meta-llama--Meta-Llama-3.1-8B.json")
                     .read_text())
    raw["quantization_config"] = {"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0,
                                  "modules_to_not_convert": ["lm_head"]}
    model = parse_config(raw, source="t", name="llama8b-fbgemm")
    plan = build_plan(model, get_gpu("A10G"), make_settings(engine_version=version, max_model_len="4096"),
                      with_advice=False)
    return {"tp": 1, "enable_prefix_caching": None, "plan": plan_figures(plan)}


def test_the_vllm_line_carries_allow_deprecated_quantization_from_0_14():
    cmd = launch_commands("m", "nvidia_a10g", _fbgemm_entry("0.33.0"), "0.33.0")
    assert cmd["vllm"].endswith(" --allow-deprecated-quantization")
    assert "deprecated" not in cmd["check"] and "deprecated" not in cmd["sglang"]
    old = launch_commands("m", "nvidia_a10g", _fbgemm_entry("0.13.0"), "0.13.0")
    assert "deprecated" not in old["vllm"]
