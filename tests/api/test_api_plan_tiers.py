"""kvledger.plan takes the KV tier options `kvledger plan` takes (--kv-offloading-size, --kv-offloading-backend,
SGLang's HiCache flags, --kv-tier-nvme/--kv-tier-remote and their bandwidths, --link-fraction, --suffix-tokens):
before, a long-context planner in Python could not size a host tier at all. The document equals the command's, the
tier plan is ``.kv_tiers``, and a bad size is refused in the range's words, naming the parameter."""

from __future__ import annotations

import pytest
from api_cli_json import cli_json, plain

import kvledger
from kvledger.errors import InputError

L8 = "meta-llama/Llama-3.1-8B"


def test_plan_takes_vllm_host_offloading_as_the_command():
    r = kvledger.plan(L8, "H100", max_model_len="32K", kv_offloading_size=64)
    d = plain(r.to_dict())
    assert d == cli_json("plan", L8, "--gpu", "H100", "--max-model-len", "32K", "--kv-offloading-size", "64")
    host = next(t for t in d["kv_tiers"]["tiers"] if t["name"] == "host_dram")
    # Llama-3.1-8B's KV: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 B = 131,072 B a token, 2,097,152 B a
    # 16-token block at TP 1; 64 GiB = 68,719,476,736 B ÷ 2,097,152 B = 32,768 blocks = 524,288 tokens
    assert (host["capacity_bytes"], host["capacity_blocks"], host["capacity_tokens"]) == (64 * 2**30, 32_768, 524_288)
    assert r.kv_tiers is not None and r.kv_tiers.to_dict() == r.to_dict()["kv_tiers"]
    assert kvledger.plan(L8, "H100").kv_tiers is None and "kv_tiers" not in kvledger.plan(L8, "H100").to_dict()


def test_plan_takes_sglang_hicache_as_the_command():
    d = plain(kvledger.plan(L8, "H100", engine="sglang", enable_hierarchical_cache=True, hicache_ratio=2.0).to_dict())
    assert d == cli_json("plan", L8, "--gpu", "H100", "--engine", "sglang", "--enable-hierarchical-cache",
                         "--hicache-ratio", "2")
    hbm, host = (next(t for t in d["kv_tiers"]["tiers"] if t["name"] == n) for n in ("hbm", "host_dram"))
    # SGLang's host pool: int(device tokens × ratio) + one padding page of 1 token (page size 1)
    assert host["capacity_tokens"] == int(hbm["capacity_tokens"] * 2) + 1


@pytest.mark.parametrize("size", [-5, 0])
def test_a_size_at_or_below_zero_is_refused_in_the_ranges_words(size):
    # ranges.TIER_SIZE_GIB: (0, 1,048,576) GiB, for -5 and 0 alike (before, -5 read "non-negative" and 0 "above 0")
    with pytest.raises(InputError, match=rf"^kvledger\.plan: kv_offloading_size {size} is out of range; allowed: "
                                         r"\(0, 1,048,576\) GiB"):
        kvledger.plan(L8, "H100", kv_offloading_size=size)
