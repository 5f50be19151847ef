"""AIPerf 0.11 profile_export_aiperf.json: the goodput SLO in input_config.slos, the load in phases and run_info.

The fixture (tests/fixtures/bench_public/aiperf_0_11_profile_export_aiperf.json) is synthetic, in the layout of a
public AIPerf 0.11.0 export (SOURCES.md there says which and why not a copy): 200 requests in one profiling phase at
concurrency 8 after a warmup phase at concurrency 1 (exclude_from_results), goodput run with
``--goodput 'time_to_first_token:500 inter_token_latency:20'``; 198 good requests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.evidence import read_runs
from kvledger.evidence.aiperf import input_config_metadata
from kvledger.ledgers.estimate import estimate_goodput
from kvledger.ledgers.slo import parse_slo

FIXTURE = Path(__file__).parents[1] / "fixtures" / "bench_public" / "aiperf_0_11_profile_export_aiperf.json"


def _doc() -> dict:
    return json.loads(FIXTURE.read_text())


def test_concurrency_and_model_from_the_0_11_input_config():
    (agg,) = read_runs(FIXTURE)
    # input_config.phases: warmup (exclude_from_results, concurrency 1) and profiling (concurrency 8): the measured 8
    assert agg.metadata.concurrency == 8
    # input_config.models.items[0].name
    assert agg.metadata.model == "synthetic-model"


def _without(tmp_path, key: str):
    """The fixture's run read back with ``input_config[key]`` removed."""
    doc = _doc()
    del doc["input_config"][key]
    p = tmp_path / "a.json"
    p.write_text(json.dumps(doc))
    (agg,) = read_runs(p)
    return agg


def test_concurrency_from_variation_values_when_phases_say_nothing(tmp_path):
    agg = _without(tmp_path, "phases")
    # run_info.variation_values = {"phases.profiling.concurrency": 8}
    assert agg.metadata.concurrency == 8


def test_several_measured_concurrencies_state_no_single_one():
    cfg = {"phases": [{"name": "a", "concurrency": 4}, {"name": "b", "concurrency": 16},
                      {"name": "w", "concurrency": 1, "exclude_from_results": True}]}
    assert "concurrency" not in input_config_metadata(cfg)
    cfg["phases"][1]["concurrency"] = 4  # both measured phases at 4: that is the run's concurrency
    assert input_config_metadata(cfg)["concurrency"] == 4


def test_goodput_slo_is_read_from_input_config():
    (agg,) = read_runs(FIXTURE)
    tool = agg.tool_goodput
    # goodput.avg = 198/60 req/s, good_request_count.avg = 198; input_config.slos verbatim (limits in ms, the unit of
    # time_to_first_token and inter_token_latency in this file)
    assert tool["req_per_s"] == pytest.approx(198 / 60) and tool["good_requests"] == 198
    assert tool["slo"] == _doc()["input_config"]["slos"] == {"time_to_first_token": 500.0, "inter_token_latency": 20.0}
    # AIPerf's inter_token_latency is (e2e − ttft)/(osl − 1) per request: kvledger's tpot
    assert tool["slo_as_kvledger"] == "ttft=500ms,tpot=20ms"
    assert any("input_config.slos: time_to_first_token ≤ 500 ms, inter_token_latency ≤ 20 ms" in d
               for d in agg.metadata.definitions)


def test_kvledger_bounds_under_the_files_slo_bracket_the_tools_count():
    (agg,) = read_runs(FIXTURE)
    g = estimate_goodput(agg, parse_slo(agg.tool_goodput["slo_as_kvledger"]))
    # ttft: p99 450 ms ≤ 500 ms → ≥ ⌊0.99·199⌋ + 1 = 198; max 900 ms > 500 ms → ≤ 199. tpot the same (p99 18 ms,
    # max 25 ms against 20 ms). Joint: ≥ 200 − 2 − 2 = 196, ≤ 199; AIPerf counted 198
    assert (g.num_good, g.num_good_upper) == (196, 199)
    assert g.num_good <= agg.tool_goodput["good_requests"] <= g.num_good_upper


def test_without_slos_the_file_is_said_not_to_state_them(tmp_path):
    agg = _without(tmp_path, "slos")
    assert agg.tool_goodput["slo"] == "not stored in the file (aiperf --goodput)"
    assert "slo_as_kvledger" not in agg.tool_goodput


def test_an_slo_kvledger_has_no_key_for_is_kept_verbatim_without_a_translation(tmp_path):
    doc = _doc()
    # a throughput floor (AIPerf: larger is better), which no kvledger --slo key expresses
    doc["input_config"]["slos"]["output_token_throughput_per_user"] = 50.0
    doc["output_token_throughput_per_user"] = {"unit": "tokens/sec/user", "avg": 80.0}
    p = tmp_path / "a.json"
    p.write_text(json.dumps(doc))
    (agg,) = read_runs(p)
    assert agg.tool_goodput["slo"]["output_token_throughput_per_user"] == 50.0
    assert "slo_as_kvledger" not in agg.tool_goodput
    assert any("output_token_throughput_per_user: 50 tokens/sec/user" in d for d in agg.metadata.definitions)
