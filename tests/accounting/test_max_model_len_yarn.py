"""The default max_model_len by the plan's vLLM version: YaRN from its original length up to 0.26, as already scaled
in 0.33 (vLLM config/model.py _get_and_verify_max_len, read in 0.19, 0.26 and 0.33)."""

from __future__ import annotations

import pytest

from kvledger.accounting.max_model_len import config_len, long_len_notes, resolve_max_model_len
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import InputError

# Qwen/Qwen3-8B's published fields with the YaRN block its model card gives (factor 4 from 32,768)
QWEN3_YARN = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096, num_hidden_layers=36,
                  num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288,
                  vocab_size=151936, max_position_embeddings=40960, torch_dtype="bfloat16",
                  rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
# meta-llama/Llama-2-7b-hf's published fields with a linear factor 2
LLAMA2_LINEAR = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096, num_hidden_layers=32,
                     num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008, vocab_size=32000,
                     max_position_embeddings=4096, torch_dtype="float16",
                     rope_scaling={"type": "linear", "factor": 2.0})


@pytest.mark.parametrize("version,expected", [
    ("0.19.0", 131_072),  # original_max_position_embeddings 32,768 × factor 4
    ("0.26.0", 131_072),  # the same rule, read in 0.26
    ("0.33.0", 40_960),   # no YaRN factor: max_position_embeddings 40,960 as already scaled
    (None, 40_960),       # the default version is 0.33
])
def test_qwen3_yarn_default_length_follows_the_version(version, expected):
    spec = parse_config(QWEN3_YARN, source="qwen3-8b-yarn")
    assert (spec.derived_max_model_len, spec.yarn_as_scaled_max_model_len) == (131_072, 40_960)
    s = make_settings(engine_version=version)
    length, source = resolve_max_model_len(spec, s)
    assert length == expected
    rule = "applies no YaRN factor" if expected == 40_960 else "scales a YaRN config from its original length"
    assert rule in source and long_len_notes(spec, s, length, source) == [source]
    p = build_plan(spec, get_gpu("H100"), s, with_roofline=False)
    assert p.memory.max_model_len == expected


def test_qwen3_yarn_given_length_is_checked_against_the_versions_length():
    spec = parse_config(QWEN3_YARN, source="qwen3-8b-yarn")
    with pytest.raises(InputError, match=r"131,072 exceeds the 40,960 tokens .*already scaled"):
        resolve_max_model_len(spec, make_settings(max_model_len=131_072))
    assert resolve_max_model_len(spec, make_settings(max_model_len=131_072, engine_version="0.19.0")) == (131_072,
                                                                                                             "given")
    # SGLang's get_context_length applies no factor where rope_scaling names original_max_position_embeddings:
    # 40,960 (tests/accounting/test_context_len_by_engine.py)
    assert config_len(spec, make_settings(engine="sglang"))[0] == 40_960


@pytest.mark.parametrize("version", ["0.19.0", "0.33.0"])
def test_linear_factor_is_applied_by_both_versions(version):
    # 4,096 × 2 = 8,192 under both rules; no per-version note
    spec = parse_config(LLAMA2_LINEAR, source="llama-2-7b-linear2")
    assert (spec.derived_max_model_len, spec.yarn_as_scaled_max_model_len) == (8_192, 8_192)
    s = make_settings(engine_version=version)
    length, source = resolve_max_model_len(spec, s)
    assert length == 8_192 and long_len_notes(spec, s, length, source) == []


@pytest.mark.parametrize("model,expected", [
    ("deepseek-ai/DeepSeek-V3", 163_840),  # YaRN 4,096 × 40 = max_position_embeddings 163,840
    ("openai/gpt-oss-120b", 131_072),      # YaRN 4,096 × 32 = 131,072
])
def test_bundled_yarn_models_give_the_same_length_under_both_rules(model, expected):
    spec = load_model(model)
    assert spec.derived_max_model_len == spec.yarn_as_scaled_max_model_len == expected
    for v in ("0.19.0", "0.33.0"):
        assert config_len(spec, make_settings(engine_version=v)) == (expected, None)
