"""AIPerf: the real early-layout run (jsonl, aggregate JSON, CSV) and a constructed current-layout file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import AggregateRun, read_run
from kvledger.records import RunRecords

DATA = Path(__file__).parent / "data" / "aiperf"


@pytest.fixture(scope="module")
def run() -> RunRecords:
    r = read_run(DATA / "run1_profile_export.jsonl")
    assert isinstance(r, RunRecords)
    return r


def test_counts_errors_and_origin(run):
    # 100 lines, 11 cancelled with {"code": 499, "type": "RequestCancellationError"} (SOURCES.md)
    assert len(run.records) == 100
    failed = [r for r in run.records if not r.ok]
    assert len(failed) == 11
    assert failed[0].error == "499 RequestCancellationError Request was cancelled after 0.000 seconds"
    assert failed[0].num_output_tokens == 0 and failed[0].first_token_s is None
    # earliest metadata.timestamp_ns in the file is 1759522419154568925 (line 20), shifted to 0
    assert min(r.arrival_s for r in run.records) == 0.0
    assert run.metadata.time_origin == "first request start, Unix epoch 1759522419154568925 ns"


def test_duration_matches_aiperf_benchmark_duration(run):
    # AIPerf's own aggregate: benchmark_duration 9.317788951 s = (max response 1759522428472357876
    # − min request 1759522419154568925) ns; our span of the records must equal it.
    assert run.duration_s == pytest.approx(9.317788951, abs=1e-9)
    # and completed ÷ duration = AIPerf request_throughput 9.551622221540914 req/s
    assert sum(r.ok for r in run.records) / run.duration_s == pytest.approx(9.551622221540914, rel=1e-12)


def test_first_successful_record_units_and_tpot(run):
    # line 12: ttft 1680.543782 ms, request_latency 7936.968269 ms, output_sequence_length 193
    # (61 output + 132 reasoning tokens), 192 inter_chunk_latency gaps (ms), input 550 tokens.
    rec = next(r for r in run.records if r.request_id == "1ed40a0d-e708-434d-bb8e-fb1b44cb8717")
    assert rec.ttft_s == pytest.approx(1.680543782, abs=1e-9)
    assert rec.e2e_s == pytest.approx(7.936968269, abs=1e-9)
    assert (rec.num_prompt_tokens, rec.num_output_tokens) == (550, 193)
    assert rec.chunk_times_s.size == 193
    # AIPerf's inter_token_latency for this record is 32.585544203124996 ms = (7936.968269 − 1680.543782)/192:
    # our canonical TPOT recomputed from timestamps is the same number.
    assert rec.tpot_s * 1e3 == pytest.approx(32.585544203124996, rel=1e-9)
    # first gap equals AIPerf's ttst (time to second token) 134.440792 ms
    assert rec.itls_s[0] == pytest.approx(0.134440792, abs=1e-9)
    # ttft + Σ gaps = request latency: the chunk times end at the finish
    assert rec.chunk_times_s[-1] == pytest.approx(rec.finish_s, abs=1e-9)


def test_model_and_concurrency_from_the_sibling_aggregate(run, tmp_path):
    assert run.metadata.model == "openai/gpt-oss-20b" and run.metadata.concurrency == 100
    alone = tmp_path / "profile_export.jsonl"
    shutil.copy(DATA / "run1_profile_export.jsonl", alone)
    assert read_run(alone).metadata.model is None


def test_aggregate_json_early_layout():
    agg = read_run(DATA / "run1_profile_export_aiperf.json")
    assert isinstance(agg, AggregateRun)
    # records.request_count.avg 89 (successful), error_request_count.avg 11, benchmark_duration 9.317788951 sec
    assert (agg.num_completed, agg.num_failed, agg.num_requests) == (89, 11, 100)
    assert agg.duration_s == 9.317788951
    ttft = agg.metrics["ttft"]
    assert ttft.weighting == "request" and ttft.count == 89
    assert ttft.percentiles_s[99.0] == pytest.approx(3.8333894000399996, rel=1e-12)  # p99 3833.3894000399996 ms
    assert ttft.min_s == pytest.approx(0.46466410099999996)
    # AIPerf inter_token_latency is canonical TPOT; inter_chunk_latency is pooled gaps (count 21537)
    assert agg.metrics["tpot"].max_s == pytest.approx(0.0348605763625)
    assert agg.metrics["itl"].weighting == "gap" and agg.metrics["itl"].count == 21537
    assert (agg.total_input_tokens, agg.total_output_tokens) == (48950, 21624)


def test_csv_export_reads_the_same_numbers_rounded():
    agg = read_run(DATA / "run1_profile_export_aiperf.csv")
    # CSV: "Time to First Token (ms),2343.22,464.66,3853.86,...,p99 3833.39" and "Benchmark Duration (sec),9.32"
    assert (agg.num_completed, agg.num_failed, agg.duration_s) == (89, 11, 9.32)
    assert agg.metrics["ttft"].percentiles_s[99.0] == pytest.approx(3.83339)
    assert agg.metrics["e2e"].max_s == pytest.approx(9.29977)


def _current_layout(tmp_path: Path) -> Path:
    # Constructed from the current documented layout (docs/formats.md §3 / aiperf docs/metrics-reference.md):
    # request_start_ns, benchmark_phase, long metric tags, error_isl on failures.
    def rec(start, phase, ttft=None, lat=None, icl=None, osl=None, err=None):
        md = {"x_request_id": f"r{start}", "request_start_ns": start, "benchmark_phase": phase}
        if err:
            return {"metadata": md, "metrics": {"error_isl": {"value": 100, "unit": "tokens"}}, "error": err}
        return {"metadata": md, "error": None, "metrics": {
            "time_to_first_token": {"value": ttft, "unit": "ms"}, "request_latency": {"value": lat, "unit": "ms"},
            "inter_chunk_latency": {"value": icl, "unit": "ms"}, "output_sequence_length": {"value": osl,
                "unit": "tokens"},
            "input_sequence_length": {"value": 100, "unit": "tokens"}}}
    lines = [rec(1_000_000_000, "warmup", 5.0, 25.0, [10.0, 10.0], 3),
             rec(2_000_000_000, "profiling", 100.0, 140.0, [20.0, 20.0], 3),
             rec(2_500_000_000, "profiling", err={"code": 500, "type": "ServerError", "message": "boom"}),
             rec(3_000_000_000, None, 50.0, 50.0, [], 1)]
    p = tmp_path / "profile_export.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def test_current_layout_drops_warmup_and_keeps_phaseless(tmp_path):
    run = read_run(_current_layout(tmp_path))
    assert [r.request_id for r in run.records] == ["r2000000000", "r2500000000", "r3000000000"]
    assert "1 warmup records dropped" in run.metadata.definitions
    a, b, c = run.records
    # origin = first kept start (2.0e9 ns); 2.5e9 ns → 0.5 s; 3.0e9 ns → 1.0 s
    assert (a.arrival_s, b.arrival_s, c.arrival_s) == (0.0, 0.5, 1.0)
    assert a.ttft_s == pytest.approx(0.1) and a.tpot_s == pytest.approx((0.14 - 0.1) / 2)
    assert list(a.chunk_times_s) == pytest.approx([0.1, 0.12, 0.14])
    assert b.error == "500 ServerError boom" and b.num_prompt_tokens == 100
    assert c.tpot_s == 0.0  # a single output token has no TPOT (vLLM convention)


def test_nan_and_negative_latency_name_the_line(tmp_path):
    p = _current_layout(tmp_path)
    text = p.read_text().replace('"value": 100.0, "unit": "ms"', '"value": NaN, "unit": "ms"')
    p.write_text(text)
    with pytest.raises(FormatError, match=r"line 2: metrics.time_to_first_token.*not a finite number"):
        read_run(p)
    p.write_text(text.replace("NaN", "-3.0"))
    with pytest.raises(FormatError, match=r"line 2: metrics.time_to_first_token: negative latency"):
        read_run(p)


def test_only_warmup_records_is_explained(tmp_path):
    p = tmp_path / "w.jsonl"
    p.write_text(json.dumps({"metadata": {"request_start_ns": 5, "benchmark_phase": "warmup"}, "metrics": {}}) + "\n")
    with pytest.raises(FormatError, match="only warmup records"):
        read_run(p)


def test_unknown_unit_is_rejected(tmp_path):
    p = _current_layout(tmp_path)
    p.write_text(p.read_text().replace('"value": 140.0, "unit": "ms"', '"value": 140.0, "unit": "fortnights"'))
    with pytest.raises(FormatError, match="unknown time unit 'fortnights'"):
        read_run(p)
