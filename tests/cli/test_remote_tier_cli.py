"""The remote KV store in the simulator through the shared TierFlags (--kv-tier-remote, --network-bandwidth): a
`remote` row in simulate's, goodput's and offload's tier figures, LMCache's remote below its disk (or its CPU chunks)
and SGLang HiCache's mooncake storage as its one storage backend."""

from __future__ import annotations

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
MODEL = ["meta-llama/Llama-3.1-8B", "--gpu", "H100"]
SIM = ["simulate", *MODEL, "--workload", "chat", "--sessions", "6", "--session-rate", "1", "--max-model-len", "32K"]
OFF = ["offload", *MODEL, "--sessions", "6", "--session-rate", "1"]
LMC = ("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache")


def test_lmcache_remote_is_the_row_below_the_disk_in_simulate_and_offload():
    flags = (*LMC, "--kv-tier-nvme", "1GiB", "--kv-tier-remote", "2TiB", "--network-bandwidth", "12.5")
    k = cli_json(*SIM, *flags)["kv_tiers"]
    o = cli_json(*OFF, *flags)
    assert [r["tier"] for r in k["per_tier"]] == ["hbm", "host_dram", "nvme", "remote"]
    remote = k["per_tier"][3]
    # 2 TiB // 131,072 B/token = 16,777,216 tokens // 256-token chunks = 65,536 chunks; 12.5 GB/s (< the host link's
    # 51.2 GB/s achievable, so the network's figure is the tier's)
    assert (remote["capacity_units"], remote["unit_tokens"], remote["read_bytes_per_s"]) == (65_536, 256, 12.5e9)
    # every chunk the CPU tier stores is put to remote too (batched_put to every backend); 2 TiB never fills here
    assert remote["stored_units"] == k["per_tier"][1]["stored_units"] > 0 and remote["evicted_units"] == 0
    orem = o["tier_stats"]["remote"]
    assert (orem["capacity_units"], orem["stored_units"], orem["hit_tokens"]) == (
        remote["capacity_units"], remote["stored_units"], remote["hit_tokens"])
    assert k["rules"]["remote"]["source"].startswith("LMCache 0.5.6") and o["rules"] == k["rules"]


def test_sglang_mooncake_storage_replaces_the_disk_and_both_are_refused():
    k = cli_json(*SIM, "--policy", "sglang", "--enable-hierarchical-cache", "--kv-tier-remote", "1TiB",
              "--hicache-storage-prefetch-policy", "wait_complete")["kv_tiers"]
    # 8,388,608 tokens // 64-token session segments = 131,072 segments, at the default 50 GB/s (one 400 Gb/s NIC)
    assert [r["tier"] for r in k["per_tier"]] == ["hbm", "host_dram", "remote"]
    assert (k["per_tier"][2]["capacity_units"], k["per_tier"][2]["read_bytes_per_s"]) == (131_072, 50e9)
    assert "mooncake" in k["rules"]["remote"]["source"] and "disk" not in k["rules"]
    res = runner.invoke(app, [*SIM, "--policy", "sglang", "--enable-hierarchical-cache", "--kv-tier-remote", "1TiB",
                              "--kv-tier-nvme", "1TiB", "--hicache-storage-prefetch-policy", "wait_complete"])
    assert isinstance(res.exception, InputError) and "takes one storage backend" in str(res.exception)
    assert "\n" not in str(res.exception)


def test_simulate_table_shows_the_remote_column():
    res = runner.invoke(app, [*SIM, *LMC, "--kv-tier-remote", "1TiB"])
    assert res.exit_code == 0, res.output
    assert "remote" in res.output and "reads at 50.00 GB/s" in res.output


@pytest.mark.parametrize(("flags", "words"), [
    (("--kv-offloading-size", "64", "--kv-tier-remote", "1TiB"), "nor a remote one"),
    ((*LMC, "--network-bandwidth", "3"), "exists only with --kv-tier-remote"),
    ((*LMC, "--kv-tier-remote", "1TiB", "--network-bandwidth", "0"), "--network-bandwidth"),
])
def test_bad_remote_flags_are_one_paragraph_errors(flags, words):
    res = runner.invoke(app, [*SIM, *flags])
    assert isinstance(res.exception, InputError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


def test_plan_takes_the_remote_flags_from_the_group():
    d = cli_json("plan", *MODEL, "--kv-offloading-size", "64", "--kv-tier-remote", "1TiB", "--network-bandwidth",
                 "12.5")
    remote = next(t for t in d["kv_tiers"]["tiers"] if t["name"] == "remote")
    assert remote["capacity_tokens"] == 8_388_608 and remote["read_bytes_per_s"] == 12.5e9
    res = runner.invoke(app, ["plan", *MODEL, "--network-bandwidth", "3"])
    assert res.exit_code != 0 and "exists only with --kv-tier-remote" in str(res.exception)
