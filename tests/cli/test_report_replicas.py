"""`kvledger report --replicas N` as `cost --simulate --replicas N`: N engine replicas behind a round_robin router
priced as one deployment unit; the report's cost section words the unit as cost does."""

from __future__ import annotations

from cli_run import cli_json, refused, run_cli

SIM = ["meta-llama/Llama-3.2-3B", "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api", "OpenAI:gpt-4.1",
       "--num-requests", "50", "--gpu-provider", "Lambda", "--monthly-tokens", "2B"]


def test_report_prices_two_replicas_as_one_deployment_unit_as_cost_does(tmp_path):
    d = cli_json("report", *SIM, "--replicas", "2")
    cost = d["cost"]
    # Lambda gpu_1x_h100_sxm5 (gpu_prices.csv): $4.29 a GPU-hour; the unit is 2 engines of 1 GPU, each on its own
    # 1-GPU instance: 2 × 4.29 × 730 h = $6,263.40, + 0.25 engineer-month × $20,000 (team 'some') = $11,263.40;
    # 2B tokens a month fit one unit
    assert cost["monthly"]["self_host"]["items"][0]["note"] == "2 replicas × 1 GPU (one deployment unit) × 730 h"
    assert cost["monthly"]["self_host"]["items"][0]["amount_usd"] == 6_263.4
    assert cost["monthly"]["self_host"]["total_usd"] == 11_263.4
    assert cost["simulation"]["num_gpus"] == 2 and cost["break_even_volume"]["engine_replicas_per_unit"] == 2
    assert " --replicas 2 " in d["commands"]["cost"] and " --replicas 2 " in d["commands"]["capacity"]
    assert "--replicas" not in d["commands"]["plan"]  # plan sizes one engine
    # the same numbers as cost --simulate with the same flags
    c = cli_json("cost", "--simulate", *SIM, "--replicas", "2")
    assert c["monthly"]["self_host"]["total_usd"] == 11_263.4
    assert c["capacity"]["slo_capacity_req_per_s"] == cost["capacity"]["slo_capacity_req_per_s"]
    # the printed answer says the unit too
    # the printed answer: the capacity is the unit's (both engines behind the router), its GPUs the unit's
    out = run_cli("report", *SIM, "--replicas", "2", "--out", str(tmp_path / "r.html")).output
    cap = cost["capacity"]["slo_capacity_req_per_s"]
    assert f"SLO capacity: {cap:.4g} req/s" in out and " per deployment unit (2 GPUs: 2 replicas × 1 GPU), " in out
    assert "2 replicas × 1 GPU (one deployment unit)" in (tmp_path / "r.html").read_text()


def test_report_replicas_range_is_costs():
    said = refused("report", *SIM, "--replicas", "0")
    assert said == refused("cost", "--simulate", *SIM, "--replicas", "0") and "--replicas" in said


def test_the_report_data_checks_replicas_against_its_range_for_the_web_app_and_api():
    import pytest

    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.errors import InputError

    # kvledger.ranges: "replicas" 1–4,096, as cost's flag; refused before any plan or simulation
    req = ReportRequest(model="meta-llama/Llama-3.2-3B", gpu="H100", slo="ttft=2s", api="OpenAI:gpt-4.1",
                        engine={"replicas": 5000})
    with pytest.raises(InputError, match="--replicas"):
        build_report_data(req)
