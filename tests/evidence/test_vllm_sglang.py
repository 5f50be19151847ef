"""vLLM ``bench serve`` and SGLang ``bench_serving`` results: constructed detailed files, old spellings, JSON Lines,
InferenceX seconds.

No real ``--save-detailed``/``--output-details`` sample exists in the reference set; the files
below are constructed from the result dicts in ``vllm/benchmarks/serve.py`` (2026 main:
``input_lens``, ``output_lens``, ``ttfts``, ``itls``, ``latencies``, ``start_times``, ``errors``)
and SGLang ``bench_serving.py`` (``result | result_details``, or nested under ``details``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import AggregateRun, read_run, read_runs
from kvledger.records import RunRecords

DATA = Path(__file__).parent / "data"


def vllm_detailed() -> dict:
    return {
        "date": "20260301-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct", "num_prompts": 4,
        "request_rate": 2.0, "burstiness": 1.0, "max_concurrency": None, "gpu": "H100 80GB SXM", "num_gpus": "1",
        "duration": 1.5, "completed": 3, "failed": 1, "total_input_tokens": 300, "total_output_tokens": 9,
        "request_throughput": 2.0, "request_goodput": None, "output_throughput": 6.0,
        "input_lens": [100, 100, 100, 100], "output_lens": [4, 4, 0, 1],
        "ttfts": [0.1, 0.3, 0.0, 0.2], "itls": [[0.05, 0.05, 0.05], [0.02, 0.08], [], []],
        "latencies": [0.25, 0.4, 0.0, 0.2], "start_times": [10.0, 10.5, 10.7, 11.0],
        "errors": ["", "", "Bad Request", ""], "generated_texts": ["a", "b", "", "c"],
        "mean_ttft_ms": 200.0, "median_ttft_ms": 200.0, "p99_ttft_ms": 298.0,
    }


def write(tmp_path: Path, name: str, obj) -> Path:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_vllm_detailed_records(tmp_path):
    run = read_run(write(tmp_path, "vllm.json", vllm_detailed()))
    assert isinstance(run, RunRecords) and run.metadata.source_format == "vllm-bench-serve"
    r0, r1, r2, r3 = run.records
    # arrival = start_times − 10.0; first chunk at start + ttft; then one chunk after each gap
    assert [r.arrival_s for r in run.records] == pytest.approx([0.0, 0.5, 0.7, 1.0])
    assert list(r0.chunk_times_s) == pytest.approx([0.1, 0.15, 0.2, 0.25])
    # TPOT = (latency − ttft)/(output_len − 1) = (0.25 − 0.1)/3 = 0.05 s, as vLLM computes it
    assert r0.tpot_s == pytest.approx(0.05)
    # request 1: 4 tokens in 3 chunks (one chunk carried 2 tokens): gaps are per chunk, TPOT per token
    assert list(r1.itls_s) == pytest.approx([0.02, 0.08]) and r1.tpot_s == pytest.approx((0.4 - 0.3) / 3)
    assert r2.error == "Bad Request" and r2.first_token_s is None and r2.finish_s is None
    assert r3.tpot_s == 0.0  # one output token
    md = run.metadata
    assert (md.model, md.hardware, md.num_gpus, md.request_rate, md.duration_s) == ("meta-llama/Llama-3.1-8B-Instruct",
                                                                                    "H100 80GB SXM", 1, 2.0, 1.5)


def test_old_vllm_file_colon_goodput_key_and_reconstructed_e2e(tmp_path):
    d = vllm_detailed()
    for k in ("latencies", "start_times", "failed", "request_goodput"):
        del d[k]
    d["request_goodput:"] = 1.25  # 2024 benchmark_serving.py spelling, with the trailing colon
    run = read_run(write(tmp_path, "old.json", d))
    assert run.metadata.extra["tool_goodput"]["req_per_s"] == 1.25
    assert run.metadata.extra["tool_goodput"]["field"] == "request_goodput:"
    assert any("trailing colon" in n for n in run.metadata.definitions)
    # no start_times: each request on its own clock; E2E = ttft + Σ itls = 0.1 + 0.15 = 0.25
    assert all(r.arrival_s == 0.0 for r in run.records) and run.records[0].e2e_s == pytest.approx(0.25)


def test_old_aggregate_only_file_with_colon_key(tmp_path):
    d = {k: v for k, v in vllm_detailed().items() if not isinstance(v, list)}
    d.pop("request_goodput")
    d["request_goodput:"] = 0.9
    agg = read_run(write(tmp_path, "agg.json", d))
    assert isinstance(agg, AggregateRun) and agg.tool_goodput["req_per_s"] == 0.9
    # aggregates are milliseconds: p99_ttft_ms 298.0 → 0.298 s
    assert agg.metrics["ttft"].percentiles_s == {50.0: 0.2, 99.0: pytest.approx(0.298)}


def test_append_result_lines_are_separate_runs(tmp_path):
    a, b = vllm_detailed(), vllm_detailed()
    b["request_rate"] = 4.0
    runs = read_runs(write(tmp_path, "sweep.json", json.dumps(a) + "\n" + json.dumps(b)))
    assert [r.metadata.request_rate for r in runs] == [2.0, 4.0]
    assert [r.metadata.extra["run_label"] for r in runs] == ["line 1", "line 2"]


def test_array_damage_is_located(tmp_path):
    d = vllm_detailed()
    d["ttfts"][1] = float("nan")
    with pytest.raises(FormatError, match=r"ttfts\[1\].*not a finite number"):
        read_run(write(tmp_path, "nan.json", json.dumps(d)))  # json.dumps writes NaN, as Python's json does
    d = vllm_detailed()
    d["itls"][0][2] = -0.01
    with pytest.raises(FormatError, match=r"itls\[0\]\[2\]: negative latency"):
        read_run(write(tmp_path, "neg.json", d))
    d = vllm_detailed()
    d["errors"] = d["errors"][:3]
    with pytest.raises(FormatError, match=r"'errors' has 3 entries but input_lens has 4"):
        read_run(write(tmp_path, "short.json", d))
    d = vllm_detailed()
    d["latencies"][0] = 0.05  # shorter than its ttft 0.1
    with pytest.raises(FormatError, match=r"latencies\[0\]: latency 0.05 s is shorter than the TTFT"):
        read_run(write(tmp_path, "inv.json", d))


def test_inferencex_keys_without_ms_suffix_are_seconds():
    agg = read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")
    # "p99_ttft": 0.5848183088190854 — seconds (a 585 ms TTFT); read as ms it would be 0.58 ms
    assert agg.metrics["ttft"].percentiles_s[99.0] == 0.5848183088190854
    assert agg.metrics["tpot"].percentiles_s[50.0] == 0.021372462615488082
    assert (agg.num_completed, agg.metadata.concurrency, agg.duration_s) == (40, 4, 31.08160568587482)
    assert any("without the _ms suffix" in n for n in agg.metadata.definitions)


def sglang_line(details: str | None) -> dict:
    d = {"backend": "sglang", "dataset_name": "random", "request_rate": 8.0, "max_concurrency": 64, "duration": 2.0,
         "completed": 2, "total_input_tokens": 200, "total_output_tokens": 6, "total_output_tokens_retokenized": 6,
         "request_throughput": 1.0, "mean_e2e_latency_ms": 300.0, "median_e2e_latency_ms": 300.0,
             "p99_e2e_latency_ms": 390.0,
         "mean_ttft_ms": 100.0, "median_ttft_ms": 100.0, "p99_ttft_ms": 150.0, "concurrency": 0.3}
    arrays = {"input_lens": [100, 100], "output_lens": [3, 3], "ttfts": [0.05, 0.15], "itls": [[0.1, 0.1], [0.1, 0.1]],
              "errors": ["", ""], "generated_texts": ["x", "y"]}
    if details == "top":
        d |= arrays
    elif details == "nested":
        d["details"] = arrays
    return d


def test_sglang_jsonl_with_and_without_details(tmp_path):
    lines = [sglang_line(None), sglang_line("top"), sglang_line("nested")]
    runs = read_runs(write(tmp_path, "sglang_0301_2_random.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n"))
    assert [type(r).__name__ for r in runs] == ["AggregateRun", "RunRecords", "RunRecords"]
    agg, top, nested = runs
    assert agg.metrics["e2e"].percentiles_s[99.0] == pytest.approx(0.39)  # p99_e2e_latency_ms 390 → 0.39 s
    # SGLang "concurrency" is the mean number in flight, not the limit (max_concurrency 64)
    assert agg.metadata.concurrency == 64 and agg.metadata.extra["mean_in_flight_requests"] == 0.3
    # no start times: E2E = ttft + Σ itls = 0.15 + 0.2 = 0.35 s for request 1
    assert top.records[1].e2e_s == pytest.approx(0.35) and nested.records[1].e2e_s == pytest.approx(0.35)
    assert any("per token" in n for n in nested.metadata.definitions)


def test_sglang_nested_details_damage_is_located(tmp_path):
    d = sglang_line("nested")
    d["details"]["ttfts"][0] = -1
    with pytest.raises(FormatError, match=r"details\.ttfts\[0\]: negative latency"):
        read_runs(write(tmp_path, "s.jsonl", json.dumps(d) + "\n"))


def test_our_goodput_reproduces_vllms_request_goodput(tmp_path):
    # vLLM calculate_metrics counts a completed request as good when every SLO ≥ its value and divides by the
    # duration. For the constructed run with --goodput ttft:200: request 0 (ttft 0.1) ✓, 1 (0.3) ✗, 2 failed,
    # 3 (0.2, equal) ✓ → 2 good / 1.5 s = 1.3333 req/s, which is what vLLM would have written as request_goodput.
    from kvledger.ledgers.goodput import goodput
    from kvledger.ledgers.slo import parse_slo

    d = vllm_detailed()
    d["request_goodput"] = 2 / 1.5
    run = read_run(write(tmp_path, "g.json", d))
    g = goodput(run, parse_slo("ttft=200ms"))
    assert g.goodput_req_per_s == pytest.approx(run.metadata.extra["tool_goodput"]["req_per_s"])
    assert g.good_request_ids() == ["0", "3"]


def test_fractional_percentile_keys_and_missing_e2el(tmp_path):
    d = {k: v for k, v in vllm_detailed().items() if not isinstance(v, list)}
    d["p99.9_ttft_ms"] = 310.0  # --metric-percentiles 99.9 writes "p99.9_ttft_ms"
    agg = read_run(write(tmp_path, "p.json", d))
    assert agg.metrics["ttft"].percentiles_s[99.9] == pytest.approx(0.31)
    assert "e2e" not in agg.metrics  # e2el is only written when --percentile-metrics asks for it
