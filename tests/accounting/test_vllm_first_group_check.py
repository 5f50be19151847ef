"""vLLM 0.14–0.18's start-up check counts the first KV cache group alone (accounting/vllm_check_demand.py).

Read in vllm/v1/core/kv_cache_utils.py: 0.14.0 and 0.18.0 ``_max_memory_usage_bytes_from_groups`` return
``group_size × page_size × cdiv(kv_cache_groups[0].kv_cache_spec.max_memory_usage_bytes, page_size)``; 0.19.0 sums
``cdiv(group.kv_cache_spec.max_memory_usage_bytes, page_size)`` over every group; 0.13.0 has no such function and
``check_enough_kv_cache_memory`` sums ``max_memory_usage_bytes`` over every layer. ``get_kv_cache_configs`` checks
max_model_len (``_check_enough_kv_cache_memory``) and fits --max-model-len auto (``_auto_fit_max_model_len``) with it.

gpt-oss-20b worked by hand: 24 layers alternating sliding (window 128, first) and full attention, 8 KV heads × 64,
bf16: 2 × 8 × 64 × 2 = 2,048 B per token per layer; 12 + 12 layers → two groups of 12 slots, a block of 16 tokens is
12 × 16 × 2,048 = 393,216 B. With 8,192 tokens in flight (max_num_batched_tokens) a 131,072-token request counts
sliding cdiv(min(127 + 8,192, 131,072), 16) + 1 = 520 + 1 = 521 blocks and full cdiv(131,072, 16) = 8,192: 8,713.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.accounting.kvlayout_types import AllocGroup, KVLayout
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_auto_len import auto_max_model_len
from kvledger.accounting.vllm_check_demand import check_demand_blocks, check_estimate_len
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

BPB = 393_216  # 12 slots × 16 tokens × 2,048 B (module docstring)
GPT_OSS = KVLayout((AllocGroup("sliding_window", 12, 12, 16, 32_768, 128), AllocGroup("full", 12, 12, 16, 32_768)),
                   BPB, 16, 0)


@pytest.mark.parametrize("ver,blocks", [((0, 13, 0), 8_713), ((0, 14, 0), 521), ((0, 18, 0), 521),
                                        ((0, 19, 0), 8_713), (None, 8_713)])
def test_the_check_counts_the_first_group_in_014_to_018_only(ver, blocks):
    assert check_demand_blocks(GPT_OSS, 131_072, 8_192, ver) == blocks


def test_a_single_group_is_the_same_in_every_release():
    # one full-attention group: cdiv(131,072, 16) = 8,192 whatever the release
    one = KVLayout((AllocGroup("full", 24, 24, 16, 32_768),), 24 * 32_768, 16, 0)
    assert {check_demand_blocks(one, 131_072, 8_192, v) for v in ((0, 13, 0), (0, 17, 0), (0, 19, 0))} == {8_192}


def test_the_estimate_searches_with_the_checks_count():
    # 1,000 blocks, 0.19: sliding cdiv(min(8,319, L), 16) + 1 plus full cdiv(L, 16); below 8,319 that is
    # 2 × cdiv(L, 16) + 1 ≤ 1,000 → cdiv(L, 16) ≤ 499 → L = 7,984. 0.17 counts the sliding group alone, at most 521
    # blocks: every length passes, the search returns its upper end
    assert check_estimate_len(GPT_OSS, 1_000, 8_192, 131_072, (0, 19, 0)) == 7_984
    assert check_estimate_len(GPT_OSS, 1_000, 8_192, 131_072, (0, 17, 0)) == 131_072
    # 500 blocks, 0.17: cdiv(min(8,319, L), 16) + 1 ≤ 500 → cdiv(L, 16) ≤ 499 → 7,984; 0.19: 2c + 1 ≤ 500 → 3,984
    assert check_estimate_len(GPT_OSS, 500, 8_192, 131_072, (0, 17, 0)) == 7_984
    assert check_estimate_len(GPT_OSS, 500, 8_192, 131_072, (0, 19, 0)) == 3_984


@pytest.mark.parametrize("ver,length", [((0, 14, 0), 131_072), ((0, 18, 0), 131_072), ((0, 19, 0), 7_984)])
def test_auto_keeps_the_models_length_in_014_to_018(ver, length):
    # a 1,000-block pool (no null block kept back before 0.29): 0.14–0.18 count 521 ≤ 1,000 blocks for 131,072 tokens
    # and keep it; 0.19 counts 8,713 and lowers it to 7,984 (test above)
    notes: list[str] = []
    s = SimpleNamespace(auto_max_model_len=True, num_gpu_blocks_override=None)
    assert auto_max_model_len(s, ver, GPT_OSS, (1_000, 1_000), 8_192, 131_072, notes) == length
    if ver < (0, 19, 0):
        assert "it takes 521 of the 1,000 blocks the start-up check counts" in notes[0]
        assert "one 131,072-token request takes 8,713 blocks of the pool" in notes[0]


def _plan(version: str, blocks: int):
    s = make_settings(engine_version=version, max_model_len=131_072, available_kv_memory_bytes=blocks * BPB)
    return build_plan(load_model("openai/gpt-oss-20b"), get_gpu("h100"), s, with_roofline=False)


@pytest.mark.parametrize("version", ["0.14.0", "0.17.0", "0.18.0"])
def test_014_to_018_start_where_the_pool_holds_no_max_model_len_request(version):
    # 1,000 blocks: the check's 521 pass, the request's 8,713 exceed the 999 usable ones; the length that runs is
    # 2 × cdiv(L, 16) + 1 ≤ 999 → 7,984
    p = _plan(version, 1_000)
    assert p.memory.num_gpu_blocks == 1_000 and p.row_at(131_072).blocks_per_request == 8_713
    assert p.advice.verdict == "fits" and not p.fits
    assert "can never be scheduled: it needs 8,713 blocks" in p.advice.message
    assert "where it counts 521, so the check passes" in p.advice.message
    assert "--max-model-len 7984 runs" in p.advice.message


@pytest.mark.parametrize("version", ["0.13.0", "0.19.0"])
def test_013_and_019_refuse_the_same_pool(version):
    p = _plan(version, 1_000)
    assert p.advice.verdict == "max_model_len_does_not_fit" and p.advice.estimated_max_model_len == 7_984
    assert "(8,713 blocks)" in p.advice.message


def test_017_refuses_below_the_first_group_and_prints_its_own_estimate():
    # 500 blocks: 0.17's check counts 521 > 500 and refuses; its printed estimate is the first group's 7,984, which
    # a request never gets (it needs 2 × 499 + 1 = 999 blocks); 3,984 runs on the 499 usable blocks
    p = _plan("0.17.0", 500)
    assert p.advice.verdict == "max_model_len_does_not_fit" and p.advice.estimated_max_model_len == 7_984
    assert "(521 blocks as vLLM 0.17.0's start-up check counts only the first of the 2 KV cache groups" in \
        p.advice.message
    assert "short by 0.01 GiB" in p.advice.message  # (521 − 500) × 393,216 B = 8,257,536 B = 0.0077 GiB
    assert p.advice.shortfall_bytes == 21 * BPB
    assert "a request that long would never be scheduled: 3,984 runs" in p.advice.message


def test_doctor_says_vllms_own_estimate_is_the_first_groups_in_014_to_018():
    # vLLM 0.17.0 refusing 131,072 tokens on 500 blocks prints the first group's estimate 7,984 (above); the plan's 499
    # usable blocks run 3,984 (2 × 249 + 1 = 499). 0.19.0 prints the all-groups estimate: no caveat
    from types import SimpleNamespace as NS

    from kvledger.analyses.doctor.max_len_fix import max_len_fix

    text = "To serve at least one request ... the estimated maximum model length is 7984. Try increasing"
    log = NS(failures=[NS(text=text, line_no=12)], version="0.17.0", startup=NS())
    ctx = NS(log=log, model_plan=_plan("0.17.0", 500))
    fix = max_len_fix(ctx)
    assert fix.startswith("(--max-model-len 7984: vLLM's own estimate of the longest that fits, line 12; vLLM 0.17.0's")
    assert fix.endswith("on the plan's 499 usable blocks 3,984 runs)")
    ctx.log.version, ctx.model_plan = "0.19.0", _plan("0.19.0", 500)
    assert max_len_fix(ctx) == "(--max-model-len 7984: vLLM's own estimate of the longest that fits, line 12)"


def test_simulate_runs_the_pool_017_starts_with_only_where_it_checks_the_requests():
    # vLLM 0.17 starts on 1,000 blocks though no max_model_len request (8,713 blocks with the in-flight tokens) ever
    # runs: a caller that checks its requests (simulate: null_block_edge.py) gets the pool, with 8,713 − 999 = 7,714
    # blocks of slack past the usable ones; one that does not is refused, saying why
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.errors import DoesNotFitError

    cfg, _ = engine_config_from_plan(_plan("0.17.0", 1_000), null_block_edge=True)
    assert cfg.num_usable_blocks == 999 and cfg.startup_counts_null_block == 7_714
    with pytest.raises(DoesNotFitError, match="where it counts 521.*goes ahead where none is that long"):
        engine_config_from_plan(_plan("0.17.0", 1_000), null_block_edge=False)
