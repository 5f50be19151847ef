"""vLLM's start-up check by release where it counts other blocks than a request takes (accounting/vllm_check_demand.py).

Read in vllm/v1/core/kv_cache_utils.py:

* 0.14.0, 0.14.1, 0.15.0, 0.15.1, 0.16.0 ``get_kv_cache_configs``:
  ``_check_enough_kv_cache_memory(min(available_memory), _max_memory_usage_bytes_from_groups(vllm_config,
  global_kv_cache_groups), ...)``: the groups of the merged specs of
  every worker, so under pipeline parallelism ``group_size = max(len(group.layer_names))`` is the whole model's layer
  count per group, checked against one worker's memory. 0.17.0, 0.17.1, 0.18.0 check
  ``_project_kv_cache_groups_to_worker``'s groups, each worker's own layers.
* 0.11.0, 0.12.0, 0.13.0 ``check_enough_kv_cache_memory`` per worker before grouping: ``max_memory_usage_bytes`` summed
  over the worker's layer specs, so no padding slot.
"""

from __future__ import annotations

import json

import pytest

from kvledger.accounting.advice_len import check_need, estimate_len, printed_estimate
from kvledger.accounting.kvlayout_types import AllocGroup, KVLayout
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_check_demand import check_demand_blocks
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

# Llama 3.1 8B: 32 layers, 8 KV heads × 128, bf16: 2 × 8 × 128 × 2 = 4,096 B per token per layer; a 16-token page is
# 65,536 B. Under --pp 2 a stage keeps 16 layers: one group of 16 slots, 16 × 65,536 = 1,048,576 B a block. The whole
# model's group has 32 slots: 32 × 65,536 B a block, twice the stage's.
PAGE = 65_536
STAGE = KVLayout((AllocGroup("full", 16, 16, 16, PAGE),), 16 * PAGE, 16, 0,
                 global_layout=KVLayout((AllocGroup("full", 32, 32, 16, PAGE),), 32 * PAGE, 16, 0))


@pytest.mark.parametrize("ver,blocks", [((0, 13, 0), 8_192), ((0, 14, 0), 16_384), ((0, 16, 0), 16_384),
                                        ((0, 17, 0), 8_192), ((0, 19, 0), 8_192)])
def test_014_to_016_count_the_whole_models_layers_on_one_stage(ver, blocks):
    # 131,072 tokens: cdiv(131,072, 16) = 8,192 blocks of the stage; 0.14–0.16 count 32 × 65,536 × 8,192 B = 16 GiB,
    # 16 GiB / 1 MiB = 16,384 of the stage's blocks
    assert check_demand_blocks(STAGE, 131_072, 8_192, ver) == blocks


def _llama_pp2(version: str):
    s = make_settings(engine_version=version, max_model_len=131_072, pp=2, available_kv_memory_bytes=10_000 * 2**20)
    return build_plan(load_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("h100"), s, with_roofline=False)


@pytest.mark.parametrize("version", ["0.14.0", "0.16.0"])
def test_014_to_016_refuse_a_pp_stage_that_holds_the_request(version):
    # 10,000 blocks of 1 MiB a stage: the request takes 8,192 of the 9,999 usable, the check counts 16,384 > 10,000
    # (before 0.29 it compares with every block). vLLM's estimate: 2 × cdiv(L, 16) ≤ 10,000 → cdiv(L, 16) ≤ 5,000 →
    # L = 80,000
    p = _llama_pp2(version)
    assert p.memory.num_gpu_blocks == 10_000 and p.memory.bytes_per_block == 2**20
    assert p.row_at(131_072).blocks_per_request == 8_192 and check_need(p) == 16_384
    assert p.advice.verdict == "max_model_len_does_not_fit"
    assert "16,384 blocks as vLLM" in p.advice.message and "32 layer slots a block" in p.advice.message
    assert printed_estimate(p) == 80_000 and p.advice.estimated_max_model_len == 80_000


@pytest.mark.parametrize("version", ["0.13.0", "0.17.0"])
def test_the_releases_around_check_each_stages_own_layers(version):
    p = _llama_pp2(version)  # 8,192 blocks ≤ 9,999 usable: the check (per worker) passes, one request runs
    assert check_need(p) == 8_192 and p.advice.verdict == "fits" and p.fits


# Gemma 3 27B (google/gemma-3-27b-it's text config): 62 layers, every 6th full attention: 10 full, 52 sliding (window
# 1,024); 16 KV heads × 128, bf16: 2 × 16 × 128 × 2 = 8,192 B per token per layer, a 16-token page 131,072 B. Group
# size min(52, 10) = 10 (52 ≥ 1.25 × 10): sliding 6 groups (5 full, 1 with 2 layers: 8 padding slots), full 1 group;
# a block is 10 × 131,072 = 1,310,720 B. With 8,192 tokens in flight, a 131,072-token request takes per sliding
# group cdiv(min(1,023 + 8,192, 131,072), 16) + 1 = 577 blocks, the full group 8,192: 6 × 577 + 8,192 = 11,654.
# vLLM ≤ 0.13 counts the real layers: (52 × 577 + 10 × 8,192) pages = 111,924 pages = 11,192.4 blocks → 11,193.
GEMMA3 = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 5376,
          "intermediate_size": 21504, "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16,
          "head_dim": 128, "sliding_window": 1024, "sliding_window_pattern": 6, "vocab_size": 262208,
          "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "query_pre_attn_scalar": 168}


def _gemma3(tmp_path, version: str, blocks: int):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(GEMMA3))
    s = make_settings(engine_version=version, max_model_len=131_072, max_num_batched_tokens=8_192,
                      available_kv_memory_bytes=blocks * 1_310_720)
    return build_plan(load_model(str(cfg)), get_gpu("h100"), s, with_roofline=False)


def test_013_counts_no_padding_slot(tmp_path):
    p = _gemma3(tmp_path, "0.13.0", 11_300)
    assert p.layout.padding_layers == 8 and p.layout.bytes_per_block == 1_310_720
    assert p.row_at(131_072).blocks_per_request == 11_654 and check_need(p) == 11_193
    # 11,193 ≤ 11,300: vLLM 0.13 starts, though the request's 11,654 blocks exceed the 11,299 usable; the length that
    # runs: 6 × 577 + cdiv(L, 16) ≤ 11,299 → cdiv(L, 16) ≤ 7,837 → 125,392
    assert p.advice.verdict == "fits" and not p.fits
    assert "not the layout's 8 padding slots" in p.advice.message and "--max-model-len 125392 runs" in p.advice.message


def test_019_counts_the_padding(tmp_path):
    p = _gemma3(tmp_path, "0.19.0", 11_300)  # every group's blocks, padding included: 11,654 > 11,300
    assert check_need(p) == 11_654 and p.advice.verdict == "max_model_len_does_not_fit"


def test_013_estimate_searches_without_padding(tmp_path):
    # 11,100 blocks: 11,193 > 11,100, refused. vLLM's estimate: (30,004 + 10 × cdiv(L, 16)) / 10 ≤ 11,100 →
    # cdiv(L, 16) ≤ 8,099 → 129,584; the length that runs: 3,462 + cdiv(L, 16) ≤ 11,099 → 7,637 → 122,192
    p = _gemma3(tmp_path, "0.13.0", 11_100)
    assert p.advice.verdict == "max_model_len_does_not_fit"
    assert printed_estimate(p) == 129_584 and estimate_len(p) == 122_192
