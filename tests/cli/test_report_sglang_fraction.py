"""``kvledger report --engine sglang --mem-fraction-static F``: SGLang's fraction in the report's plan, capacity search,
latency sweep, cost and engine line, as ``plan --engine sglang --mem-fraction-static F`` and ``cost --simulate --policy
sglang --mem-fraction-static F`` take it; each engine's fraction refused under the other in one line."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

W = ["--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--num-requests", "100", "--monthly-tokens", "3e9",
     "--api", "OpenAI:gpt-4.1-mini"]
CTX = "1K,2K,4K,8K,16K,32K,64K,128K"
F = ["--engine", "sglang", "--mem-fraction-static", "0.22"]


@pytest.fixture(scope="module")
def report() -> dict:
    return cli_json("report", MODEL, *W, *F, "--json")


def test_report_mem_fraction_static_sizes_the_plan_as_plan_does(report):
    plan = cli_json("plan", MODEL, "--gpu", "H100", *F, "--context", CTX, "--json")
    assert report["plan"] == plan
    m = report["plan"]["memory"]
    assert (m["fraction_name"], m["fraction"]) == ("mem_fraction_static", 0.22)
    # by hand: SGLang keeps (1 − 0.22) of the memory free before the weights load (84,578,056,273 B on the H100 at
    # 0.5.23's rules) as its reserve: 0.78 × 84,578,056,273 = 65,970,883,893 B; what is left after the weights
    # (16,060,522,496 B), RoPE buffer, segment tails and load overhead is the KV: 2,408,183,129 B, at 131,072 B/token
    # (2 × 32 layers × 8 KV heads × 128 × 2 B) 18,373.0 cells, of which SGLang's pool holds 18,372 tokens (its
    # "#tokens" line; 199,051 at 0.5)
    reserve = next(d["bytes"] for d in m["deductions"] if d["name"].startswith("reserve"))
    assert reserve == pytest.approx(0.78 * m["requested_bytes"], abs=2)  # to the byte, as the engine rounds it
    kv = m["requested_bytes"] - sum(d["bytes"] for d in m["deductions"])
    assert kv == pytest.approx(m["available_kv_bytes"], abs=2) and m["available_kv_bytes"] == 2_408_183_129
    assert m["pool_tokens"] == 18_372 and 18_372 * 131_072 <= m["available_kv_bytes"] < 18_374 * 131_072
    assert "--mem-fraction-static 0.22" in report["commands"]["plan"]


def test_report_mem_fraction_static_reaches_the_capacity_sweep_and_cost(report):
    cost = cli_json("cost", "--simulate", MODEL, *W[:6], "--trace", "azure-conv", "--policy", "sglang",
                    "--mem-fraction-static", "0.22", "--monthly-tokens", "3e9", "--api", "OpenAI:gpt-4.1-mini",
                    "--json")
    sim = report["cost"]["simulation"]
    # the smaller pool (18,372 tokens, not SGLang's default 0.5.23 fraction's) holds the SLO capacity of these
    # 100-request probes to 5.875 req/s, from 17.75 at the default (test_report_engine_cli)
    assert sim["capacity_search"]["slo_capacity_req_per_s"] == \
        cost["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == 5.875
    assert sim["engine"] == cost["simulation"]["engine"] and report["cost"]["totals"] == cost["totals"]
    # every sweep point runs the same pool as the capacity search
    assert {p["engine"]["num_gpu_blocks"] for p in report["rate_sweep"]} == {sim["engine"]["num_gpu_blocks"]}
    for key in ("cost", "capacity", "sweep_point"):
        assert "--policy sglang --mem-fraction-static 0.22" in report["commands"][key]


def test_report_engine_line_names_the_fraction(tmp_path):
    res = run_cli("report", MODEL, *W, *F, "--out", str(tmp_path / "r.html"))
    assert res.exit_code == 0, res.output
    html = (tmp_path / "r.html").read_text()
    assert "max_num_seqs 2,048, mem_fraction_static 0.22 (given); step cost" in html


def test_each_engine_fraction_is_refused_under_the_other_in_one_line():
    said = refused("report", MODEL, *W, "--mem-fraction-static", "0.5")
    assert said == ("--mem-fraction-static is SGLang's memory fraction; with --engine vllm it would be ignored: use "
                    "--gpu-memory-utilization (vLLM's), or --engine sglang")
    said = refused("report", MODEL, *W, "--engine", "sglang", "--gpu-memory-utilization", "0.5")
    assert said == ("--gpu-memory-utilization is vLLM's memory fraction; with --engine sglang it would be ignored: "
                    "use --mem-fraction-static (SGLang's), or --engine vllm")
    assert refused("report", MODEL, *W, *F[:2], "--mem-fraction-static", "1.5").startswith(
        "--mem-fraction-static 1.5 is out of range; allowed: (0, 1]")
