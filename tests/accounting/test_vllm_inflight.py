"""Tokens in flight in a sliding-window group's start-up block demand (vLLM 0.33: PP and the model runner count).

Engine code read (vLLM 0.33.0 wheel): ``vllm/config/vllm.py``: ``max_in_flight_tokens`` = ``max_concurrent_batches`` ×
max_num_batched_tokens; ``max_concurrent_batches`` = PP + 1 with async scheduling on the V2 runner, 2 on the V1 runner
at PP 1, else PP; ``VllmConfig.__post_init__`` turns async scheduling off for the V1 runner under PP ("pipeline
parallelism") and on by default otherwise (mp and Ray V2 executors support it). ``vllm/v1/kv_cache_interface.py``:
a sliding group's demand is ``cdiv(min(W − 1 + F, L), B) + 1`` blocks; ``kv_cache_utils.py ::
get_max_concurrency_for_kv_cache_config`` prints blocks ÷ the groups' summed demand.
"""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_inflight import sliding_inflight_tokens
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_inflight_tokens_follow_max_concurrent_batches_in_033():
    v = (0, 33, 0)
    assert sliding_inflight_tokens(v, 8192, pp=1, v2_runner=True)[0] == 16_384  # PP + 1 = 2 batches
    assert sliding_inflight_tokens(v, 8192, pp=2, v2_runner=True)[0] == 24_576  # PP + 1 = 3 batches
    assert sliding_inflight_tokens(v, 8192, pp=1, v2_runner=False)[0] == 16_384  # V1, async: 2 batches
    assert sliding_inflight_tokens(v, 8192, pp=4, v2_runner=False)[0] == 32_768  # V1 under PP: async off, PP = 4
    # the same rule from 0.26 (SlidingWindowSpec takes max_in_flight_tokens: wheels 0.26.0–0.29.0; 0.25.0's takes
    # max_num_batched_tokens): 0.28 at PP 2 on the V2 runner counts 3 batches, 0.25 one max_num_batched_tokens
    assert sliding_inflight_tokens((0, 28, 0), 8192, pp=2, v2_runner=True)[0] == 24_576
    assert sliding_inflight_tokens((0, 26, 0), 8192, pp=1, v2_runner=False)[0] == 16_384
    assert sliding_inflight_tokens((0, 25, 0), 8192, pp=2, v2_runner=True)[0] == 8_192


def test_gpt_oss_20b_pp2_on_the_v2_runner_counts_three_batches():
    # gpt-oss-20b at PP 2: each stage 12 layers (6 sliding W = 128, 6 full), 8 KV heads × 64 × 2 (K,V) × 2 B =
    # 2,048 B per token per layer; 2 groups of 6; bytes_per_block = 6 × 16 × 2,048 = 196,608 B. Given 30 GiB:
    # 32,212,254,720 / 196,608 = 163,840 blocks. 0.33's default runner is V2 (every model from 0.29), async on:
    # F = 3 × 8,192 = 24,576. Demand at 131,072 tokens: full cdiv(131,072, 16) = 8,192; sliding
    # cdiv(127 + 24,576, 16) + 1 = 1,544 + 1 = 1,545; Σ 9,737 → 163,840 / 9,737 = 16.83x (17.76x with F = 2 × 8,192,
    # 9,225 blocks, kvledger's figure before). On the V1 runner async is off under PP: 2 batches, 9,225 blocks.
    s = make_settings(pp=2, engine_version="0.33.0", available_kv_memory_bytes=32_212_254_720)
    p = build_plan(load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu("H100-SXM"), s, with_roofline=False)
    assert (p.memory.bytes_per_block, p.memory.num_gpu_blocks, p.inflight_tokens) == (196_608, 163_840, 24_576)
    assert p.at_max_model_len.blocks_per_request == 9_737
    assert p.memory.printed_lines[-1].endswith("Maximum concurrency for 131,072 tokens per request: 16.83x")
    s1 = make_settings(pp=2, engine_version="0.33.0", available_kv_memory_bytes=32_212_254_720, model_runner="v1")
    p1 = build_plan(load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu("H100-SXM"), s1, with_roofline=False)
    assert (p1.inflight_tokens, p1.at_max_model_len.blocks_per_request) == (16_384, 9_225)


def test_gpt_oss_20b_on_028_counts_two_batches_as_025_counts_one():
    # vLLM 0.28.0's SlidingWindowSpec: min(W − 1 + extra_retained_tokens + max_in_flight_tokens, L), and
    # max_in_flight_tokens = max_concurrent_batches × max_num_batched_tokens = 2 × 8,192 at PP 1 (async on); 0.25.0's:
    # W − 1 + max_num_batched_tokens. gpt-oss-20b at PP 1: 24 layers (12 sliding W = 128, 12 full), 2,048 B per token
    # per layer; bytes_per_block = 12 × 16 × 2,048 = 393,216 B; 30 GiB given: 32,212,254,720 / 393,216 = 81,920 blocks.
    # At 131,072 tokens full 8,192 blocks; sliding 0.28 cdiv(127 + 16,384, 16) + 1 = 1,033 → Σ 9,225 → 8.88x (kvledger
    # said 9.40x before, 0.25's figure); 0.25 cdiv(127 + 8,192, 16) + 1 = 521 → Σ 8,713 → 81,920 / 8,713 = 9.40x
    model, gpu = load_model("openai/gpt-oss-20b", allow_hub=False), get_gpu("H100-SXM")
    for ver, inflight, demand, printed in (("0.28.0", 16_384, 9_225, "8.88x"), ("0.25.0", 8_192, 8_713, "9.40x")):
        p = build_plan(model, gpu, make_settings(engine_version=ver, available_kv_memory_bytes=32_212_254_720),
                       with_roofline=False)
        assert (p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (393_216, 81_920)
        assert (p.inflight_tokens, p.at_max_model_len.blocks_per_request) == (inflight, demand)
        assert p.memory.printed_lines[-1].endswith(f"Maximum concurrency for 131,072 tokens per request: {printed}")
