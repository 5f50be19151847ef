"""GuideLLM: the real v2 (metadata.version 2) sample, and constructed files with kept requests in both layouts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import AggregateRun, read_runs
from kvledger.records import RunRecords

DATA = Path(__file__).parent / "data" / "guidellm"


def test_v2_sample_two_aggregate_benchmarks():
    runs = read_runs(DATA / "llmd_fixture_guidellm_report_v2_mockserver.json")
    assert [type(r) for r in runs] == [AggregateRun, AggregateRun]  # request lists are empty in this fixture
    a, b = runs
    assert (a.metadata.request_rate, b.metadata.request_rate) == (2.0, 4.0)
    assert a.metadata.model == "e2e-mock-model"
    assert a.duration_s == pytest.approx(5.01964807510376) and b.duration_s == pytest.approx(2.5186119079589844)
    assert (a.num_completed, a.num_failed) == (2, 0)


def test_v2_units_and_definition_traps():
    a = read_runs(DATA / "llmd_fixture_guidellm_report_v2_mockserver.json")[0]
    ttft = a.metrics["ttft"]
    # time_to_first_token_ms successful: mean 11.481165885925293 ms, p99 11.686325073242188 ms, count 2
    assert ttft.mean_s == pytest.approx(0.011481165885925293) and ttft.weighting == "request"
    # GuideLLM percentile keys: p001 = 0.1 %, p999 = 99.9 % (not 1 % and 999 %)
    assert 0.1 in ttft.percentiles_s and 99.9 in ttft.percentiles_s and 999.0 not in ttft.percentiles_s
    # TPOT is inter_token_latency_ms (mean 1.1508 ms), not time_per_output_token_ms (2.4421 ms, first token included);
    # its count is 14 (2 requests × 7 gaps): token-weighted, so only its min/max bound requests
    tpot = a.metrics["tpot"]
    assert tpot.mean_s == pytest.approx(1.1508464813232422e-3) and tpot.weighting == "token" and tpot.count == 14
    # request_latency is in seconds (no _ms suffix): mean 0.01978909969329834 s
    assert a.metrics["e2e"].mean_s == pytest.approx(0.01978909969329834)


def _v2_with_requests(tmp_path: Path, kept_successful: int = 2) -> Path:
    # Constructed from the v2 layout (docs/formats.md §4): requests.{successful, errored, incomplete} of
    # GenerativeRequestStats with info.timings in epoch seconds and computed token counts.
    def req(i, start, first, last, out, status_err=None):
        info = {"timings": {"request_start": start, "first_token_iteration": first, "last_token_iteration": last,
                            "request_end": last + 0.001}}
        if status_err:
            info["error"] = status_err
        return {"request_id": f"q{i}", "info": info, "prompt_tokens": 10, "output_tokens": out}
    succ = [req(0, 1000.0, 1000.2, 1000.8, 4), req(1, 1000.5, 1000.6, 1001.5, 10)][:kept_successful]
    bench = {"type_": "generative_benchmark", "config": {"strategy": {"type_": "concurrent", "streams": 2,
                                                                      "max_concurrency": 2}},
             "duration": 2.0, "metrics": {"request_totals": {"successful": 2, "errored": 1, "incomplete": 0,
                                                             "total": 3}},
             "requests": {"successful": succ, "errored": [req(2, 1001.0, None, 1001.1, 0, "timeout")],
                          "incomplete": []}}
    doc = {"metadata": {"version": 2}, "config": {"spec": {"backend": {"model": "m"}}}, "benchmarks": [bench]}
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps(doc))
    return p


def test_v2_kept_requests_become_records(tmp_path):
    (run,) = read_runs(_v2_with_requests(tmp_path))
    assert isinstance(run, RunRecords) and run.metadata.concurrency == 2
    q0, q1, q2 = run.records
    # origin = first request_start 1000.0 s; q1 starts at +0.5 s; TTFT 0.1 s; to the last token 1.0 s
    assert (q1.arrival_s, q1.ttft_s, q1.e2e_s) == pytest.approx((0.5, 0.1, 1.0))
    # canonical TPOT (GuideLLM inter_token_latency_ms): (1001.5 − 1000.6)/(10 − 1) = 0.1 s
    assert q1.tpot_s == pytest.approx(0.1)
    assert q2.error == "errored: timeout" and not q2.ok
    assert run.metadata.duration_s == 2.0 and "sample_weights" not in run.metadata.extra


def test_v2_sampled_requests_are_flagged_with_weights(tmp_path):
    (run,) = read_runs(_v2_with_requests(tmp_path, kept_successful=1))
    # request_totals say 2 successful but only 1 was kept → each kept success stands for 2
    assert run.metadata.extra["sample_weights"] == {"ok": 2.0, "failed": 1.0}


def test_older_layout_with_generative_text_responses(tmp_path):
    # Constructed from the v0.2–v0.4 layout (docs/formats.md §4): benchmarks[] with args, request_totals and
    # requests.successful of type_ generative_text_response with start/first/last token times (epoch s).
    resp = {"type_": "generative_text_response", "request_id": "a", "prompt_tokens": 5, "output_tokens": 3,
            "start_time": 50.0, "end_time": 50.5, "first_token_time": 50.1, "last_token_time": 50.45}
    bench = {"type_": "generative_benchmark", "args": {"strategy": {"type_": "constant", "rate": 1.5}}, "duration": 1.0,
             "request_totals": {"successful": 1, "errored": 0, "incomplete": 0},
             "requests": {"successful": [resp], "errored": [], "incomplete": []}}
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"benchmarks": [bench]}))
    (run,) = read_runs(p)
    assert run.metadata.request_rate == 1.5
    r = run.records[0]
    # TPOT = (50.45 − 50.1)/(3 − 1) = 0.175 s; E2E to the last token 0.45 s
    assert (r.ttft_s, r.e2e_s, r.tpot_s) == pytest.approx((0.1, 0.45, 0.175))


def test_token_time_before_start_is_a_negative_latency(tmp_path):
    p = _v2_with_requests(tmp_path)
    doc = json.loads(p.read_text())
    doc["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"]["first_token_iteration"] = 999.0
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"requests.successful\[0\].*before the request start.*negative latency"):
        read_runs(p)


def test_a_request_whose_info_timings_is_null_reads_its_top_level_times(tmp_path):
    # "info": {"timings": null} with the times at the request's top level (the older layout's names): the window test
    # read them, while the record reader called .get on None and failed with AttributeError
    def req(i, start):
        return {"request_id": f"q{i}", "info": {"timings": None}, "request_start_time": start,
                "first_token_time": start + 0.2, "request_end_time": start + 0.8, "prompt_tokens": 10,
                "output_tokens": 4}
    bench = {"config": {"strategy": {"type_": "synchronous"}}, "duration": 2.0,
             "requests": {"successful": [req(0, 1000.0), req(1, 1001.0)], "errored": [], "incomplete": []}}
    p = tmp_path / "benchmarks.json"
    p.write_text(json.dumps({"benchmarks": [bench]}))
    (run,) = read_runs(p)
    assert isinstance(run, RunRecords)
    # times from the first start (1000.0 s): q0 starts at 0, first token 0.2, ends 0.8; q1 one second later
    got = [(r.arrival_s, r.first_token_s, r.finish_s) for r in run.records]
    assert got == [pytest.approx((0.0, 0.2, 0.8)), pytest.approx((1.0, 1.2, 1.8))]
