"""The default max_model_len by engine and version: vLLM's two YaRN rules (vLLM config/model.py
_get_and_verify_max_len, read in 0.19 and 0.33) and SGLang's get_context_length (read in 0.4.0, 0.5.3–0.5.23: the
first of max_sequence_length, seq_length, max_seq_len, model_max_length, max_position_embeddings × rope_scaling's
factor, 1 when rope_scaling names original_max_position_embeddings or rope_type llama3). SGLang 0.5.9 pins
transformers 4.57.1 (the config's rope_scaling as written); 0.5.10 pins 5.3.0, whose standardize_rope_params
(modeling_rope_utils.py) adds original_max_position_embeddings to any yarn/llama3/longrope dict and whose
Gemma3TextConfig nests the dict under rope_parameters["full_attention"]."""

from __future__ import annotations

import json

import pytest

from kvledger.accounting.max_model_len import config_len, default_max_model_len, engine_config_len
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config

# Qwen/Qwen3-8B's published fields (max_position_embeddings 40,960)
QWEN3 = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936,
             max_position_embeddings=40960, torch_dtype="bfloat16")
# google/gemma-3-4b-it's text_config length and RoPE block (linear factor 8 on 131,072)
GEMMA3 = dict(model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], hidden_size=2560, num_hidden_layers=34,
              num_attention_heads=8, num_key_value_heads=4, head_dim=256, intermediate_size=10240, vocab_size=262208,
              max_position_embeddings=131072, sliding_window=1024, torch_dtype="bfloat16",
              rope_scaling={"factor": 8.0, "rope_type": "linear"})


def _qwen3(**rope):
    return parse_config({**QWEN3, "rope_scaling": rope}, source="qwen3-8b-rope")


def test_yarn_with_its_original_length_sglang_keeps_the_config_length():
    # the model card's YaRN block: vLLM 0.19 32,768 × 4 = 131,072; vLLM 0.33 40,960; SGLang: the dict names
    # original_max_position_embeddings, so factor 1: 40,960 under both transformers
    spec = _qwen3(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
    assert spec.max_model_len_by_engine == {"vllm up to 0.26": 131_072, "vllm 0.33": 40_960,
                                            "sglang 0.4.0-0.5.9": 40_960, "sglang 0.5.10-0.5.23": 40_960}
    for v in ("0.4.6", "0.5.9", "0.5.10", "0.5.23", None):
        n, note = engine_config_len(spec, "sglang", v)
        assert n == 40_960 and "get_context_length" in note and "131,072" in note


def test_yarn_without_original_length_splits_at_sglang_0_5_10():
    # no original_max_position_embeddings: vLLM 0.19 starts from max_position_embeddings, 40,960 × 4 = 163,840;
    # SGLang 0.5.9 (transformers 4.57.1) multiplies the same: 163,840; SGLang 0.5.10 (transformers 5.3.0) gets
    # original_max_position_embeddings = 40,960 from standardize_rope_params, so factor 1: 40,960
    spec = _qwen3(rope_type="yarn", factor=4.0)
    assert spec.sglang_context_len == (163_840, 40_960)
    assert engine_config_len(spec, "sglang", "0.5.9") == (163_840, None)  # the same as vLLM 0.26's: no note
    assert engine_config_len(spec, "sglang", "0.5.10")[0] == 40_960
    plans = {v: build_plan(spec, get_gpu("H100"), make_settings(engine="sglang", engine_version=v),
                           with_roofline=False) for v in ("0.5.9", "0.5.23")}
    assert {v: p.memory.max_model_len for v, p in plans.items()} == {"0.5.9": 163_840, "0.5.23": 40_960}
    assert any("SGLang 0.5.23's get_context_length" in n for n in plans["0.5.23"].memory.notes)


@pytest.mark.parametrize("rope,expected", [
    ({"type": "linear", "factor": 2.0}, 81_920),     # 40,960 × 2 in every rule (vLLM scales linear too)
    ({"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}, 40_960),  # no factor anywhere
    ({"rope_type": "dynamic", "factor": 2.0}, 81_920),  # 40,960 × 2 in every rule
])
def test_non_yarn_rules_agree(rope, expected):
    spec = _qwen3(**rope)
    assert set(spec.max_model_len_by_engine.values()) == {expected}
    assert engine_config_len(spec, "sglang", "0.5.3") == (expected, None)


def test_gemma3_linear_factor_sglang_before_transformers_5():
    # vLLM takes Gemma-3's 131,072 as already scaled; SGLang 0.5.9 (transformers 4.57.1: flat rope_scaling) multiplies
    # by 8: 1,048,576; SGLang 0.5.10+ (transformers 5: the dict moved under rope_parameters["full_attention"], no
    # top-level factor): 131,072
    spec = parse_config(GEMMA3, source="gemma-3-4b-text")
    assert spec.max_model_len_by_engine == {"vllm up to 0.26": 131_072, "vllm 0.33": 131_072,
                                            "sglang 0.4.0-0.5.9": 1_048_576, "sglang 0.5.10-0.5.23": 131_072}
    n, note = config_len(spec, make_settings(engine="sglang", engine_version="0.5.9"))
    assert n == 1_048_576 and "transformers 4.57" in note


def test_sglang_takes_the_first_length_key_not_the_smallest():
    # SGLang's CONTEXT_LENGTH_KEYS order puts seq_length before max_position_embeddings: 65,536 is taken though
    # max_position_embeddings is 40,960; vLLM takes the smallest of its keys, 40,960
    spec = parse_config({**QWEN3, "seq_length": 65536}, source="qwen3-seq-length")
    assert spec.derived_max_model_len == 40_960 and spec.sglang_context_len == (65_536, 65_536)


def test_session_cap_follows_the_engine_and_version(tmp_path):
    # a YaRN config of 8,192 positions, factor 4 from 8,192: vLLM 0.19 derives 8,192 × 4 = 32,768, vLLM 0.33 and
    # SGLang 8,192; the session cap is the smaller of kvledger's 32,768 and that context
    from kvledger.analyses.judgments.offload import session_context_cap
    from kvledger.cli.search_flags import session_cap

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN3, "max_position_embeddings": 8192, "rope_scaling": {
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}}))
    model = load_model(str(path))
    got = {(e, v): default_max_model_len(model, e, v) for e, v in (("vllm", "0.19.0"), ("vllm", "0.33.0"),
                                                                   ("vllm", None), ("sglang", "0.5.9"))}
    assert got == {("vllm", "0.19.0"): 32_768, ("vllm", "0.33.0"): 8_192, ("vllm", None): 8_192,
                   ("sglang", "0.5.9"): 8_192}
    assert session_context_cap(None, got[("vllm", "0.33.0")])[0] == 8_192
    assert session_cap(str(path), None, "0.19.0")[0] == 32_768 and session_cap(str(path), None, "0.33.0")[0] == 8_192


def test_bundled_models_agree_under_every_rule():
    # every bundled config derives one length under all four rules (e.g. DeepSeek-V3: YaRN 4,096 × 40 = 163,840 =
    # max_position_embeddings; SGLang keeps 163,840 as the dict names original_max_position_embeddings)
    assert len(set(load_model("deepseek-ai/DeepSeek-V3").max_model_len_by_engine.values())) == 1
    assert load_model("deepseek-ai/DeepSeek-V3").sglang_context_len == (163_840, 163_840)


def test_trtllm_names_the_rule_its_length_follows():
    # TensorRT-LLM's own rule (newest: the PyTorch backend's infer_max_seq_len, tensorrt_llm/_torch/models/
    # modeling_utils.py, no factor for yarn): max_position_embeddings 40,960, with vLLM 0.26's 32,768 × 4 = 131,072
    # beside it (tests/accounting/test_trtllm_max_seq_len.py has the other runtime)
    spec = _qwen3(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
    n, note = engine_config_len(spec, "trtllm", None)
    assert n == 40_960 and "TensorRT-LLM's max_seq_len" in note and "131,072" in note
    p = build_plan(spec, get_gpu("H100"), make_settings(engine="trtllm"), with_roofline=False)
    assert p.memory.max_model_len == 40_960 and note in p.memory.notes


def test_a_search_sglang_line_longer_than_sglangs_context_sets_its_switch(tmp_path):
    # the vLLM 0.19 candidate serves 32,768 × 4 = 131,072 tokens; SGLang derives 40,960 (the YaRN dict names its
    # original length) and refuses a longer --context-length unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1;
    # the vLLM 0.33 candidate's 40,960 needs no switch
    from kvledger.analyses.search.launch import launch_for
    from kvledger.analyses.search.screen import plan_figures

    path = tmp_path / "config.json"
    path.write_text(json.dumps({**QWEN3, "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                                                          "original_max_position_embeddings": 32768}}))
    model = load_model(str(path))
    cmds = {}
    for v in ("0.19.0", "0.33.0"):
        plan = build_plan(model, get_gpu("H200"), make_settings(engine_version=v), with_roofline=False)
        cmds[v] = launch_for(str(path), "nvidia_h200_sxm", {"tp": 1, "enable_prefix_caching": None,
                                                             "plan": plan_figures(plan)}, v)
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 python -m sglang" in cmds["0.19.0"]["sglang"]
    assert "--context-length 131072" in cmds["0.19.0"]["sglang"] and "above the 40,960 tokens" in cmds["0.19.0"]["note"]
    assert "SGLANG_ALLOW" not in cmds["0.33.0"]["sglang"] and "--context-length 40960" in cmds["0.33.0"]["sglang"]
