"""A per-request file that keeps no send times (SGLang `bench_serving --output-details`: `input_lens`, `output_lens`,
`ttfts`, `itls`, `errors`, no `start_times`; vLLM files from before `start_times`) is replayed as its client sent it,
not as a burst of every request at t = 0.

The file is built from the result dict of SGLang's python/sglang/bench_serving.py (`backend`, `request_rate`,
`max_concurrency`, `duration`, `completed`, the `*_ms` summaries, then the `--output-details` arrays): three requests
at request_rate 8, each 4 output tokens, ttft 0.05 s, gaps 0.01 s.
"""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.replay import load_measured
from kvledger.calibration.validate import validate_file

SGLANG = {
    "backend": "sglang", "dataset_name": "random", "request_rate": 8.0, "max_concurrency": None,
    "random_input_len": 64, "random_output_len": 4, "random_range_ratio": 1.0, "duration": 0.4, "completed": 3,
    "total_input_tokens": 192, "total_output_tokens": 12, "request_throughput": 7.5, "output_throughput": 30.0,
    "mean_ttft_ms": 50.0, "median_ttft_ms": 50.0, "p99_ttft_ms": 50.0, "mean_e2e_latency_ms": 80.0,
    "input_lens": [64, 64, 64], "output_lens": [4, 4, 4], "ttfts": [0.05, 0.05, 0.05],
    "itls": [[0.01, 0.01, 0.01]] * 3, "generated_texts": ["a", "b", "c"], "errors": ["", "", ""],
}


def _file(tmp_path, **changes) -> str:
    f = tmp_path / "sglang_2026-03-01_3_64_4.jsonl"
    f.write_text(json.dumps({**SGLANG, **changes}) + "\n")
    return str(f)


def test_sends_are_drawn_at_the_files_rate_not_all_at_t0(tmp_path):
    run = load_measured(_file(tmp_path))
    # gaps ~ gamma(shape 1, scale 1/8) from numpy.random.default_rng(0): 0.08499149, 0.12744964 → sends 0, 0.085, 0.212
    # (before: 0, 0, 0 — a burst of the whole run that made validate report +440 % TTFT and a false knee)
    assert [r.arrival_s for r in run.requests] == pytest.approx([0.0, 0.08499149, 0.21244113])
    assert run.concurrency is None and not run.paced
    # the measured requests move with their sends: TTFT 0.05 s and E2E 0.05 + 3 × 0.01 = 0.08 s each, unchanged
    recs = run.measured.records
    assert [r.first_token_s - r.arrival_s for r in recs] == pytest.approx([0.05] * 3)
    assert [r.finish_s - r.arrival_s for r in recs] == pytest.approx([0.08] * 3)
    assert run.measured.metadata.extra["client_loop"] == (
        "send times: the file keeps none (no start_times), so the replay sends its requests in file order at the "
        "file's request_rate 8 req/s, gaps drawn as the client drew them (Poisson, seed 0)")


def test_a_capped_client_is_a_paced_closed_loop_and_inf_stays_a_burst(tmp_path):
    run = load_measured(_file(tmp_path, max_concurrency=2))
    assert run.concurrency == 2 and run.paced  # the semaphore of 2 over sends at 8 req/s
    assert run.measured.metadata.extra["client_loop"].endswith(
        "; under the file's max_concurrency 2: at most 2 in flight, the next sent when one finishes")
    run = load_measured(_file(tmp_path, request_rate="inf"))
    assert [r.arrival_s for r in run.requests] == [0.0, 0.0, 0.0] and run.concurrency is None
    assert "every request at t = 0, as request_rate inf without a cap did" in run.measured.metadata.extra["client_loop"]


def test_validate_says_how_it_sent_them(tmp_path):
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", tp=None, max_model_len=2048)
    out = validate_file(_file(tmp_path), args)
    assert any(n.startswith("send times: the file keeps none (no start_times)") for n in out.notes)
    assert out.num_requests == 3


def test_a_ramped_vllm_file_without_send_times_is_sent_along_its_ramp_not_as_a_burst(tmp_path):
    # vllm bench serve --ramp-up-strategy linear 1 → 20 req/s, per-request arrays but no start_times: the reader keeps
    # no fixed rate (request_rate "inf" is --request-rate's unused default). vLLM's _get_current_request_rate gives
    # request i the rate 1 + 19·i/(n − 1): the gaps after requests 0 and 1 at 1 and 10.5 req/s. default_rng(0)'s
    # standard gamma draws 0.67993190, 1.01959712 (the 8 req/s test's gaps × 8) → gaps 0.67993190 and 0.09710449
    # (before: every request at t = 0, said as "the file states no request_rate")
    obj = {"date": "20260816-160853", "endpoint_type": "vllm", "backend": "vllm", "model_id": "facebook/opt-13b",
           "num_prompts": 3, "request_rate": "inf", "burstiness": 1.0, "max_concurrency": None, "duration": 1.5,
           "completed": 3, "failed": 0, "total_input_tokens": 192, "total_output_tokens": 12,
           "request_throughput": 2.0, "output_throughput": 8.0, "mean_ttft_ms": 50.0, "median_ttft_ms": 50.0,
           "p99_ttft_ms": 50.0, "mean_tpot_ms": 10.0, "median_tpot_ms": 10.0, "p99_tpot_ms": 10.0,
           "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 20,
           **{k: SGLANG[k] for k in ("input_lens", "output_lens", "ttfts", "itls", "generated_texts", "errors")}}
    f = tmp_path / "vllm-ramp-up-linear-1qps-20qps.json"
    f.write_text(json.dumps(obj))
    run = load_measured(str(f))
    assert [r.arrival_s for r in run.requests] == pytest.approx([0.0, 0.67993190, 0.77703639])
    assert run.measured.metadata.extra["client_loop"] == (
        "send times: the file keeps none (no start_times), so the replay sends its requests in file order at the "
        "file's linear ramp from 1 to 20 req/s (--ramp-up-strategy), gaps drawn as the client drew them (Poisson, "
        "seed 0)")


def test_the_burst_notes_read_as_sentences(tmp_path):
    # request_rate inf under a cap: a semaphore, not "without a cap"; no rate at all: no dangling "so and"
    capped = load_measured(_file(tmp_path, request_rate="inf", max_concurrency=2)).measured.metadata.extra
    assert capped["client_loop"] == (
        "send times: the file keeps none (no start_times), so the replay sends every request at t = 0, as "
        "request_rate inf did; under the file's max_concurrency 2: at most 2 in flight, the next sent when one "
        "finishes")
    bare = load_measured(_file(tmp_path, request_rate=None)).measured.metadata.extra
    assert bare["client_loop"] == (
        "send times: the file keeps none (no start_times), so with no request_rate stated, the replay sends every "
        "request at t = 0, a burst the run may not have been")
