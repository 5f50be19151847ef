"""Multi-run files as users have them (tests/data/public-bench, SOURCES.md): llmperf-bench's collection of llmperf
summaries keyed by concurrency, read as one run per level; InferenceX's together_runner results, one level a file.
Values read by hand from the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence.read import read_runs

DATA = Path(__file__).parents[1] / "data" / "public-bench"
LLMPERF_BENCH = DATA / "llmperf_bench_llama3_8b_tgi_results.json"
DIGEST = DATA / "llmperf_bench_llama3_8b_tgi_summary.json"
TOGETHER = DATA / "inferencex_together_runner_b200_vllm_gptoss_conc16.json"


def test_llmperf_bench_collection_one_run_per_concurrency():
    runs = read_runs(LLMPERF_BENCH)
    # keys "1", "2", "4", …, "128", each summary's num_concurrent_requests the same
    assert [r.metadata.concurrency for r in runs] == [1, 2, 4, 8, 16, 32, 64, 128]
    assert runs[0].metadata.extra["run_label"] == "num_concurrent_requests 1"
    first = runs[0]
    # "1": results_num_completed_requests 100, results_num_completed_requests_per_min 10.458897916370304
    # → duration 100 ÷ 10.4589 × 60 = 573.674 s; results_ttft_s_mean 0.15813857590983388;
    # results_number_input_tokens_mean 603.01 × 100 = 60301, output 174.59 × 100 = 17459
    assert first.num_completed == 100 and first.num_failed == 0
    assert first.duration_s == pytest.approx(100 / 10.458897916370304 * 60)
    assert first.metrics["ttft"].mean_s == pytest.approx(0.15813857590983388)
    assert (first.total_input_tokens, first.total_output_tokens) == (60301, 17459)
    # "128": results_num_completed_requests 128; every level names model meta-llama/Meta-Llama-3-8B-Instruct
    assert runs[-1].num_completed == 128 and runs[-1].metadata.model == "meta-llama/Meta-Llama-3-8B-Instruct"


def test_llmperf_bench_key_not_its_concurrency_refused(tmp_path):
    obj = json.loads(LLMPERF_BENCH.read_text())
    obj["3"] = obj.pop("4")  # the summary under it states num_concurrent_requests 4
    p = tmp_path / LLMPERF_BENCH.name
    p.write_text(json.dumps(obj))
    with pytest.raises(FormatError, match="key '3' states num_concurrent_requests 4"):
        read_runs(p)


def test_llmperf_bench_field_errors_name_the_level(tmp_path):
    obj = json.loads(LLMPERF_BENCH.read_text())
    obj["8"]["results_ttft_s_mean"] = -1.0
    p = tmp_path / LLMPERF_BENCH.name
    p.write_text(json.dumps(obj))
    with pytest.raises(FormatError, match=r"8\.results_ttft_s_mean"):
        read_runs(p)


def test_llmperf_bench_digest_sent_to_its_results_file():
    with pytest.raises(FormatError) as e:
        read_runs(DIGEST)
    assert "llmperf-bench's digest" in str(e.value) and "llmperf_bench_llama3_8b_tgi_results.json is beside it" in str(
        e.value)


def test_together_runner_level():
    (run,) = read_runs(TOGETHER)
    meta = run.metadata
    # conc 16, tp 4 (gpu.n_gpus 8 is the host's sampled GPUs), hw b200, image vllm/vllm-openai:v0.22.0
    assert (meta.concurrency, meta.num_gpus, meta.hardware) == (16, 4, "b200")
    assert meta.extra["vllm_version"] == "0.22.0"
    assert meta.extra["engine_kwargs"] == {"tensor_parallel_size": 4}
    # successful_requests 160 at request_throughput 20.21575741924704 req/s → 7.9146 s; output_token_throughput
    # 3415.8312614333986 × 7.9146 = 27035 tokens; (13952.031331377217 − 3415.83) × 7.9146 = 83390
    assert run.num_completed == 160
    assert run.duration_s == pytest.approx(160 / 20.21575741924704)
    assert (run.total_input_tokens, run.total_output_tokens) == (83390, 27035)
    # median_ttft_ms 26.274723932147026, p99_tpot_ms 11.751751718915648, median_itl_ms (per gap) 3.1752577051520348
    assert run.metrics["ttft"].percentiles_s[50.0] == pytest.approx(0.026274723932147026)
    assert run.metrics["tpot"].percentiles_s[99.0] == pytest.approx(0.011751751718915648)
    assert run.metrics["itl"].weighting == "gap"


def test_together_runner_without_request_count_refused(tmp_path):
    # the flat recipe records, adapted (baselines/mi350x/...), keep no successful_requests or request_throughput
    obj = json.loads(TOGETHER.read_text())
    del obj["metrics"]["successful_requests"], obj["metrics"]["request_throughput"]
    p = tmp_path / TOGETHER.name
    p.write_text(json.dumps(obj))
    with pytest.raises(FormatError, match="states no successful_requests, request_throughput under metrics"):
        read_runs(p)


def test_together_runner_forced_on_a_file_without_metrics_is_a_format_error(tmp_path):
    # --format inferencex-together-runner on a file of another tool (no top-level metrics object): a FormatError
    # naming the missing object, not a KeyError (benchmarks/fuzz.py found the traceback)
    p = tmp_path / "other.json"
    p.write_text(json.dumps({"hw": "b200", "conc": 16, "results": []}))
    with pytest.raises(FormatError, match="has no metrics object"):
        read_runs(p, format="inferencex-together-runner")
