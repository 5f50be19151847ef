"""``kvledger report --engine sglang`` plans, simulates and prices with SGLang's rules, as ``plan --engine sglang`` and
``cost --simulate --policy sglang`` do for the same inputs; the static and contiguous baselines (vLLM's presets) are
left out, and an engine the simulator has no rules for is refused before any work."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

W = ["--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--num-requests", "100", "--monthly-tokens", "3e9",
     "--api", "OpenAI:gpt-4.1-mini"]
CTX = "1K,2K,4K,8K,16K,32K,64K,128K"


@pytest.fixture(scope="module")
def report() -> dict:
    return cli_json("report", MODEL, *W, "--engine", "sglang", "--json")


def test_report_engine_sglang_flows_into_plan_simulation_and_cost(report):
    plan = cli_json("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--context", CTX, "--json")
    assert report["plan"] == plan and report["plan"]["memory"]["engine"] == "sglang"
    cost = cli_json("cost", "--simulate", MODEL, *W[:6], "--trace", "azure-conv", "--policy", "sglang",
                 "--monthly-tokens", "3e9", "--api", "OpenAI:gpt-4.1-mini", "--json")
    r, c = report["cost"], cost
    # the same SLO capacity (100-request probes: 17.75 req/s) found on SGLang's pool (page size 1) and scheduler
    assert r["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == \
        c["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == 17.75
    eng = r["simulation"]["engine"]
    assert (eng["batching"], eng["block_size"], eng["prefix_caching_policy"]) == ("sglang", 1, "sglang")
    assert eng == c["simulation"]["engine"]
    assert r["totals"] == c["totals"] and r["verdict"] == c["verdict"]
    assert "--policy sglang" in report["commands"]["cost"] and "--engine sglang" in report["commands"]["plan"]
    # static and contiguous are vLLM's presets: not run, and no command line for them is listed
    assert "engine_savings" not in report and "engine_savings" not in report["commands"]


def test_report_engine_vllm_is_the_default_and_other_engines_are_refused():
    said = refused("report", MODEL, *W, "--engine", "trtllm")
    assert said.startswith("--engine trtllm: the report simulates serving, and the simulator has vLLM's and SGLang's "
                           "rules only")
    assert refused("report", MODEL, *W, "--engine", "static").startswith("--engine 'static': the report's engine is "
                                                                         "vllm or sglang")
    from kvledger.cli.report_flags import report_policy

    assert (report_policy(None), report_policy("vLLM"), report_policy("SGLang")) == (None, None, "sglang")


def test_report_engine_sglang_says_what_it_left_out(tmp_path):
    res = run_cli("report", MODEL, *W, "--engine", "sglang", "--out", str(tmp_path / "r.html"))
    assert res.exit_code == 0, res.output
    assert ("note: engine sglang: SGLang's plan, pool and scheduler throughout; the comparison with static batching "
            "and contiguous KV (vLLM's presets) is left out") in res.output
    assert "id='engine-savings'" not in (tmp_path / "r.html").read_text()
