"""The recurrent-state dtype vLLM resolves ``--mamba-ssm-cache-dtype auto`` to, and what it does to the hybrid block.

Engine code read (vLLM 0.33.0 wheel; 0.13.0, 0.16.0, 0.17.0, 0.19.0 and 0.20.0 for the version switches):
``vllm/model_executor/models/config.py : NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype`` (auto → the
config's ``mamba_ssm_cache_dtype``, else float16 in 0.13–0.19 and float32 from 0.20) and
``Qwen3_5ForConditionalGenerationConfig.verify_and_update_config`` (auto → the text config's ``mamba_ssm_dtype``,
from 0.17), both reached through ``MODELS_CONFIG_MAP`` in ``VllmConfig.try_verify_and_update_config``;
``vllm/model_executor/layers/mamba/mamba_utils.py : MambaStateDtypeCalculator._mamba_state_dtype`` (conv state in
the model dtype, SSM state in ``mamba_ssm_cache_dtype``);
``vllm/platforms/interface.py : Platform._align_hybrid_block_size`` (attention block = alignment ×
cdiv(state page, alignment × attention bytes per token));
``vllm/v1/kv_cache_interface.py : MambaSpec.max_memory_usage_bytes`` (align mode: 2 + 1 checkpoint pages).
"""

from __future__ import annotations

import json

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import ConfigError

H100 = get_gpu("H100-SXM")
AVAIL_40_GIB = 42_949_672_960  # given, so only the layout rule moves the figures
NEMOTRON_H = "nvidia/Nemotron-H-56B-Base-8K"

# Qwen3.5-35B-A3B's text config as published on the Hub (the fields that size its cache)
QWEN3_5_TEXT = {
    "model_type": "qwen3_5_moe_text", "dtype": "bfloat16", "hidden_size": 2048, "num_hidden_layers": 40,
    "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(40)],
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "linear_conv_kernel_dim": 4,
    "linear_num_key_heads": 16, "linear_key_head_dim": 128, "linear_num_value_heads": 32,
    "linear_value_head_dim": 128, "mamba_ssm_dtype": "float32", "full_attention_interval": 4,
    "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "vocab_size": 248320, "max_position_embeddings": 262144}


def plan(model, *, tp=1, version="0.33.0", **kw):
    s = make_settings(tp=tp, max_model_len=8192, available_kv_memory_bytes=AVAIL_40_GIB, engine_version=version, **kw)
    return build_plan(model, H100, s, with_roofline=False, with_advice=False)


def qwen3_5(tmp_path, **text):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
                                "text_config": {**QWEN3_5_TEXT, **text}}))
    return load_model(str(path), allow_hub=False)


def test_nemotron_h_state_is_float32_from_vllm_020():
    # Nemotron-H-56B at TP 2: Mamba-2 layer, 256 heads × 64, 8 groups, state 256, conv kernel 4.
    # conv (4 − 1) × (16,384 + 2 × 8 × 256) / 2 = 30,720 elements × 2 B = 61,440 B;
    # SSM 128 heads × 64 × 256 = 2,097,152 elements × 4 B (float32: the config names none) = 8,388,608 B;
    # page 8,450,048 B (bf16 SSM would give 4,255,744). Attention: 4 KV heads × 128 × 2 × 2 B = 2,048 B/token.
    # Block = 16 × cdiv(8,450,048, 16 × 2,048) = 16 × 258 = 4,128 tokens (Mamba-2 checkpoint alignment 1).
    # 54 state + 10 full layers → groups of 10: bytes_per_block = 10 × 4,128 × 2,048 = 84,541,440 B;
    # n = ⌊42,949,672,960 / 84,541,440⌋ = 508. At 8,192: cdiv(8,192, 4,128) = 2 + 6 state groups × 3 pages = 20.
    p = plan(load_model(NEMOTRON_H, allow_hub=False), tp=2)
    assert p.settings.mamba_ssm_cache_dtype == "float32"
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (4128, 84_541_440, 508)
    assert p.at_max_model_len.blocks_per_request == 20
    assert any("Mamba SSM state in float32" in n for n in p.memory.notes)


def test_nemotron_h_state_stays_two_bytes_before_vllm_020():
    # 0.13–0.19 default to float16 (2 B, as bf16): page 61,440 + 2,097,152 × 2 = 4,255,744 B →
    # 16 × cdiv(4,255,744, 32,768) = 16 × 130 = 2,080-token blocks.
    p = plan(load_model(NEMOTRON_H, allow_hub=False), tp=2, version="0.19.0")
    assert p.settings.mamba_ssm_cache_dtype == "float16"
    assert p.memory.block_size == 2080


def test_qwen3_5_reads_mamba_ssm_dtype_from_vllm_017(tmp_path):
    # Qwen3.5-35B-A3B at TP 1: GDN layer conv 3 × (2 × 16 × 128 + 32 × 128) = 24,576 × 2 B = 49,152 B;
    # SSM 32 × 128 × 128 = 524,288 × 4 B (the config's mamba_ssm_dtype float32) = 2,097,152 B; page 2,146,304 B.
    # Attention: 2 KV heads × 256 × 2 × 2 B = 2,048 B/token. GDN on FlashInfer (Hopper): 64-token checkpoint grid,
    # block = 64 × cdiv(2,146,304, 64 × 2,048) = 64 × 17 = 1,088 tokens (bf16 would give 576).
    # 30 state + 10 full → groups of 10: bytes_per_block = 10 × 1,088 × 2,048 = 22,282,240 B;
    # n = ⌊42,949,672,960 / 22,282,240⌋ = 1,927. At 8,192: cdiv(8,192, 1,088) = 8 + 3 groups × 3 pages = 17;
    # 1,927 / 17 = 113.35x.
    p = plan(qwen3_5(tmp_path))
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (1088, 22_282_240, 1927)
    assert p.at_max_model_len.blocks_per_request == 17
    assert "113.35x" in p.memory.printed_lines[0]


def test_an_explicit_flag_wins_over_the_config(tmp_path):
    # --mamba-ssm-cache-dtype given: vLLM keeps it (and warns); 524,288 × 2 + 49,152 = 1,097,728 B → 64 × 9 = 576
    p = plan(qwen3_5(tmp_path), mamba_ssm_cache_dtype="bfloat16")
    assert p.memory.block_size == 576
    assert not any("Mamba SSM state" in n for n in p.memory.notes)


def test_a_bad_state_dtype_names_the_field(tmp_path):
    with pytest.raises(ConfigError, match="text_config.mamba_ssm_dtype"):
        qwen3_5(tmp_path, mamba_ssm_dtype="float64")


def test_an_absent_kv_head_count_is_said(tmp_path):
    # vLLM config/model.py ModelConfig.get_total_num_kv_heads (0.33: ModelArchConfigConvertorBase): no
    # num_key_value_heads (nor n_head_kv / num_kv_heads / multi_query_group_num / multi_query) → num_attention_heads.
    # Llama-3.1-8B without the field: 2 × 32 layers × 32 heads × 128 × 2 B = 524,288 B/token, and the plan says why.
    raw = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 128256,
           "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    m = load_model(str(path), allow_hub=False)
    assert m.layers[0].kv_bytes_per_token(2, 1) * 32 == 524_288
    assert any("names no KV head count" in n for n in m.notes)
