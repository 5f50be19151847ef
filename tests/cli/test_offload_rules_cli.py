"""`kvledger offload` with the host tier's opt-in rules: --store-threshold, --eviction-policy, HiCache write_back and
a disk tier (--kv-tier-nvme: LMCache local_disk, HiCache file storage); each refused, in one paragraph, where the
engine or backend has no such rule."""

from __future__ import annotations

import json

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
BASE = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--sessions", "6", "--session-rate", "1")
# One chat session (seed 0; synthesize_sessions) fits in HBM, so every turn hits the previous turns' prefix there:
# 512 system tokens; turns (input, output) = (1,709, 155), (273, 265), (73, 40), (47, 215). Prompts 2,221, 2,649,
# 2,987, 3,074 tokens; the context ends at 3,289 tokens. Content is keyed per whole 64-token segment; the tokens after
# a request's last whole segment are keyed as the request's own (never shared with the next turn).
ONE = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--sessions", "1", "--session-rate", "1")


def test_store_threshold_and_arc_are_reported_with_their_sources():
    d = cli_json(*ONE, "--kv-offloading-size", "64", "--store-threshold", "2", "--eviction-policy", "arc")
    assert d["rules"]["store_threshold"]["value"] == 2 and "0.33.0" in d["rules"]["store_threshold"]["source"]
    assert d["rules"]["eviction_policy"]["value"] == "arc"
    s = d["tier_stats"]
    # ONE's session, 16-token blocks, store_threshold 2 (a block's first offer is skipped, its second stores it; no
    # host load, so each turn offers every block from its first; nothing evicted, so ARC stores as LRU would). vLLM
    # 0.33.0 offers prompt blocks only (offload_prompt_only, default True: _calc_num_offloadable_tokens caps at the
    # prompt). A turn's blocks are keyed by segment through its prompt's and output's whole segments (t0: 37, 2,368
    # tokens; t1: 45; t2: 47; t3's prompt: 48), so every block offered below is keyed by segment, shared with the
    # next turn:
    # t0 offers its 2,221-token prompt // 16 = 138 blocks: 138 skipped.
    # t1 offers 2,649 // 16 = 165: blocks 0-137 stored (138); 138-164 skipped (27).
    # t2 offers 2,987 // 16 = 186: 138-164 stored (27); 165-185 skipped (21; t1 never offered its output blocks).
    # t3 offers 3,074 // 16 = 192: 165-185 stored (21); 186-191 skipped (6).
    # stored 138 + 27 + 21 = 186; skipped 138 + 27 + 21 + 6 = 192.
    assert (s["stored_units"], s["stores_skipped"], s["evicted_units"], s["host_hit_tokens"]) == (186, 192, 0, 0)
    assert "disk" not in s and "write_back_s" not in s
    plain = cli_json(*BASE, "--kv-offloading-size", "64")  # no rule on: neither key is written
    assert "rules" not in plain and "stores_skipped" not in plain["tier_stats"]


def test_disk_tier_capacity_from_the_plans_nvme_tier():
    d = cli_json(*ONE, "--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB")
    disk = d["tier_stats"]["disk"]
    # 1 TiB // 131,072 B per token = 8,388,608 tokens // 256 per chunk = 32,768 chunks; read 7 GB/s (under the link)
    assert disk["capacity_units"] == 32768 and disk["read_bytes_per_s"] == 7e9
    # ONE's session in LMCache's 256-token chunks of each prompt (every chunk ends inside the turn's whole segments,
    # so t1-t3 find t0's chunks held): t0 2,221 // 256 = 8 stored; t1 2,649 // 256 = 10: 2 more; t2 2,987 // 256 = 11:
    # 1; t3 3,074 // 256 = 12: 1. 12 in host memory, each written on to the disk; nothing evicted
    assert (d["tier_stats"]["stored_units"], disk["stored_units"], disk["evicted_units"]) == (12, 12, 0)
    assert d["rules"]["disk"]["capacity_units"] == 32768
    # SGLang's file storage tier below HiCache: 8,388,608 tokens // 64-token segments = 131,072 segments
    d = cli_json(*ONE, "--engine", "sglang", "--enable-hierarchical-cache", "--kv-tier-nvme", "1TiB",
                 "--hicache-storage-prefetch-policy", "wait_complete")
    assert d["tier_stats"]["disk"]["capacity_units"] == 131072 and d["rules"]["disk"]["unit"] == "segment"
    # write_through backs up each whole 64-token segment as it enters the tree, and every backup is written on:
    # ONE's context ends at 3,289 tokens = 51 whole segments (its last 25 tokens are no whole segment: not backed up)
    assert d["tier_stats"]["disk"]["stored_units"] == d["tier_stats"]["stored_units"] == 51


def test_hicache_write_back_is_simulated():
    # 6 sessions fit in one H100's HBM: nothing is evicted, so under write_back nothing reaches the host (0 stored,
    # 0 copied), where write_through copies every segment as it enters the tree
    d = cli_json(*BASE, "--engine", "sglang", "--enable-hierarchical-cache", "--hicache-write-policy", "write_back")
    s = d["tier_stats"]
    assert (s["stored_units"], s["write_back_tokens"], s["write_back_s"]) == (0, 0, 0.0)
    assert d["rules"]["hicache_write_policy"]["value"] == "write_back"
    # write_through on ONE's session: its 3,289-token context's 51 whole segments, each copied once
    wt = cli_json(*ONE, "--engine", "sglang", "--enable-hierarchical-cache")["tier_stats"]
    assert wt["stored_units"] == 51 and "write_back_s" not in wt


def test_simulate_takes_hicache_write_back():
    # simulate's tier flags (cli/tier_opts.py) reach the same simulated host tier, write_back included: ONE's chat
    # session (simulate draws the same one) fits in HBM, so under write_back nothing is evicted and nothing reaches
    # the host, where write_through copies each of its 51 whole segments as it enters the tree
    stored = {}
    for policy in ("write_through", "write_back"):
        r = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--workload", "chat",
                                "--sessions", "1", "--session-rate", "1", "--max-model-len", "32K", "--policy",
                                "sglang", "--enable-hierarchical-cache", "--hicache-write-policy", policy, "--json"],
                          catch_exceptions=False)
        t = json.loads(r.stdout)["kv_tiers"]
        assert t["host_tier"]["write_policy"] == policy
        stored[policy] = t["per_tier"][1]["stored_units"]
    assert (stored["write_back"], stored["write_through"]) == (0, 51)


@pytest.mark.parametrize("flags, words", [
    (("--engine", "sglang", "--enable-hierarchical-cache", "--store-threshold", "2"), "no such gate"),
    (("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--store-threshold", "2"), "no such gate"),
    (("--kv-offloading-size", "64", "--engine-version", "0.14.0", "--store-threshold", "2"), "0.33.0"),
    (("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--eviction-policy", "arc"), "LRU here"),
    (("--kv-offloading-size", "64", "--eviction-policy", "fifo"), "lru or arc"),
    (("--kv-offloading-size", "64", "--kv-tier-nvme", "1TiB"), "local_disk"),
    (("--engine", "sglang", "--enable-hierarchical-cache", "--kv-tier-nvme", "1TiB"), "only wait_complete"),
    (("--kv-offloading-size", "64", "--store-threshold", "-1"), "--store-threshold"),
])
def test_rule_the_engine_lacks_is_one_paragraph_error(flags, words):
    r = runner.invoke(app, [*BASE, *flags])
    assert r.exit_code != 0 and isinstance(r.exception, InputError)
    assert words in str(r.exception) and "\n" not in str(r.exception)
