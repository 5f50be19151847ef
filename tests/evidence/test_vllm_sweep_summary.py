"""`vllm bench sweep`'s summary.json: a JSON list of `vllm bench serve` results, one per serve × bench combination and
repetition, with the swept parameters merged in (layout of vLLM 0.25's sweep; the values of the first object are a
public opt-125m run's, er0080/vllm-benchmarking's test fixture, retyped, not copied)."""

from __future__ import annotations

import json

import pytest

from kvledger.errors import FormatError
from kvledger.evidence.read import read_runs
from kvledger.evidence.vllm_bench import sweep_params


def _result(run_number: int, duration: float, ttft_ms: float) -> dict:
    return {"date": "20260818-021333", "endpoint_type": "openai", "backend": "openai", "label": None,
            "model_id": "facebook/opt-125m", "tokenizer_id": "facebook/opt-125m", "num_prompts": 8,
            "request_rate": "inf", "burstiness": 1.0, "max_concurrency": 2, "duration": duration, "completed": 8,
            "failed": 0, "total_input_tokens": 256, "total_output_tokens": 128,
            "request_throughput": 8 / duration, "output_throughput": 128 / duration,
            "mean_ttft_ms": ttft_ms, "median_ttft_ms": ttft_ms, "p99_ttft_ms": ttft_ms,
            "mean_tpot_ms": 8.2, "median_tpot_ms": 8.3, "p99_tpot_ms": 9.4, "run_number": run_number,
            "max_num_seqs": 4}


def test_a_sweep_summary_is_one_run_per_object_labelled_by_its_parameters(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([_result(0, 1.3653671270003542, 217.3), _result(1, 0.642, 40.0)]), encoding="utf-8")
    runs = read_runs(path)
    assert [r.metadata.source_format for r in runs] == ["vllm-bench-serve"] * 2
    # max_num_seqs is no field of a bench result: a swept serve parameter; max_concurrency the client's; run_number the
    # repetition
    assert runs[0].metadata.extra["run_label"] == "run 0 (max_num_seqs=4, max_concurrency=2, repetition 0)"
    assert runs[1].metadata.concurrency == 2 and runs[1].num_completed == 8
    # the first object's duration as stated: 8 requests in 1.365 s = 5.859 req/s, the file's request_throughput
    assert runs[0].metadata.duration_s == pytest.approx(1.3653671270003542)
    assert sweep_params({"mean_ttft_ms": 1.0, "completed": 3}) == ""  # a plain result has none


def test_a_list_with_a_non_object_names_its_place(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([_result(0, 1.0, 10.0), 7]), encoding="utf-8")
    with pytest.raises(FormatError, match=r"\[1\].*expected a JSON object per run"):
        read_runs(path)


def _sglang_result(rate: float) -> dict:
    # the scalars of one SGLang bench_serving result (sglang 0.5.23 sglang/benchmark/serving.py, the result dict of
    # benchmark(); latency summaries cut to two): its settings and figures, no swept parameter among them
    return {"tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": rate, "max_concurrency": None,
            "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 128, "random_range_ratio": 0.5,
            "server_info": None, "duration": 10.0, "completed": 20, "total_input_tokens": 15000,
            "total_input_text_tokens": 15000, "total_input_vision_tokens": 0, "total_output_tokens": 2000,
            "total_output_tokens_retokenized": 1990, "request_throughput": 2.0, "input_throughput": 1500.0,
            "output_throughput": 200.0, "total_throughput": 1700.0, "mean_e2e_latency_ms": 900.0,
            "mean_ttft_ms": 50.0, "concurrency": 1.8, "accept_length": None, "max_output_tokens_per_s": 300.0,
            "max_concurrent_requests": 4}


def test_a_list_of_sglang_results_names_no_sglang_field_as_swept(tmp_path):
    path = tmp_path / "sglang_runs.json"
    path.write_text(json.dumps([_sglang_result(2.0), dict(_sglang_result(4.0), chunked_prefill_size=4096)]))
    runs = read_runs(path)
    assert [r.metadata.source_format for r in runs] == ["sglang-bench-serving"] * 2
    # dataset_name, random_input_len, concurrency (SGLang's mean in flight), input_throughput … are SGLang's own
    # fields, not parameters (they labelled the run as "run 0 (dataset_name=random, random_input_len=1024, …)"); a
    # scalar SGLang does not write is still one
    assert [r.metadata.extra["run_label"] for r in runs] == ["run 0", "run 1 (chunked_prefill_size=4096)"]


def test_vllm_speculative_decoding_figures_are_results_not_swept_parameters(tmp_path):
    # vLLM 0.25.0 vllm/benchmarks/serve.py writes these beside the latencies of a run with speculative decoding
    spec = {"spec_decode_acceptance_rate": 0.71, "spec_decode_acceptance_length": 2.42, "spec_decode_num_drafts": 500,
            "spec_decode_draft_tokens": 1500, "spec_decode_accepted_tokens": 710}
    path = tmp_path / "summary.json"
    path.write_text(json.dumps([dict(_result(0, 1.0, 10.0), **spec), dict(_result(1, 1.0, 10.0), **spec)]))
    # the label as without them: max_num_seqs the swept serve parameter, then the client's cap and the repetition
    assert read_runs(path)[0].metadata.extra["run_label"] == "run 0 (max_num_seqs=4, max_concurrency=2, repetition 0)"
