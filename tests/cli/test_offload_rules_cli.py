"""`kvledger offload` with the host tier's opt-in rules: --store-threshold, --eviction-policy, HiCache write_back and
a disk tier (--kv-tier-nvme: LMCache local_disk, HiCache file storage); each refused, in one paragraph, where the
engine or backend has no such rule."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
BASE = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--sessions", "6", "--session-rate", "1")


def _json(*flags: str) -> dict:
    r = runner.invoke(app, [*BASE, *flags, "--json"], catch_exceptions=False)
    return json.loads(r.stdout)


def test_store_threshold_and_arc_are_reported_with_their_sources():
    d = _json("--kv-offloading-size", "64", "--store-threshold", "2", "--eviction-policy", "arc")
    assert d["rules"]["store_threshold"]["value"] == 2 and "0.33.0" in d["rules"]["store_threshold"]["source"]
    assert d["rules"]["eviction_policy"]["value"] == "arc"
    s = d["tier_stats"]
    assert isinstance(s["stores_skipped"], int) and s["stores_skipped"] > 0
    assert "disk" not in s and "write_back_s" not in s
    plain = _json("--kv-offloading-size", "64")  # no rule on: neither key is written
    assert "rules" not in plain and "stores_skipped" not in plain["tier_stats"]


def test_disk_tier_capacity_from_the_plans_nvme_tier():
    d = _json("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB")
    disk = d["tier_stats"]["disk"]
    # 1 TiB // 131,072 B per token = 8,388,608 tokens // 256 per chunk = 32,768 chunks; read 7 GB/s (under the link)
    assert disk["capacity_units"] == 32768 and disk["read_bytes_per_s"] == 7e9
    assert disk["stored_units"] > 0 and d["rules"]["disk"]["capacity_units"] == 32768
    # SGLang's file storage tier below HiCache: 8,388,608 tokens // 64-token segments = 131,072 segments
    d = _json("--engine", "sglang", "--enable-hierarchical-cache", "--kv-tier-nvme", "1TiB",
              "--hicache-storage-prefetch-policy", "wait_complete")
    assert d["tier_stats"]["disk"]["capacity_units"] == 131072 and d["rules"]["disk"]["unit"] == "segment"
    assert d["tier_stats"]["disk"]["stored_units"] == d["tier_stats"]["stored_units"] > 0  # all written on


def test_hicache_write_back_is_simulated():
    # 6 sessions fit in one H100's HBM: nothing is evicted, so under write_back nothing reaches the host (0 stored,
    # 0 copied), where write_through copies every segment as it enters the tree
    d = _json("--engine", "sglang", "--enable-hierarchical-cache", "--hicache-write-policy", "write_back")
    s = d["tier_stats"]
    assert (s["stored_units"], s["write_back_tokens"], s["write_back_s"]) == (0, 0, 0.0)
    assert d["rules"]["hicache_write_policy"]["value"] == "write_back"
    wt = _json("--engine", "sglang", "--enable-hierarchical-cache")["tier_stats"]
    assert wt["stored_units"] > 0 and "write_back_s" not in wt


def test_simulate_takes_hicache_write_back():
    # simulate's tier flags (cli/tier_opts.py) reach the same simulated host tier, write_back included: 8 chat
    # sessions fit in HBM, so under write_back nothing is evicted and nothing reaches the host, where write_through
    # copies every segment as it enters the tree
    stored = {}
    for policy in ("write_through", "write_back"):
        r = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--workload", "chat",
                                "--sessions", "8", "--session-rate", "1", "--max-model-len", "32K", "--policy",
                                "sglang", "--enable-hierarchical-cache", "--hicache-write-policy", policy, "--json"],
                          catch_exceptions=False)
        t = json.loads(r.stdout)["kv_tiers"]
        assert t["host_tier"]["write_policy"] == policy
        stored[policy] = t["per_tier"][1]["stored_units"]
    assert stored["write_back"] == 0 < stored["write_through"]


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
