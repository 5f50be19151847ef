"""Every command that sizes replicas divides the offered load by the SLO capacity (offered req/s at which the target
share meets the SLO, the figure ``goodput --target`` prints), not by the goodput (good req/s) there: search and
goodput agree on one case, cost sizes a monthly volume on it, and the decision's arithmetic is hand-worked."""

from __future__ import annotations

import math

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

runner = CliRunner()
L8 = "meta-llama/Llama-3.1-8B"
WL = ["--trace", "azure-conv"]  # 2,000 requests per probe, seed 0 (the defaults of all three commands)
SLO = ["--slo", "ttft=500ms,tpot=50ms"]


@pytest.fixture(scope="module")
def goodput_target():
    return cli_json(*["goodput", "--simulate", L8, "--gpu", "H100", *WL, *SLO, "--target", "0.9", "--json"])


def test_search_sizes_the_offered_rate_on_the_capacity_goodput_prints(goodput_target):
    # The fresh-user trial's case: goodput --target finds the SLO capacity 18.5 req/s (16.547 good req/s there, the
    # roofline with the H100's measured matmul curve and layer kernels); search finds the same boundary and sizes
    # 28 req/s offered at ≤ 80%: ⌈28 ÷ (18.5 × 0.8)⌉ = ⌈1.892⌉ = 2 replicas, realized 28 ÷ 37 = 75.7%, 2 GPUs ×
    # $2.69/GPU-h × 730 h = $3,927.40. (Dividing by good req/s × 0.8 would buy ⌈28 ÷ 13.24⌉ = 3.)
    cap_rate = goodput_target["boundary"]["boundary_value"]
    s = cli_json(*["search", L8, *SLO, "--gpus", "H100", "--tp", "1", "--rate", "28", *WL, "--json"])
    w = next(c for c in s["candidates"] if c["id"] == s["winner"]["id"])
    assert w["capacity"]["slo_capacity_req_per_s"] == cap_rate == 18.5
    sz = w["sizing"]
    assert (sz["sizing_req_per_s"], sz["replicas"], sz["num_gpus"]) == (18.5, 2, 2)
    assert sz["realized_utilization"] == pytest.approx(28 / 37)
    assert sz["rental_usd_per_month"] == pytest.approx(2 * 2.69 * 730)
    assert "⌈28 req/s offered ÷ (18.5 req/s SLO capacity × 80%)⌉" in sz["how"]
    # the cost per good request: the good requests at that load are those of a run of the same workload and seed at
    # the load each replica carries, 28 ÷ 2 = 14 req/s (as cost --simulate counts them; not × goodput ÷ SLO capacity,
    # whose first arrival → last finish counts the drain tail as failed requests), so USD per 1k good requests =
    # 1 GPU × $2.69 × 1000 ÷ (3600 × 14 req/s × its share within the SLO, 1.000) = $0.053373
    # the boundary run's own goodput (first arrival → last finish) would size 3; the good rate priced, goodput_req_per_s
    # as cost's, is 18.5 × its share within the SLO 0.956 = 17.686
    g = w["capacity"]["goodput_at_boundary_req_per_s"]
    assert g == pytest.approx(16.547, abs=5e-4)
    assert math.ceil(28 / (g * 0.8)) == 3
    assert w["capacity"]["goodput_req_per_s"] == pytest.approx(18.5 * w["capacity"]["attainment"]) == \
        pytest.approx(17.686)
    assert 18.5 * w["capacity"]["attainment"] > g  # the share within the SLO at 18.5 above 16.547 ÷ 18.5 = 0.894
    at = w["capacity"]["at_volume_load"]
    assert at["rate_req_per_s"] == pytest.approx(14.0)
    assert w["cost"]["usd_per_1k_requests"] == pytest.approx(2.69 * 1000 / (3600 * 14.0 * at["attainment"]))
    assert w["cost"]["usd_per_1k_requests"] == pytest.approx(0.053373, abs=1e-6)


def test_goodput_target_prints_the_figure_search_sizes_on(goodput_target):
    b = goodput_target["boundary"]
    assert b["boundary_value"] == b["boundary_per_replica"] == 18.5
    assert b["goodput_at_boundary_req_per_s"] == pytest.approx(16.547, abs=5e-4)


def test_cost_sizes_a_monthly_volume_on_the_slo_capacity():
    # cost --simulate prices at the SLO capacity C found by its own search (17.5 req/s, ttft ≤ 200 ms at 2,000
    # requests per probe: docs/cost.md §2). 34M requests/month = 34e6 ÷ (730 × 3600) = 12.94 req/s offered:
    # ⌈12.94 ÷ (C × 0.8)⌉ replicas, utilization 12.94 ÷ (replicas × C).
    d = cli_json(*["cost", "--simulate", L8, "--gpu", "H100", *WL, "--slo", "ttft=200ms,tpot=50ms", "--api",
               "OpenAI:gpt-4.1", "--gpu-provider", "Nebius", "--monthly-requests", "34M", "--json"])
    c = d["simulation"]["capacity_search"]["slo_capacity_req_per_s"]
    assert d["capacity"]["slo_capacity_req_per_s"] == d["capacity"]["sizing_req_per_s"] == c == 17.5
    rate = 34e6 / (730 * 3600)
    dec = d["decision"]
    assert dec["replicas"] == math.ceil(rate / (c * 0.8)) == 1  # 12.94 ÷ 14.0 = 0.92 → 1
    assert dec["realized_utilization"] == pytest.approx(rate / c)
    g = d["capacity"]["goodput_req_per_s"]
    assert math.ceil(rate / (g * 0.8)) == 2  # the old rule, on good req/s (15.14 × 0.8 = 12.11), bought a second one
    assert (f"⌈{rate:,.4g} req/s offered (the monthly mean: --peak-to-mean 1, flat traffic, the default) ÷ (17.5 req/s "
            "SLO capacity × 80%)⌉ = 1") in dec["sizing"]
    # the break-even staircase takes C × 3600 × 730 × 0.8 requests a replica
    assert d["break_even_volume"]["capacity_requests_per_month_per_unit"] == pytest.approx(c * 3600 * 730 * 0.8)
