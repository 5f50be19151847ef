"""``search`` and ``cost --simulate`` price the same deployment at the same monthly volume alike: the same replicas,
the same bill, and the per-token GPU rental on the same run, one of the same workload and seed at the load each
replica carries (``analyses/serving/load_run.load_share_at``, which both call). Before, search counted the good tokens
at that load as utilization × the boundary run's good rate (its share within the SLO at the SLO capacity), and its
$/Mtok read 11–15 % above cost's on a 200-request case (Llama-3.1-8B, one H100, 5B tokens a month: $2.292 against
$2.060 per 1M output tokens; $0.2904 against $0.2531 per 1M input). Search's ledgers carry no people
line (its output says "GPU rental only (the people line is in cost)"), so the GPU rental items are compared.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.load_run import per_replica_rate
from kvledger.cli.main import app

runner = CliRunner()
CASE = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "200", "--slo", "ttft=500ms,tpot=50ms",
        "--monthly-tokens", "2e11", "--gpu-provider", "Lambda", "--json"]
# The workload: azure-conv's first 200 requests, 903.475 prompt + 235.25 output tokens on average = 1,138.725 tokens a
# request. 2e11 tokens a month ÷ 1,138.725 = 175,635,030 requests ÷ (730 h × 3600 s) = 66.8322 req/s. The SLO capacity
# both searches find is 14.5 req/s (the probes above it too short to show their load: probe_length), so replicas =
# ⌈66.8322 ÷ (14.5 × 0.8)⌉ = ⌈5.761⌉ = 6 and each carries 66.8322 ÷ 6 = 11.1387 req/s (76.8 % of 14.5). Lambda's
# cheapest packing of 6 one-GPU replicas is 6 gpu_1x_h100_sxm5 at $4.29/h (the 8-GPU instance, $31.92/h, costs more
# than 6 × 4.29 = $25.74/h): the bill is 6 × 4.29 × 730 = $18,790.20 a month.
RATE = 2e11 / (903.475 + 235.25) / (730 * 3600)


@pytest.fixture(scope="module")
def both() -> tuple[dict, dict]:
    res_c = runner.invoke(app, ["cost", "--simulate", *CASE])
    assert res_c.exit_code == 0, res_c.output
    res_s = runner.invoke(app, ["search", *CASE, "--tp", "1"])
    assert res_s.exit_code == 0, res_s.output
    return json.loads(res_c.stdout), json.loads(res_s.stdout)["candidates"][0]


def test_per_replica_rate_is_the_mean_rate_over_the_replicas_below_the_rate_sized_on():
    assert per_replica_rate(RATE, 4, 25.75) == pytest.approx(16.708050837786782)  # 66.8322 ÷ 4
    assert per_replica_rate(RATE, 6, 14.5) == pytest.approx(11.138700558524521)  # 66.8322 ÷ 6
    assert per_replica_rate(20.0, 1, 20.0) is None  # at the rate sized on: the capacity run already is that run
    assert per_replica_rate(20.0, 0, 25.0) is None


def test_same_replicas_bill_and_run_at_the_load(both):
    cost, cand = both
    assert cost["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == 14.5
    assert cand["capacity"]["slo_capacity_req_per_s"] == 14.5
    assert cost["decision"]["replicas"] == cand["sizing"]["replicas"] == 6
    rent = sum(i["amount_usd"] for i in cost["decision"]["self_host_rent"]["items"] if i["unit"] == "GPU-hour")
    assert rent == pytest.approx(cand["sizing"]["rental_usd_per_month"]) == pytest.approx(6 * 4.29 * 730)  # 18,790.20
    at_c, at_s = cost["capacity"]["at_volume_load"], cand["capacity"]["at_volume_load"]
    # the same run; the two commands' volume rates differ in the last bit (each divides the month its own way)
    assert at_s.keys() == at_c.keys() and all(
        at_s[k] == (pytest.approx(v, rel=1e-12) if isinstance(v, float) else v) for k, v in at_c.items())
    assert at_s["rate_req_per_s"] == pytest.approx(RATE / 6)  # 11.1387 req/s per replica
    assert "a run of the same workload and seed (0) at 11.14 req/s" in cand["sizing"]["how"]


def test_same_per_token_gpu_rental(both):
    cost, cand = both
    gpu_out = cost["ledgers"]["self_host_output"]["items"][0]
    gpu_in = cost["ledgers"]["self_host_input"]["items"][0]
    assert gpu_out["name"] == "GPU rental, decode share of GPU time"
    assert cand["cost"]["usd_per_mtok_output"] == pytest.approx(gpu_out["amount_usd"], rel=1e-12)
    assert cand["cost"]["usd_per_mtok_input"] == pytest.approx(gpu_in["amount_usd"], rel=1e-12)
    # By hand: one GPU at $4.29/h over the good tokens of the run at 11.1387 req/s, each side × its share of GPU time
    # s (prefill 0.25309): output $/M = 4.29 × 10⁶ ÷ (3600 × good output tok/s) × (1 − s), 4.29e6 ÷ (3600 × 2,620.38)
    # × 0.74691 = $0.33967; input 4.29e6 ÷ (3600 × 10,063.54) × 0.25309 = $0.029969
    at, s = cand["capacity"]["at_volume_load"], cand["cost"]["prefill_share"]
    assert s == pytest.approx(cost["capacity"]["prefill_share"])
    assert cand["cost"]["usd_per_mtok_output"] == pytest.approx(4.29e6 / (3600 * at["good_output_tok_per_s"]) * (1 - s))
    assert cand["cost"]["usd_per_mtok_output"] == pytest.approx(0.33967, abs=1e-5)
    assert cand["cost"]["usd_per_mtok_input"] == pytest.approx(0.029969, abs=1e-6)
    # USD per 1k good requests: one replica's $4.29/h ÷ (its 11.1387 req/s × the run's share within the SLO × 3600)
    # × 1000 = the GPU bill ÷ the volume's good requests × 1000, as cost counts them
    good_month = cost["decision"]["requests_per_month"] * at["attainment"]
    assert cand["cost"]["usd_per_1k_requests"] == pytest.approx(18790.2 / good_month * 1000)
