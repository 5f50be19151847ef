"""`kvledger plan` with KV tier flags (host tier tokens, break-even, JSON, one-paragraph errors) and `offload`."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})


def run(*args):
    return runner.invoke(app, list(args), catch_exceptions=False)


def test_plan_prints_host_tier_tokens_and_break_even():
    # 256 GiB // 2,097,152 B per 16-token block = 131,072 blocks = 2,097,152 tokens (tests/accounting/test_kv_tiers.py);
    # break-even 158 tokens: the prefill priced as offload and simulate price it (the measured GEMM curve, layer
    # kernels, the engine's CPU term: 26.03 ms to recompute 1K tokens), not the bare roofline's 316 (21.06 ms)
    r = run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "256GiB")
    assert "2,097,152" in r.stdout and "131,072 blocks" in r.stdout and "158 tokens" in r.stdout
    assert "prefill priced by simulate's step cost, as `offload` and `simulate` price these steps" in " ".join(
        r.stdout.split())
    r = run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "256", "--json")
    d = json.loads(r.stdout)["kv_tiers"]
    assert d["tiers"][1]["capacity_tokens"] == 2_097_152 and d["break_even"][0]["break_even_tokens"] == 158
    assert d["tiers"][1]["unit_name"] == "block" and d["tiers"][1]["unit_tokens"] == 16


def test_plan_and_offload_give_one_break_even():
    # the user's report: plan said 316 / 2,427 tokens (host / NVMe), offload 158 / 669 for the same tiers; both now
    # price the recompute with simulate's step cost: the same break-evens and the same recompute at 1K tokens
    tiers = ["--kv-offloading-size", "64GiB", "--kv-offloading-backend", "lmcache", "--kv-tier-nvme", "1TiB"]
    plan = json.loads(run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", *tiers, "--json").stdout)["kv_tiers"]
    off = json.loads(run("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", *tiers, "--sessions", "2",
                         "--json").stdout)["kv_tiers"]
    assert [b["break_even_tokens"] for b in plan["break_even"]] == [158, 669]
    assert [b["break_even_tokens"] for b in off["break_even"]] == [158, 669]
    assert plan["break_even"][0]["recompute_s_per_1k"] == pytest.approx(off["break_even"][0]["recompute_s_per_1k"])
    assert plan["break_even"][0]["recompute_s_per_1k"] == pytest.approx(0.02603, abs=5e-6)


def test_plan_sglang_hicache_and_no_block_without_flags():
    r = run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "sglang", "--enable-hierarchical-cache",
            "--hicache-size", "100", "--json")
    d = json.loads(r.stdout)["kv_tiers"]
    assert d["tiers"][1]["capacity_tokens"] == 762_940  # 1e11 // 131,072 = 762,939, + 1 padding page
    r = run("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--json")
    assert "kv_tiers" not in json.loads(r.stdout)


def test_invalid_tier_flag_is_one_paragraph_error():
    r = runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--engine", "sglang",
                            "--kv-offloading-size", "64"])
    # the entry point prints an InputError as "error: <message>" (cli/main.py); here it surfaces as the exception
    from kvledger.errors import InputError

    assert r.exit_code != 0 and isinstance(r.exception, InputError)
    assert "is a vLLM flag; with --engine sglang" in str(r.exception) and "\n" not in str(r.exception)


def test_offload_command_json_reports_tiers_and_both_runs():
    r = run("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64", "--sessions", "8",
            "--session-rate", "1", "--json")
    d = json.loads(r.stdout)
    # 64 GiB // 2,097,152 B per block = 32,768 CPU blocks
    assert d["kv_tiers"]["tiers"][1]["capacity_blocks"] == 32768
    assert d["tier_stats"]["host_capacity_units"] == 32768
    assert d["workload"]["num_sessions"] == 8 and d["ttft_s_without_offload"]["count"] == d["workload"]["num_turns"]
    assert d["more_gpus"] is None
    r = run("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64", "--sessions", "8",
            "--session-rate", "1", "--compare-gpus", "2", "--json")
    g = json.loads(r.stdout)["more_gpus"]
    assert g["num_gpus"] == 2 and g["router"] == "session_affinity" and g["ttft_s"]["count"] > 0


def test_offload_cost_lines_at_given_prices():
    from kvledger.analyses.judgments.offload import tier_cost

    # 256 GiB at $3.65/GiB-month = $0.005/GiB-h (÷ 730 h) = $1.28/h beside one $2.50 GPU: $3.78/h, against 2 GPUs
    # at $5.00/h
    c = tier_cost(256 * 2**30, 1, 2, 2.5, 3.65)
    assert c["host_memory_usd_per_hour"] == pytest.approx(1.28) and c["with_tier_usd_per_hour"] == pytest.approx(3.78)
    assert c["more_gpus_usd_per_hour"] == pytest.approx(5.0)
    assert tier_cost(256 * 2**30, 1, None, None, 3.65) is None
    # without a host price: tier_prices.csv's cheapest host row, DDR5 RDIMM bought at $0.48/GiB-month (2025-12-28):
    # 256 × 0.48 ÷ 730 = $0.16833/h
    d = tier_cost(256 * 2**30, 1, None, 2.5, None)
    assert d["host_memory_usd_per_hour"] == pytest.approx(256 * 0.48 / 730)
    assert "Bought:host:ddr5-rdimm-36mo" in d["source"]


def test_offload_old_host_price_flag_is_refused_with_the_new_name():
    from kvledger.errors import InputError

    r = runner.invoke(app, ["offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64",
                            "--host-usd-per-gib-hour", "0.005"])
    assert r.exit_code != 0 and isinstance(r.exception, InputError)
    assert "--host-memory-usd-per-gib-month" in str(r.exception) and "3.65" in str(r.exception)


def test_a_disk_tier_under_vllms_native_connector_is_said_to_be_a_what_if():
    # a long-context trial: `plan --kv-tier-nvme 2TiB` (vLLM native, no --kv-offloading-size) sized a 2 TiB NVMe tier
    # (2,048 × 2^30 B // 131,072 B per token = 16,777,216 tokens, break-even 669) under the sentence "vLLM
    # OffloadingConnector: … stored to the CPU tier", while simulate and offload refuse the same flags: vLLM's native
    # connector (offloading_connector.py, 0.33.0) has a CPU tier only. The sizing stays; the notes say what it is
    base = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-tier-nvme", "2TiB", "--json")
    alone = json.loads(run(*base).stdout)["kv_tiers"]
    assert alone["tiers"][1]["capacity_tokens"] == 16_777_216 and alone["break_even"][0]["break_even_tokens"] == 669
    assert alone["notes"][0].startswith("vLLM's native OffloadingConnector has a CPU tier only: the nvme/remote rows "
                                        "are a sizing what-if")
    assert alone["notes"][0].endswith("no vLLM connector runs what this plan sizes")
    assert not any(n.startswith("vLLM OffloadingConnector: every newly computed") for n in alone["notes"])
    native = json.loads(run(*base, "--kv-offloading-size", "256").stdout)["kv_tiers"]["notes"]
    assert native[0].startswith("vLLM's native OffloadingConnector has a CPU tier only")
    assert native[1].startswith("vLLM OffloadingConnector: every newly computed full prompt block")
    # LMCache's local_disk is a real tier below its CPU chunks: no such note
    lm = json.loads(run(*base, "--kv-offloading-size", "256", "--kv-offloading-backend", "lmcache").stdout)
    assert not any("sizing what-if" in n for n in lm["kv_tiers"]["notes"])
