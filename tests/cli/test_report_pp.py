"""`kvledger report --pp N` takes vLLM's pipeline stages on the path `cost --simulate` takes (dp_flags.with_dp →
sim_pp.py): the report's cost section is cost's for the same stages, its plan has the stages, its command lines carry
the flag, and the static/contiguous comparison (not simulated with stages) is left out and said so."""

from __future__ import annotations

from cli_run import cli_json, refused, run_cli

PP2 = ("meta-llama/Llama-3.1-8B", "--gpu", "H100", "--pp", "2", "--slo", "ttft=1s,tpot=50ms", "--num-requests", "100",
       "--gpu-provider", "RunPod")
COST = ("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests",
        "100", "--seed", "0", "--pp", "2", "--slo", "ttft=1s,tpot=50ms", "--max-utilization", "0.8", "--gpu-provider",
        "RunPod", "--target", "0.9")


def test_report_prices_the_stages_as_cost_does():
    d = cli_json("report", *PP2)
    cost = cli_json(*COST)
    # the same capacity search on vLLM 0.33.0's V2 runner pipeline loop, 2 stages of TP 1 = 2 GPUs per unit
    assert d["cost"]["simulation"]["num_gpus"] == cost["simulation"]["num_gpus"] == 2
    assert d["cost"]["capacity"] == cost["capacity"]
    assert d["plan"]["settings"]["pp"] == 2 and len(d["plan"]["memory"]["stages"]) == 2
    assert " --pp 2 " in d["commands"]["cost"] and " --pp 2 " in d["commands"]["plan"]
    assert "engine_savings" not in d and "engine_savings" not in d["commands"]
    assert d["rate_sweep"][0]["engine"]["async_scheduling"] is True


def test_report_says_why_the_comparison_is_left_out(tmp_path):
    res = run_cli("report", *PP2, "--out", str(tmp_path / "r.html"))
    assert res.exit_code == 0, res.output
    assert "note: --pp 2: vLLM's pipeline loop on 2 stages throughout" in " ".join(res.stdout.split())


def test_report_refuses_what_cost_refuses_with_stages():
    assert "SGLang's pipeline loop" in refused("report", *PP2, "--engine", "sglang")
