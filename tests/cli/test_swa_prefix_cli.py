"""`kvledger simulate`'s prefix-cache hit rate on sliding-window models, per vLLM release (swa_retention.py)."""

from __future__ import annotations

import pytest
from cli_run import cli_json

# 10 prompts of 10,000 tokens sharing their first 8,000 (500 blocks of 16), 10 output tokens, one after another
WORKLOAD = ("--gpu", "h100", "--prompt-lengths", "fixed:10000", "--output-lengths", "fixed:10",
            "--shared-prefix-tokens", "8000", "--concurrency", "1", "--num-requests", "10", "--max-model-len", "16384")


def simulate(model: str, version: str) -> dict:
    return cli_json("simulate", model, *WORKLOAD, "--engine-version", version)


@pytest.mark.parametrize("version, hit_tokens", [("0.28.0", 72_000), ("0.29.0", 64_000), ("0.33.0", 64_000)])
def test_gpt_oss_hit_rate_per_release(version, hit_tokens):
    # gpt-oss-20b: W = 128, B = 16, a sliding hit needs cdiv(127, 16) = 8 blocks before it.
    # 0.28 (every full block hashed): prompts 2–10 hit the 500 shared blocks: 9 × 8,000 = 72,000 of 100,000.
    # 0.29+: prompt 1 keeps sliding blocks 616–623 only (before its replay boundary 9,999 // 16 = 624: its own
    # tokens); prompt 2's full chain is 500 blocks but sliding blocks 492–499 have no hash → hit 0, and its junction
    # (8,000) keeps them; prompts 3–10 hit 8,000 each: 8 × 8,000 = 64,000 of 100,000.
    d = simulate("openai/gpt-oss-20b", version)
    s = d["summary"]
    assert (s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]) == (hit_tokens, 100_000)
    assert s["prefix_cache_hit_rate"] == hit_tokens / 100_000
    source = "SlidingWindowManager.reachable_block_mask, read in 0.29 and 0.33" if version != "0.28.0" else \
        "SingleTypeKVCacheManager.cache_blocks, read in 0.19 and 0.28"
    assert any("hybrid prefix caching" in n and source in n for n in d["notes"])


def test_sliding_layers_only_never_hit_a_shared_system_prompt_from_0_29():
    # Mistral-7B-v0.1 (32 sliding layers, W = 4,096: 256 blocks needed): one KV cache group, so no junction is ever
    # pinned; each prompt keeps sliding blocks 368–623 (before 9,999 // 16 = 624), and the shared prefix's blocks
    # 244–367 before the hit point 500 never get a hash → 0 of 100,000 (0.28: 72,000, as gpt-oss)
    assert simulate("mistralai/Mistral-7B-v0.1", "0.33.0")["summary"]["prefix_cache_hit_tokens"] == 0
    assert simulate("mistralai/Mistral-7B-v0.1", "0.28.0")["summary"]["prefix_cache_hit_tokens"] == 72_000


def test_up_to_0_28_a_sliding_model_hits_sessions_as_a_full_attention_model_does():
    # vLLM 0.28 hashes every full block of every group, decoded ones included, so on the same 10 chat sessions
    # gpt-oss-20b hits exactly what Llama-3.1-8B does (a pool large enough that nothing is evicted): 188,160 of
    # 219,856 prompt tokens; before its decoded blocks were keyed it hit only the earlier turns' prompts
    def hit(model: str, version: str) -> tuple[int, int]:
        s = cli_json("simulate", model, "--gpu", "h100", "--workload", "chat", "--sessions", "10",
                     "--engine-version", version)["summary"]
        return s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]

    assert hit("openai/gpt-oss-20b", "0.28.0") == hit("meta-llama/Llama-3.1-8B", "0.28.0") == (188_160, 219_856)


@pytest.mark.parametrize("version, hit_tokens", [("0.28.0", 54_000), ("0.33.0", 48_000)])
def test_gemma_2_hit_rate_per_release(version, hit_tokens):
    # gemma-2-9b-it: W = 4,096, B = 16, need cdiv(4,095, 16) = 256 blocks; 10 prompts of 8,000 tokens sharing 6,000
    # (375 blocks). 0.28: prompts 2–10 hit 6,000 each = 54,000 of 80,000. 0.33: prompt 1 keeps sliding blocks
    # 243–498 (before 7,999 // 16 = 499), so prompt 2 finds 243–374 but not 119–242 (nor block 0) → 0, and pins
    # 119–374 at its junction (6,000); prompts 3–10 hit 6,000 each = 48,000 of 80,000
    s = cli_json("simulate", "google/gemma-2-9b-it", "--gpu", "h100", "--prompt-lengths", "fixed:8000",
                 "--output-lengths", "fixed:10", "--shared-prefix-tokens", "6000", "--concurrency", "1",
                 "--num-requests", "10", "--max-model-len", "8192", "--engine-version", version)["summary"]
    assert (s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]) == (hit_tokens, 80_000)
