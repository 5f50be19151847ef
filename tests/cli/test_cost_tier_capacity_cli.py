"""``cost --simulate --kv-tier-host``: the SLO capacity priced is found with the host tier in the simulator, on the
path report and goodput --simulate --target take with tier flags (``report_tier_capacity.capacity_with_tier``; before,
the search's tier probe, ``analyses/search/tier_probe.py``, which search --offload keeps), and the notes say which tier
is simulated and which priced only."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.analyses.search.offload_axis import OffloadOption
from kvledger.analyses.search.tier_probe import TierProber
from kvledger.analyses.serving.sim_ledgers import simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.cli.main import app
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo

SLO = "ttft=200ms,tpot=50ms"
# priced flat (0.7 of peak FLOP/s for every matmul): the probes below were read off runs priced that way
BASE = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests",
        "100", "--slo", SLO, "--gpu-provider", "Nebius", "--gemm-efficiency", "flat", "--json"]


def test_cost_simulate_finds_the_capacity_with_the_host_tier_in_the_simulator():
    plain = cli_json(*BASE)
    d = cli_json(*BASE, "--kv-tier-host", "64GiB", "--kv-tier-nvme", "1TiB")
    cap = d["simulation"]["capacity_search"]
    # Without the tier the request-rate search doubles 1 → 32 (32: 87 % within the SLO), then bisects: 20, 24, 22,
    # 23, 22.5, 22.25; from 22.5 req/s up the 100-request probes are too short to show their load (more than half
    # their requests still in the system at the last arrival: analyses/serving/probe_length.py): 22.25 req/s (94 %).
    # With the tier the same search (report's and goodput's path) runs every probe with it. The Azure conversation
    # trace shares no prefix between requests, so no block is ever loaded back from the tier (host hits 0) and each
    # run equals the run without the tier at the same rate: the same 12 probes, the same attainments, the same
    # capacity, and the note says the tier adds cost only.
    assert plain["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == 22.25
    assert cap["without_tier"]["slo_capacity_req_per_s"] == 22.25
    assert cap["slo_capacity_req_per_s"] == 22.25 and cap["first_failing_req_per_s"] == pytest.approx(22.5)
    assert cap["probes"] == [[1.0, 1.0], [2.0, 1.0], [4.0, 1.0], [8.0, 1.0], [16.0, 1.0], [20.0, 0.94], [22.0, 0.94],
                             [22.25, 0.94], [22.5, 0.94], [23.0, 0.93], [24.0, 0.9], [32.0, 0.87]]
    assert cap["host_hit_tokens_at_boundary"] == 0
    assert any("the tier served no prompt token at the capacity found, 22.25 req/s" in n and "adds cost only" in n
               for n in cap["notes"])
    # the block report and goodput give: the TTFT at 22.25 req/s is one figure with and without the tier (no hit)
    t = cap["kv_tier_capacity"]["ttft_at_capacity"]
    assert t["with_tier"] == t["without_tier"] and t["rate_req_per_s"] == 22.25
    # 64 GiB per GPU × TP 1 = vLLM --kv-offloading-size 64 GiB: 64 × 2^30 B ÷ 2,097,152 B per block (8B: 32 layers
    # × 2 × 8 KV heads × 128 × 2 B × 16 tokens) = 32,768 blocks × 16 = 524,288 tokens
    assert cap["tier"]["capacity_bytes"] == 64 * 2**30 and cap["tier"]["capacity_tokens"] == 524_288
    # the ledger prices the run at the capacity without the tier, as without it: that run's goodput 12.693 good req/s
    # over first arrival → last finish, and priced the rate × its share within the SLO (ledgers/sustained_rate.py)
    assert cap["goodput_at_boundary_req_per_s"] == pytest.approx(12.6930, rel=1e-4)
    pc = plain["simulation"]["capacity_search"]
    assert d["capacity"]["goodput_req_per_s"] == pytest.approx(plain["capacity"]["goodput_req_per_s"])
    assert plain["capacity"]["goodput_req_per_s"] == pytest.approx(pc["slo_capacity_req_per_s"]
                                                                   * pc["attainment_at_boundary"])
    # line items: both tiers on the rental; the month of one replica: 1 GPU × $2.95 × 730 h = $2,153.50 +
    # 64 GiB × $0.48 (bundled DDR5 RDIMM row) = $30.72 + 1,024 GiB × $0.218 (GCP Local SSD) = $223.232 → $2,407.452
    names = [i["name"] for i in d["ledgers"]["self_host_output"]["items"]]
    assert names[1:3] == ["host memory for the KV tier", "NVMe for the KV tier"]
    assert d["inputs"]["unit_rental_usd_per_month"] == pytest.approx(2407.452)
    notes = d["notes"]
    assert any(n.startswith("the host KV tier (64 GiB per GPU; vLLM --kv-offloading-size 64 GiB over TP 1) is "
                            "simulated") and "OffloadingConnector" in n for n in notes)
    assert any(n.startswith("the KV tier (1,024 GiB per GPU of nvme) is priced only") for n in notes)
    assert not any("of host" in n and "priced only" in n for n in notes)


def test_the_tier_run_equals_the_plain_run_when_nothing_is_loaded_back():
    # the claim behind the note above, at a rate above the capacity: 29.75 req/s, 89 of 100 within the
    # SLO with and without the 64 GiB tier, same goodput
    slo = parse_slo(SLO)
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=100,
                          gemm_efficiency="flat")
    p = TierProber(args, None, OffloadOption("cpu", 64.0), slo, 0.9)
    p.run_at(29.75)
    plain = goodput(simulate_run(replace(args, rate=29.75)).run, slo)
    assert p.host_hit_tokens[29.75] == 0
    assert p.goodputs[29.75].num_good == plain.num_good == 89
    assert p.goodputs[29.75].goodput_req_per_s == plain.goodput_req_per_s


def test_at_offered_load_the_host_tier_stays_priced_only():
    d = cli_json(*BASE, "--kv-tier-host", "64GiB", "--at-offered-load")
    assert any(n.startswith("the KV tier (64 GiB per GPU of host) is priced only") and "--at-offered-load" in n
               for n in d["notes"])


def test_a_host_tier_under_sglang_is_hicache_as_goodput_simulates_it():
    # under --policy sglang the host tier is SGLang HiCache's: --hicache-size takes whole GB (10^9 B) per GPU, so
    # 8 GiB = 8.59 GB is simulated as --hicache-size 8 (the bill still prices 8 GiB, and the note says so). The same
    # document-pool case on SGLang's pool (--mem-fraction-static 0.24): cost prices what goodput --simulate --target
    # --policy sglang --enable-hierarchical-cache --hicache-size 8 finds, 84 → 92 req/s, the block the same
    w = ["--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "16", "--output-lengths", "16",
         "--num-requests", "400", "--slo", "ttft=300ms", "--document-pool", "40:1024:uniform",
         "--mem-fraction-static", "0.24", "--max-model-len", "4096", "--target", "0.9", "--policy", "sglang"]
    d = cli_json("cost", *w, "--kv-tier-host", "8")
    cap = d["simulation"]["capacity_search"]
    g = cli_json("goodput", *w, "--enable-hierarchical-cache", "--hicache-size", "8")["kv_tier_capacity"]
    assert cap["kv_tier_capacity"] == g
    assert (cap["without_tier"]["slo_capacity_req_per_s"], cap["slo_capacity_req_per_s"]) == (84.0, 92.0)
    assert cap["rule"].startswith("SGLang HiCache rule")
    # HiCache served 105,472 of the 416,000 prompt tokens at 92 req/s (25.35%, goodput's hit share there)
    assert cap["host_hit_tokens_at_boundary"] == 105_472 == round(g["with_tier"]["hit_share"]["host_dram"] * 416_000)
    assert any(n.startswith("the host KV tier (8 GiB per GPU; SGLang --enable-hierarchical-cache --hicache-size 8: "
                            "whole GB per GPU, 8 GiB being 8.59 GB) is simulated") for n in d["notes"])


def test_a_host_tier_under_one_gb_under_sglang_is_refused():
    # 0.5 GiB = 0.537 GB floors to --hicache-size 0, which SGLang reads as no size (the ratio's default)
    res = CliRunner().invoke(app, [*BASE, "--kv-tier-host", "0.5GiB", "--policy", "sglang"])
    assert res.exit_code != 0 and "SGLang's --hicache-size takes whole GB" in str(res.exception)


def test_cost_prices_the_capacity_report_and_goodput_find():
    # the document-pool case of test_goodput_tier_target.W (40 documents of 1,024 tokens, HBM 9,408 tokens): an 8 GiB
    # host tier per GPU at TP 1 is --kv-offloading-size 8. goodput --simulate --target 0.9 with it finds 57.5 req/s
    # (58 the first to fail), band 46.91–64.36 req/s; cost --kv-tier-host 8 now prices the same 57.5 (the search's
    # tier probe, bisecting from the 35.5 req/s without the tier, found 57.6875, band 47.06–64.57)
    w = ["--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "16", "--output-lengths", "16",
         "--num-requests", "400", "--slo", "ttft=300ms", "--document-pool", "40:1024:uniform",
         "--gpu-memory-utilization", "0.24", "--max-model-len", "4096", "--target", "0.9"]
    cap = cli_json("cost", *w, "--kv-tier-host", "8")["simulation"]["capacity_search"]
    g = cli_json("goodput", *w, "--kv-offloading-size", "8")["kv_tier_capacity"]
    assert cap["kv_tier_capacity"] == g
    assert (cap["slo_capacity_req_per_s"], cap["first_failing_req_per_s"]) == (57.5, 58.0)
    assert cap["error_band"] == g["with_tier"]["error_band"]
    assert (round(cap["error_band"]["low"], 2), round(cap["error_band"]["high"], 2)) == (46.91, 64.36)
    # the host tier served 274,592 of the 416,000 prompt tokens at 57.5 req/s (66.0%, goodput's hit share there)
    assert cap["host_hit_tokens_at_boundary"] == 274_592 == round(g["with_tier"]["hit_share"]["host_dram"] * 416_000)
