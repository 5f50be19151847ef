"""A benchmark file that names its server, neither vLLM nor SGLang, gets one note: the replay uses vLLM's rules and
that server's are not modelled (calibration/served_by.py)."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.served_by import other_server_note
from kvledger.calibration.validate import validate_file
from kvledger.evidence import read_runs

BENCH = Path(__file__).resolve().parents[1] / "data" / "public-bench"

def _named(notes):
    return [n for n in notes if n.startswith("the file names ")]


def test_tgi_named_by_the_vllm_bench_backend_is_said(tmp_path):
    # InferenceX's vllm bench serve result (backend "openai": a protocol, no server named) as published, and the same
    # file with backend "tgi", vLLM's client for Text Generation Inference (benchmarks/backend_request_func.py)
    real = BENCH / "inferencex_vllm_bench_gptoss120b_hfcache_conc4.json"
    d = json.loads(real.read_text())
    assert d["backend"] == "openai"
    args = SimRequestArgs(model="openai/gpt-oss-120b", gpu="B200", tp=None)
    assert _named(validate_file(str(real), args).notes) == []
    tgi = tmp_path / "tgi.json"
    tgi.write_text(json.dumps({**d, "backend": "tgi"}))
    assert _named(validate_file(str(tgi), args).notes) == [
        "the file names TGI (Text Generation Inference) as its server (backend \"tgi\"): the replay uses vLLM's "
        "scheduler and memory rules, and TGI (Text Generation Inference)'s are not modelled, so the errors include "
        "the difference between the two servers"]


def test_the_llmperf_tgi_sample_names_no_server():
    # philschmid/llmperf-bench ran TGI 2.0.1, but says so only in its folder name and README: llmperf's results hold
    # the model id ("meta-llama/Meta-Llama-3-8B-Instruct") and no --llm-api, so nothing in the file names the server
    real = BENCH / "llmperf_bench_llama3_8b_tgi_results.json"
    assert "tgi" not in real.read_text().lower()
    runs = read_runs(str(real))
    assert len(runs) == 8  # concurrency 1 … 128
    assert all(other_server_note(r.metadata.extra, "vLLM") is None for r in runs)


def test_servers_protocols_and_the_modelled_engines():
    assert other_server_note({"service_kind": "triton"}, "vLLM").startswith(
        "the file names Triton Inference Server as its server (service_kind \"triton\")")
    assert "SGLang's scheduler" in other_server_note({"backend": "lmdeploy"}, "SGLang")
    for extra in ({"backend": "vllm"}, {"backend": "sglang"}, {"backend": "openai-chat"}, {"service_kind": "openai"},
                  {}):
        assert other_server_note(extra, "vLLM") is None
