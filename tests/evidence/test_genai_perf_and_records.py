"""GenAI-Perf raw and aggregate exports (constructed), and kvledger's own records file (round trip, damage, no
overwrite)."""

from __future__ import annotations

import json

import pytest

from kvledger.errors import FormatError, InputError
from kvledger.evidence import read_run, read_runs, write_records
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def _sse(content: str | None, usage: dict | None = None) -> dict:
    delta = {"role": "assistant"} if content is None else {"content": content}
    body = {"choices": [{"index": 0, "delta": delta}]}
    if usage:
        body = {"choices": [], "usage": usage}
    return {"response": "data: " + json.dumps(body) + "\n\n"}


def test_genai_perf_raw_ns_timestamps_and_role_chunk(tmp_path):
    # Constructed from perf_analyzer's profile_export.json layout (the OpenAI case in GenAI-Perf's own
    # llm-metrics tests): timestamps in ns, a role-only first chunk, an empty delta, then [DONE].
    req = {"timestamp": 1_000_000_000,
           "response_timestamps": [1_050_000_000, 1_100_000_000, 1_130_000_000, 1_170_000_000, 1_171_000_000,
                                   1_172_000_000],
           "response_outputs": [_sse(None), _sse("dogs"), _sse(" are"), _sse(" cool"),
                                _sse(None, {"prompt_tokens": 12, "completion_tokens": 3}), {"response": "data: "
                                    "[DONE]\n\n"}]}
    failed = {"timestamp": 1_500_000_000, "response_timestamps": [], "response_outputs": []}
    doc = {"service_kind": "openai", "endpoint": "v1/chat/completions",
           "experiments": [{"experiment": {"mode": "concurrency", "value": 2}, "requests": [req, failed]},
                           {"experiment": {"mode": "request_rate", "value": 5.0}, "requests": [req]}]}
    p = tmp_path / "profile_export.json"
    p.write_text(json.dumps(doc))
    a, b = read_runs(p)
    assert (a.metadata.concurrency, b.metadata.request_rate) == (2, 5.0)
    r, f = a.records
    # first token = first chunk carrying text (1.100 s), not the role-only chunk (1.050 s): TTFT 100 ms
    assert r.ttft_s == pytest.approx(0.1) and r.e2e_s == pytest.approx(0.17)
    assert list(r.itls_s) == pytest.approx([0.03, 0.04])
    assert (r.num_prompt_tokens, r.num_output_tokens) == (12, 3)  # from the usage block
    assert f.error == "no response carrying text" and f.arrival_s == pytest.approx(0.5)


def test_genai_perf_aggregate_json(tmp_path):
    # Constructed from profile_export_genai_perf.json: one top-level key per metric with unit and statistics
    doc = {"request_throughput": {"unit": "requests/sec", "avg": 4.0},
           "request_latency": {"unit": "ms", "avg": 900.0, "p99": 1500.0, "p50": 850.0, "min": 500.0, "max": 1600.0},
           "time_to_first_token": {"unit": "ms", "avg": 120.0, "p99": 300.0},
           "inter_token_latency": {"unit": "ms", "avg": 20.0, "p99": 35.0},
           "request_goodput": {"unit": "requests/sec", "avg": 3.1},
           "input_config": {"model": ["llama"], "concurrency": 8}}
    p = tmp_path / "profile_export_genai_perf.json"
    p.write_text(json.dumps(doc))
    agg = read_run(p)
    assert agg.metadata.source_format == "genai-perf-json"
    assert agg.metrics["tpot"].percentiles_s[99.0] == pytest.approx(0.035)  # inter_token_latency is canonical TPOT
    assert agg.tool_goodput["req_per_s"] == 3.1 and agg.metadata.model == "llama" and agg.metadata.concurrency == 8


def _run() -> RunRecords:
    md = RunMetadata(source="simulator", source_format="simulator", model="m", request_rate=float("inf"))
    recs = [RequestRecord("a", 0.0, 10, 3, 0.1, 0.3, [0.1, 0.2, 0.3]), RequestRecord("b", 0.5, 10, 0,
                                                                                     error="preempted")]
    return RunRecords(recs, md)


def test_records_file_round_trip_and_no_overwrite(tmp_path):
    p = write_records(_run(), tmp_path / "out" / "records.json")
    back = read_run(p)
    assert back.metadata.source_format == "simulator" and back.records == _run().records
    assert back.metadata.request_rate == float("inf")
    with pytest.raises(InputError, match="already exists; refusing to overwrite"):
        write_records(_run(), p)
    write_records(_run(), p, force=True)


def test_records_file_damage_is_located(tmp_path):
    p = write_records(_run(), tmp_path / "records.json")
    doc = json.loads(p.read_text())
    doc["records"][0]["first_token_s"] = -0.5
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"records\[0\]\.first_token_s: .*before arrival_s.*negative latency"):
        read_run(p)
    doc["records"][0]["first_token_s"] = float("nan")
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"records\[0\]\.first_token_s: nan is not a finite number"):
        read_run(p)
    doc["records"][0]["first_token_s"] = 0.1
    doc["records"][0]["ttft"] = 3
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"records\[0\]: unknown record fields \['ttft'\]"):
        read_run(p)
