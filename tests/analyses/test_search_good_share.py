"""search prices the good requests at a load as offered × the boundary run's attainment, not offered × its good req/s ÷
offered rate: good req/s divides by first arrival → last finish, so the drain tail read as failed requests (a
fresh-user trial: "offered × 0.888 (3.051 good req/s ÷ 3.438 req/s offered)" where cost priced the same deployment
8–17 % cheaper). With a load to size for, search (as cost) counts the good tokens of a run at the load each replica
carries instead (``analyses/serving/load_run.load_share_at``); the boundary's share stays where there is no load."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.cost import Capacity
from kvledger.ledgers.sustained_rate import at_attainment


def test_at_attainment_is_the_offered_rate_times_the_share_within_the_slo():
    cap = Capacity(5.9485, 6294.28, 1666.51, 7000.0, 1800.0, 0.5, "given", True, slo_capacity_req_per_s=6.6875)
    got = at_attainment(cap, 0.913)
    # 6.6875 × 0.913 = 6.10569 good req/s; tokens × 6.10569 / 5.9485 = × 1.026425: 6294.28 → 6460.6, 1666.51 → 1710.55
    assert got.goodput_req_per_s == pytest.approx(6.1056875)
    assert got.good_input_tok_per_s == pytest.approx(6294.28 * 6.1056875 / 5.9485)
    assert got.good_output_tok_per_s == pytest.approx(1666.51 * 6.1056875 / 5.9485)
    # the completed-token rates by the same factor (C × duration ÷ N for every rate the run measured): 7000 → 7184.98
    assert got.throughput_input_tok_per_s == pytest.approx(7000.0 * 6.1056875 / 5.9485)
    assert got.throughput_input_tok_per_s >= got.good_input_tok_per_s


def _winner(*extra: str) -> dict:
    res = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=1s,tpot=60ms", "--gpus", "H100",
                                   "--tp", "4", *extra, "--json"])
    assert res.exit_code == 0, res.output
    w = json.loads(res.stdout)["winner"]
    return w if "capacity" in w else next(e for e in json.loads(res.stdout)["candidates"] if e["id"] == w["id"])


def test_search_prices_good_tokens_at_the_boundary_attainment():
    # --utilization without a load: no replica's load to run at, so the good share is the boundary run's
    w = _winner("--utilization", "0.5")
    c, cost = w["capacity"], w["cost"]
    # boundary 6.6875 req/s at 91.3 % (the measured goodput 5.948 good req/s would be a share of 0.889)
    assert (c["slo_capacity_req_per_s"], c["attainment"]) == (6.6875, 0.913)
    assert c["at_volume_load"] is None
    # USD per 1M input tokens = GPUs × $/GPU-h × 1e6 ÷ (3600 × u × good input tok/s) × prefill share, the good input
    # tok/s = 6.6875 × 0.913 × (input tokens per good request, 6294.28 ÷ 5.9485)
    good_in = 6.6875 * 0.913 * c["goodput_input_tok_per_s"] / c["goodput_at_boundary_req_per_s"]
    want = 4 * w["price"]["usd_per_gpu_hour"] * 1e6 / (3600 * 0.5 * good_in) * cost["prefill_share"]
    assert cost["usd_per_mtok_input"] == pytest.approx(want, rel=1e-9)


def test_search_at_a_load_prices_good_tokens_of_a_run_at_it():
    # 2B tokens a month: 0.5556 req/s, one replica (⌈0.5556 ÷ (6.6875 × 0.8)⌉ = 1) at 8.3 % of its capacity; the good
    # tokens are those of a run of the same workload and seed at 0.5556 req/s (as cost --simulate prices), where all
    # 2,000 requests meet the SLO (share 1.000, not the 0.913 at the capacity)
    w = _winner("--monthly-tokens", "2B")
    c, s, cost = w["capacity"], w["sizing"], w["cost"]
    at = c["at_volume_load"]
    assert (at["rate_req_per_s"], at["num_good"], at["num_requests"]) == (pytest.approx(0.5556, abs=1e-4), 2000, 2000)
    assert "offered × 1.000 (the share within the SLO in a run of the same workload and seed (0) at 0.5556" in s["how"]
    # USD per 1M input tokens = 4 GPUs × $2.69/GPU-h × 1e6 ÷ (3600 × 613.85 good input tok/s at the load) × prefill
    # share 0.5076 = 10.76e6 ÷ 2,209,851 × 0.5076 = $2.4718 (was $2.8267 at 0.913 × the boundary run's good rate)
    want = 4 * w["price"]["usd_per_gpu_hour"] * 1e6 / (3600 * at["good_input_tok_per_s"]) * cost["prefill_share"]
    assert cost["usd_per_mtok_input"] == pytest.approx(want, rel=1e-9)
    assert cost["usd_per_mtok_input"] == pytest.approx(2.4718, abs=1e-3)
