"""--num-gpu-blocks-override in vLLM's start-up check, by version.

vLLM V1 before 0.21 checks one max_model_len request against the profiled available memory and replaces the block
count with the override only after: 0.19.0's and 0.20.0's ``v1/core/kv_cache_utils.py : get_kv_cache_configs`` call
``_check_enough_kv_cache_memory(avail_mem, …)`` on the profiled memory, then ``get_kv_cache_config_from_groups`` →
``get_num_blocks`` → ``may_override_num_blocks`` (0.9.0: ``get_kv_cache_config`` → ``check_enough_kv_cache_memory``,
then ``_get_kv_cache_config_uniform_type``). From 0.21.0 ``get_kv_cache_configs`` first replaces each worker's memory
with override × ``_pool_bytes_per_block`` ("Reflect that in `available_memory`"), so the check sizes from the override
(kept in 0.28.0, 0.29.0 and 0.33.0's ``kv_cache_planning.py``). Both print "GPU KV cache size" and "Maximum
concurrency" from the overridden count (``_report_kv_cache_config`` reads ``kv_cache_config.num_blocks``)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# The real vLLM 0.19.0 start-up of Llama-3.1-8B-Instruct on one H100 (tests/fixtures/vllm_startups_0_19/logs/
# meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log): 29,751 blocks of 16 tokens of 2 MiB each (16 tokens ×
# 32 layers × 2 (K, V) × 8 KV heads × 128 × 2 B), given exactly as the pool's bytes.
POOL_BYTES = 29_751 * 2_097_152


def _plan(version: str, override: int, max_model_len: int):
    s = make_settings(engine_version=version, max_model_len=max_model_len, allow_long_max_model_len=True,
                      available_kv_memory_bytes=POOL_BYTES, num_gpu_blocks_override=override)
    return build_plan(load_model(MODEL), get_gpu("h100"), s, with_roofline=False)


@pytest.mark.parametrize("version", ["0.19.0", "0.20.0"])
def test_before_021_the_check_ignores_a_small_override_so_vllm_starts(version):
    # max_model_len 8,192 needs 8,192 / 16 = 512 blocks: the check compares them with the memory's 29,751 and passes;
    # the override then leaves 400 blocks, 399 usable (block 0 is the null block): the request never finishes
    p = _plan(version, 400, 8192)
    assert p.memory.check_num_gpu_blocks == 29_751 and p.memory.num_gpu_blocks == 400
    assert p.advice.verdict == "fits"
    assert f"vLLM {version} starts, but a request of max_model_len 8,192 tokens can never finish" in p.advice.message
    assert "--max-model-len 6384 runs" in p.advice.message  # 399 × 16
    # printed from the overridden count in every release: 400 // 1 group × 16 = 6,400 tokens; 400 / 512 = 0.78x
    assert p.memory.printed_lines == ("GPU KV cache size: 6,400 tokens",
                                      "Maximum concurrency for 8,192 tokens per request: 0.78x")


@pytest.mark.parametrize("version, estimate", [("0.21.0", 6400), ("0.28.0", 6400), ("0.29.0", 6384)])
def test_from_021_the_check_sizes_from_the_override(version, estimate):
    # 512 blocks needed against the override's 400 (the null block counted before 0.29: 400 × 16 = 6,400; reserved
    # from 0.29: 399 × 16 = 6,384): refused, as before this change
    p = _plan(version, 400, 8192)
    assert p.memory.check_num_gpu_blocks is None
    assert p.advice.verdict == "max_model_len_does_not_fit"
    assert p.advice.estimated_max_model_len == estimate


def test_before_021_a_large_override_does_not_pass_a_length_the_memory_cannot_hold():
    # 600,000 tokens need 37,500 blocks: the override's 39,999 usable blocks hold them, but 0.19's check compares them
    # with the memory's 29,751 and refuses; its estimate is from the memory: 29,751 × 16 = 476,016; short by
    # (37,500 − 29,751) × 2 MiB
    old, new = _plan("0.19.0", 40_000, 600_000), _plan("0.28.0", 40_000, 600_000)
    assert old.advice.verdict == "max_model_len_does_not_fit" and new.advice.verdict == "fits"
    assert old.advice.estimated_max_model_len == 476_016
    assert old.advice.shortfall_bytes == (37_500 - 29_751) * 2_097_152
    assert "the override's 39,999 usable blocks would hold it, but the check comes first" in old.advice.message
    fix = old.advice.options[0]
    assert fix.action == "--max-model-len 476016" and fix.max_requests == 39_999 // 29_751


def test_v0_checks_the_override():
    # V0 overrides first (0.9.0 engine/llm_engine.py _initialize_kv_caches) and refuses max_model_len above
    # block_size × num_gpu_blocks (worker/worker.py raise_if_cache_size_invalid): no memory check to keep
    p = _plan("0.6.0", 400, 8192)
    assert p.memory.check_num_gpu_blocks is None and p.advice.verdict == "max_model_len_does_not_fit"
