"""``--kv-cache-dtype auto`` on a checkpoint that declares its KV quantization (vllm_kv_auto.py), release by release.

Llama-3.1-8B: 2 (K, V) × 32 layers × 8 KV heads × 128 head_dim = 65,536 elements per token: 131,072 B in bf16,
65,536 B in fp8_e4m3 (1 B each).
"""

from __future__ import annotations

import json
from importlib import resources

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_kv_auto import resolve_auto_kv
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config


def _llama8b(qc: dict):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models" / "meta-llama--Meta-Llama-3.1-8B.json")
                     .read_text())
    raw["quantization_config"] = qc
    return parse_config(raw, source="t", name="llama8b")


MODELOPT = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
CT = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float",
                                                                                 "strategy": "channel"}}},
      "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False}}


def test_modelopt_fp8_kv_is_taken_under_auto_from_0_14():
    m = _llama8b(MODELOPT)
    assert resolve_auto_kv(m, "auto", (0, 14, 0))[0] == "fp8_e4m3"
    assert resolve_auto_kv(m, "auto", (0, 13, 0))[0] == "auto"  # no resolve_kv_cache_dtype_string before 0.14
    assert resolve_auto_kv(m, "bf16", (0, 33, 0)) == ("bf16", "")  # an explicit dtype wins


def test_the_plan_halves_the_kv_bytes_and_says_why():
    gpu = get_gpu("L40S")
    p = build_plan(_llama8b(MODELOPT), gpu, make_settings(), with_advice=False)
    assert (p.kv.bytes_per_token, p.kv.kv_cache_dtype) == (65_536, "fp8_e4m3")
    assert any(n.startswith("--kv-cache-dtype auto → fp8_e4m3: the checkpoint's kv_cache_quant_algo is FP8")
               for n in p.memory.notes)
    old = build_plan(_llama8b(MODELOPT), gpu, make_settings(engine_version="0.13.0"), with_advice=False)
    assert old.kv.bytes_per_token == 131_072


def test_compressed_tensors_kv_scheme_is_not_taken_under_auto():
    p = build_plan(_llama8b(CT), get_gpu("L40S"), make_settings(), with_advice=False)
    assert p.kv.bytes_per_token == 131_072
    assert any("does not resolve auto from the checkpoint's kv_cache_scheme" in n for n in p.memory.notes)
