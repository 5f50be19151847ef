"""``kvledger cost --simulate`` and ``kvledger goodput --simulate [--target]``: same numbers as simulate --out then FILE, probes, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
SIM = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "300"]
SLO = ["--slo", "ttft=200ms,tpot=50ms"]
COST = ["--api", "OpenAI:gpt-4.1", "--utilization", "0.5", "--gpu-provider", "Nebius"]


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "run"
    _ok(["simulate", *SIM, "--out", str(out)])
    return str(out / "records.json")


def test_cost_of_a_simulation_equals_cost_of_its_records_file(records):
    # the records file states its GPU count (1 replica × TP 1) and catalog GPU id, so FILE mode needs neither --num-gpus nor --gpu
    from_file = json.loads(_ok(["cost", records, *SLO, *COST, "--json"]))
    direct = json.loads(_ok(["cost", "--simulate", *SIM, *SLO, *COST, "--json"]))
    assert from_file["source"] == records and direct["source"] == "simulator"
    for key in ("totals", "ledgers", "capacity", "inputs", "sticker", "break_even_utilization", "break_even_volume", "verdict"):
        assert direct[key] == from_file[key], key
    assert direct["inputs"]["num_gpus"] == 1 and "Nebius" in direct["inputs"]["gpu"]
    sim = direct["simulation"]
    assert sim["num_gpus"] == 1 and sim["gpu_id"] == "nvidia_h100_sxm" and sim["workload"]["num_requests"] == 300
    assert sim["step_cost"]["name"] == "roofline" and sim["plan"]["num_gpu_blocks"] == sim["engine"]["num_gpu_blocks"]


def test_cost_human_ledger_lists_the_simulation_among_the_sources():
    out = " ".join(_ok(["cost", "--simulate", *SIM, *SLO, *COST]).split())
    for text in ("simulated per deployment unit [1]", "[1] simulated run: kvledger simulator", "[2] step cost: roofline",
                 "[3] memory plan (vllm", "blocks × 16 tokens per replica", "workload azure-conv: 300 requests",
                 "break-even utilization", "[4] gpu_prices.csv Nebius"):
        assert text in out, text


def test_goodput_of_a_simulation_equals_goodput_of_its_records_file(records):
    from_file = json.loads(_ok(["goodput", records, *SLO, "--json"]))
    direct = json.loads(_ok(["goodput", "--simulate", *SIM, *SLO, "--json"]))
    for key in ("num_requests", "num_failed", "num_good", "attainment", "goodput_req_per_s", "throughput_req_per_s",
                "goodput_output_tok_per_s", "duration_s", "num_gpus", "request_rate", "run_label"):
        assert direct[key] == from_file[key], key
    assert direct["num_requests"] == 300 and direct["simulation"]["model"].startswith("meta-llama/Llama-3.1-8B")


def test_goodput_search_prints_every_probe_and_the_boundary_per_gpu():
    args = ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "150", "--replicas", "2",
            "--slo", "ttft=200ms,tpot=30ms", "--target", "0.9", "--axis", "rate", "--lo", "4", "--hi", "256"]
    lines = [json.loads(x) for x in _ok(args + ["--json"]).splitlines()]
    probes, last = lines[:-1], lines[-1]
    b = last["boundary"]
    assert [p["probe"]["value"] for p in probes[:2]] == [4, 256] and all(p["num_requests"] == 150 for p in probes)
    assert len(probes) == len(last["probes"]) and b["num_requests_per_probe"] == 150
    meets = [p["probe"]["value"] for p in probes if p["attainment"] >= 0.9]
    assert b["boundary_value"] == max(v for v in meets if v < b["first_failing_value"])
    # 2 replicas × TP 1 = 2 GPUs: the boundary per replica and per GPU is half the deployment's
    assert b["boundary_per_replica"] == b["boundary_per_gpu"] == b["boundary_value"] / 2
    assert last["simulation"]["num_gpus"] == 2 and last["probes"][0]["goodput_req_per_s_per_gpu"] == pytest.approx(
        probes[0]["goodput_req_per_s"] / 2)
    human = " ".join(_ok(args).split())
    assert "2 GPU(s) = 2 replica(s) × TP 1" in human and "SLO boundary on request_rate for attainment ≥ 90%" in human
    assert "per GPU" in human and "[2] step cost: roofline" in human


@pytest.mark.parametrize("args, message", [
    (["cost", "x.json", "--simulate", "m", *SLO, *COST], "not both"),
    (["cost", *SLO, *COST], "not neither"),
    (["cost", "x.json", "--trace", "azure-code", *SLO, *COST], "--trace describe a simulation; add --simulate MODEL"),
    (["cost", "--simulate", *SIM, "--num-gpus", "2", *SLO, *COST], "--num-gpus apply to a FILE"),
    (["cost", "--simulate", "meta-llama/Llama-3.1-8B", *SLO, *COST], "--simulate needs --gpu"),
    (["goodput", "--simulate", *SIM, "--prompt-lengths", "fixed:8", *SLO], "needs both --prompt-lengths and --output-lengths"),
    (["goodput", "--simulate", *SIM, "--prompt-lengths", "fixed:8", "--output-lengths", "fixed:8", "--rate", "1", *SLO],
     "either --trace or a synthetic workload"),
    (["goodput", "--simulate", *SIM, *SLO, "--target", "0.9", "--rate", "5"], "search varies request_rate, so --rate cannot"),
    (["goodput", "--simulate", *SIM, *SLO, "--target", "0.9", "--axis", "qps"], "unknown search axis 'qps'"),
    (["goodput", "x.json", "--lo", "1", *SLO], "--lo apply to a --simulate run or search"),
])
def test_bad_input_is_a_clear_error(args, message):
    res = runner.invoke(app, args)
    assert isinstance(res.exception, InputError), res.output
    assert message in str(res.exception)
