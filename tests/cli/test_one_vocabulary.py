"""One quantity, one name in every command's `--json` (an API trial: output tokens/s was `throughput_tok_per_s` in
simulate and `throughput_output_tok_per_s` in goodput/cost; SLO capacity `boundary_value` in goodput,
`slo_capacity_req_per_s` in cost, `boundary_rate_req_per_s` in search; goodput's `request_rate` and search's
`cost_frontier[].cost` had no unit; capacity bands said none)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_run import MODEL, cli_json

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
STAGES = [str(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json") for i in range(7)]


def _keys(doc: object) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in _keys(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in _keys(v)}
    return set()


def test_simulate_names_output_tokens_per_second_as_goodput_and_cost_do():
    # 20 requests of 50 output tokens, all finished: 1,000 output tokens over the run's duration
    d = cli_json("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:100", "--output-lengths", "fixed:50",
                 "--num-requests", "20", "--rate", "5")
    s = d["summary"]
    assert s["num_finished"] == 20 and "throughput_tok_per_s" not in _keys(d)
    assert s["throughput_output_tok_per_s"] * s["duration_s"] == pytest.approx(1000)


def test_goodput_files_name_the_offered_rate_and_the_slo_capacity_with_their_units():
    # stage 1 of the inference-perf sweep offered 37.97 req/s and is the highest meeting 90% (test_goodput_cli.py)
    d = cli_json("goodput", *STAGES, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9")
    assert d["runs"][1]["request_rate_req_per_s"] == pytest.approx(37.97)
    assert "request_rate" not in _keys(d["runs"])
    assert d["boundary"]["axis"] == "request_rate"
    assert d["boundary"]["slo_capacity_req_per_s"] == d["boundary"]["boundary_value"] == pytest.approx(37.97)


def test_search_names_the_slo_capacity_as_cost_does_and_its_frontier_cost_with_a_unit():
    d = cli_json("search", MODEL, "--gpu", "H100", "--tp", "1", "--slo", "ttft=500ms,tpot=50ms", "--rate", "10",
                 "--num-requests", "200")
    (c,) = d["candidates"]
    keys = _keys(d)
    assert "boundary_rate_req_per_s" not in keys and "cost" not in _keys(d["cost_frontier"])
    assert c["capacity"]["slo_capacity_req_per_s"] == c["capacity"]["error_band"]["value"]
    assert c["capacity"]["error_band"]["unit"] == c["capacity_band"]["unit"] == "req/s"
    # one replica of 1 H100 for 10 req/s: 730 h × $2.69/GPU-h (RunPod, the cheapest row) = $1,963.70 a month
    (p,) = d["cost_frontier"]
    assert p["rental_usd_per_month"] == pytest.approx(730 * 2.69) and c["sizing"]["replicas"] == 1


def test_cost_band_names_its_request_rates_with_their_unit():
    d = cli_json("cost", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:100", "--output-lengths",
                 "fixed:50", "--num-requests", "100", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                 "--utilization", "0.5")
    band, cs = d["error_band"], d["simulation"]["capacity_search"]
    assert cs["slo_capacity_req_per_s"] == d["capacity"]["slo_capacity_req_per_s"] == band["sizing_req_per_s"]
    assert cs["error_band"]["unit"] == "req/s" and "boundary_rate_req_per_s" not in _keys(d)
    assert {"capacity_low_req_per_s", "capacity_high_req_per_s", "goodput_low_req_per_s",
            "goodput_high_req_per_s"} <= set(band) and "capacity_low" not in band
    assert band["capacity_low_req_per_s"] == pytest.approx(cs["error_band"]["low"])
