"""One vocabulary for the KV-tier flags (the shared TierFlags group, cli/flag_groups.py): `offload` and `simulate` take
--store-threshold, --eviction-policy, --kv-tier-nvme, --nvme-read-bandwidth and --hicache-storage-prefetch-policy
with the same names, units and errors, and build the simulated host tier with one function
(analyses.judgments.offload.sim_host_tier); `plan` takes the disk flags from the same group."""

from __future__ import annotations

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
MODEL = ["meta-llama/Llama-3.1-8B", "--gpu", "H100"]
# One chat session (seed 0), the one test_offload_rules_cli.py's ONE works by hand: both commands draw it
SIM = ["simulate", *MODEL, "--workload", "chat", "--sessions", "1", "--session-rate", "1", "--max-model-len", "32K"]
OFF = ["offload", *MODEL, "--sessions", "1", "--session-rate", "1"]


def test_simulate_takes_the_vllm_reuse_gate_and_arc_as_offload_does():
    flags = ("--kv-offloading-size", "64", "--store-threshold", "2", "--eviction-policy", "arc")
    k = cli_json(*SIM, *flags)["kv_tiers"]
    o = cli_json(*OFF, *flags)
    host, s = k["per_tier"][1], o["tier_stats"]
    # the same session (seed 0, 64-token segments, 32K) through the same host tier: the same counts, worked in
    # test_offload_rules_cli.py: 186 blocks stored on their second offer, 192 first offers skipped, nothing loaded
    assert host["stores_skipped"] == s["stores_skipped"] == 192
    assert host["stored_units"] == 186 and host["hit_tokens"] == 0
    assert (host["hit_tokens"], host["stored_units"], host["evicted_units"]) == (
        s["host_hit_tokens"], s["stored_units"], s["evicted_units"])
    assert k["rules"] == o["rules"] and k["rules"]["eviction_policy"]["value"] == "arc"
    assert k["host_tier"]["store_threshold"] == 2 and k["host_tier"]["eviction"] == "arc"
    assert k["plan"]["settings"]["store_threshold"] == 2  # the settings block names the rule given


def test_simulate_takes_lmcache_local_disk_with_its_read_bandwidth():
    flags = ("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB",
             "--nvme-read-bandwidth", "3")
    k = cli_json(*SIM, *flags)["kv_tiers"]
    o = cli_json(*OFF, *flags)
    disk = k["per_tier"][2]
    # 1 TiB // 131,072 B/token = 8,388,608 tokens // 256-token chunks = 32,768 chunks; read 3 GB/s (< the 51.2 GB/s
    # host link, so the disk's own figure is the tier's)
    assert disk["tier"] == "nvme" and (disk["capacity_units"], disk["unit_tokens"]) == (32_768, 256)
    assert disk["read_bytes_per_s"] == 3e9 == k["host_tier"]["disk_read_bytes_per_s"]
    od = o["tier_stats"]["disk"]
    assert (disk["capacity_units"], disk["stored_units"], disk["hit_tokens"]) == (
        od["capacity_units"], od["stored_units"], od["hit_tokens"])
    # 12 256-token chunks of the session's prompts (test_offload_rules_cli.py), each written on to the disk
    assert disk["stored_units"] == 12 and k["ttft_s_with_tier"] == o["ttft_s_with_offload"]


def test_simulate_takes_sglang_storage_with_wait_complete():
    k = cli_json(*SIM, "--policy", "sglang", "--enable-hierarchical-cache", "--kv-tier-nvme", "1TiB",
              "--hicache-storage-prefetch-policy", "wait_complete")["kv_tiers"]
    # 8,388,608 disk tokens // 64-token session segments = 131,072 segments; every host backup written on: the
    # session's 3,289-token context holds 51 whole segments, each backed up once (test_offload_rules_cli.py)
    disk = k["per_tier"][2]
    assert disk["capacity_units"] == 131_072 and k["rules"]["disk"]["prefetch_policy"] == "wait_complete"
    assert disk["stored_units"] == k["per_tier"][1]["stored_units"] == 51


def test_plan_takes_the_disk_flags_from_the_group_and_not_the_simulated_rules():
    d = cli_json("plan", *MODEL, "--kv-offloading-size", "64", "--kv-tier-nvme", "1TiB", "--nvme-read-bandwidth", "3")
    nvme = next(t for t in d["kv_tiers"]["tiers"] if t["name"] == "nvme")
    assert nvme["capacity_tokens"] == 8_388_608 and nvme["read_bytes_per_s"] == 3e9
    res = runner.invoke(app, ["plan", *MODEL, "--kv-offloading-size", "64", "--store-threshold", "2"])
    assert res.exit_code == 2 and "No such option" in res.output  # plan runs no rule: the flag is not offered


BAD = [
    (("--kv-offloading-size", "64", "--eviction-policy", "fifo"), "--eviction-policy must be lru or arc"),
    (("--kv-offloading-size", "64", "--store-threshold", "-1"), "--store-threshold -1"),
    (("--kv-offloading-size", "64", "--store-threshold", "two"), None),  # click: not a valid integer
    (("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "lots"),
     "cannot read 'lots' as a size"),
    (("--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB",
      "--nvme-read-bandwidth", "0"), "--nvme-read-bandwidth 0"),
    (("--kv-offloading-size", "64", "--nvme-read-bandwidth", "3"), "exists only with --kv-tier-nvme"),
    (("--kv-offloading-size", "64", "--kv-tier-nvme", "1TiB"), "native connector has no disk tier"),
    (("--kv-offloading-size", "64", "--hicache-write-policy", "write_back"),
     "--hicache-write-policy is an SGLang flag"),
    (("--kv-offloading-size", "64", "--kv-tier-nvme", "1TiB", "--hicache-storage-prefetch-policy", "wait_complete"),
     "--hicache-storage-prefetch-policy is an SGLang flag"),
    (("--store-threshold", "2"), "no host tier"),
]


@pytest.mark.parametrize("command", ["simulate", "offload"])
@pytest.mark.parametrize(("flags", "words"), BAD)
def test_bad_tier_flag_is_the_same_one_paragraph_error_in_both_commands(command, flags, words):
    res = runner.invoke(app, [*(SIM if command == "simulate" else OFF), *flags])
    assert res.exit_code != 0
    if words is None:  # a value of the wrong type: click's usage error, no traceback
        assert res.exit_code == 2 and "Invalid value" in res.output
        return
    assert isinstance(res.exception, InputError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


@pytest.mark.parametrize(("command", "engine"), [("simulate", ["--policy", "sglang"]),
                                               ("offload", ["--engine", "sglang"])])
def test_sglang_errors_name_the_flag_that_chose_the_engine(command, engine):
    base = SIM if command == "simulate" else OFF
    for flags, words in [(("--kv-offloading-size", "64"), f"is a vLLM flag; with {' '.join(engine)} it"),
                         (("--enable-hierarchical-cache", "--store-threshold", "2"), f"{engine[0]} vllm with"),
                         (("--enable-hierarchical-cache", "--kv-tier-nvme", "1TiB",
                           "--hicache-storage-prefetch-policy", "soon"), "must be one of best_effort")]:
        res = runner.invoke(app, [*base, *engine, *flags])
        assert isinstance(res.exception, InputError), res.output
        assert words in str(res.exception) and "\n" not in str(res.exception)


def test_goodput_simulate_runs_the_host_tier_as_simulate_does():
    trace = ["--trace", "mooncake", "--num-requests", "30", "--kv-offloading-size", "64", "--store-threshold", "2"]
    g = cli_json("goodput", "--simulate", *MODEL, "--slo", "ttft=60s", *trace)
    k = cli_json("simulate", *MODEL, *trace)["kv_tiers"]
    # the same run (seeded trace, the host tier from sim_host_tier): the same tier block, TTFTs and rules
    assert g["kv_tiers"]["per_tier"] == k["per_tier"] and g["kv_tiers"]["rules"] == k["rules"]
    assert g["kv_tiers"]["ttft_s_with_tier"] == k["ttft_s_with_tier"]
    # 64 GiB // 2 MiB per 16-token block = 32,768 blocks; every TTFT under 60 s (simulate's p99 < 10 s): 30 of 30 good
    assert g["kv_tiers"]["host_tier"]["capacity_units"] == 32_768 and (g["num_requests"], g["num_good"]) == (30, 30)


@pytest.mark.parametrize(("extra", "words"), [
    # --target with tier flags searches the rate with the tiers beside the rate without them (one seed)
    (["--target", "0.9", "--axis", "concurrency"], "--target with KV tier flags searches the request rate"),
    (["--target", "0.9", "--seeds", "2"], "--seeds with KV tier flags: the capacity with the tiers is searched"),
    (["--policy", "sglang"], "--kv-offloading-size is a vLLM flag; with --policy sglang"),
    (["--eviction-policy", "mru"], "--eviction-policy must be lru or arc"),
])
def test_goodput_simulate_tier_errors(extra, words):
    res = runner.invoke(app, ["goodput", "--simulate", *MODEL, "--slo", "ttft=1s", "--num-requests", "20",
                              "--kv-offloading-size", "64", *extra])
    assert isinstance(res.exception, InputError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


def test_goodput_of_files_refuses_tier_flags(tmp_path):
    f = tmp_path / "run.json"
    f.write_text("{}")
    res = runner.invoke(app, ["goodput", str(f), "--slo", "ttft=1s", "--kv-offloading-size", "64"])
    assert isinstance(res.exception, InputError) and "--kv-offloading-size describes a simulation" in str(res.exception)
