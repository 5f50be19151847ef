"""``kvledger report`` takes cost's synthetic workload flags (``--prompt-lengths``, ``--output-lengths``,
``--arrival-cv``) and builds its simulations as ``cost --simulate`` does (``report_workload.report_synthetic``): on
the same workload the two agree on the replicas, the bill and the verdict, and the command lines the report prints
carry the flags."""

from __future__ import annotations

import shlex

import pytest
from cli_run import MODEL, cli_json, refused

W = ["--prompt-lengths", "uniform:1600:2100", "--output-lengths", "uniform:100:300", "--num-requests", "300",
     "--slo", "ttft=500ms,tpot=50ms"]
BILL = ["--monthly-tokens", "3e9", "--api", "OpenAI:gpt-4.1-mini"]


@pytest.fixture(scope="module")
def report() -> dict:
    return cli_json("report", MODEL, "--gpu", "H100", *W, *BILL, "--json")


def test_report_on_a_synthetic_workload_agrees_with_cost(report):
    cost = cli_json("cost", "--simulate", MODEL, "--gpu", "H100", *W, *BILL, "--json")
    r, c = report["cost"], cost
    assert r["simulation"]["workload"]["trace"].startswith("synthetic (prompt uniform:1600:2100, output "
                                                           "uniform:100:300")
    # both size on the capacity bound 17.076 req/s (the 300-request probes find 18); 3e9 tokens ÷ 2,055 tokens a
    # request (1,856 in + 199 out, the workload's means) ÷ 2,628,000 s a month = 0.5555 req/s: ⌈0.5555 ÷ (17.08 ×
    # 0.8)⌉ = 1 replica, 1 H100 × 730 h × $2.69 + $5,000 of people = $6,963.70 a month
    assert r["simulation"]["capacity_search"]["sized_on_req_per_s"] == \
        c["simulation"]["capacity_search"]["sized_on_req_per_s"] == pytest.approx(17.0764, rel=1e-4)
    assert r["decision"]["replicas"] == c["decision"]["replicas"] == 1
    assert r["decision"]["self_host_usd_per_month"] == c["decision"]["self_host_usd_per_month"] == \
        pytest.approx(730 * 2.69 + 5000, abs=1e-9)
    assert r["decision"]["api_usd_per_month"] == c["decision"]["api_usd_per_month"]
    assert r["verdict"] == c["verdict"] and r["verdict"].startswith("the API — $1,548.82/month on the API vs "
                                                                    "$6,963.70/month self-hosted")
    assert r["decision"]["rests_on"] == c["decision"]["rests_on"]
    # no trace was read: the report's inputs say so (they named the default trace, azure-conv, beside the lengths)
    assert report["inputs"]["trace"] is None and report["inputs"]["prompt_lengths"] == "uniform:1600:2100"


def test_its_command_lines_carry_the_workload_and_its_cost_line_gives_its_cost(report):
    cmds = report["commands"]
    flags = "--prompt-lengths uniform:1600:2100 --output-lengths uniform:100:300 --num-requests 300 --seed 0"
    for key in ("cost", "capacity", "sweep_point", "engine_savings"):
        assert flags in cmds[key] and "--trace" not in cmds[key], key
    again = cli_json(*shlex.split(cmds["cost"])[1:])  # the line as printed, run: the report's cost section again
    assert again["verdict"] == report["cost"]["verdict"]
    assert again["decision"]["replicas"] == report["cost"]["decision"]["replicas"]


def test_an_arrival_cv_reaches_the_simulations_and_the_commands():
    d = cli_json("report", MODEL, "--gpu", "H100", *W, "--arrival-cv", "2", "--utilization", "0.5", "--json")
    assert d["cost"]["simulation"]["workload"]["trace"].endswith("arrival CV 2)")
    assert " --arrival-cv 2.0 --num-requests 300" in d["commands"]["cost"]


def test_half_a_synthetic_workload_or_one_with_a_trace_is_refused():
    assert refused("report", MODEL, "--gpu", "H100", "--slo", "ttft=500ms", "--prompt-lengths", "fixed:100",
                   "--json") == "a synthetic workload needs both --prompt-lengths and --output-lengths"
    assert refused("report", MODEL, "--gpu", "H100", *W, "--trace", "azure-code", "--json") == (
        "give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
    assert refused("report", MODEL, "--gpu", "H100", "--slo", "ttft=500ms", "--prompt-lengths", "uniform:9:1",
                   "--output-lengths", "fixed:10", "--json").startswith("--prompt-lengths: ")
