"""The wrong numbers issue 22 found, each as the user met it: a share above 100 %, tracebacks on odd files and
names, an impossible request rate accepted, a negative TensorRT-LLM reserve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _cli import invoke, strict_json_lines

from kvledger.errors import FormatError
from kvledger.evidence import read_runs

ROOT = Path(__file__).resolve().parents[2]
ORACLE = ROOT / "benchmarks" / "data" / "oracle_configs"


@pytest.mark.parametrize("model", ["microsoft/Phi-3-mini-4k-instruct", str(ORACLE / "mamba.json")])
def test_token_state_share_is_a_share(model):
    # Phi-3-mini: every layer has a 2,047-token window, so a request's blocks outside it are freed while its computed
    # tokens keep growing (the share read 101.2 %); Mamba keeps one fixed-size state per request (2,537.6 %). What a
    # request holds is all state, so the share is at most 1; for Mamba's fixed state it is exactly 1.
    res = invoke(["simulate", model, "--gpu", "H100", "--num-requests", "60", "--json"])
    assert res.code == 0, res.err
    share = strict_json_lines(res.out)[0]["summary"]["kv_usage"]["token_state_share"]
    assert 0.9 < share <= 1.0
    if "mamba" in model:
        assert share == 1.0


def test_genai_perf_raw_body_that_is_json_but_not_an_object(tmp_path):
    # a response body "data: 5" (JSON, not an OpenAI chunk) ended in AttributeError: 'int' object has no attribute 'get'
    doc = {"experiments": [{"experiment": {"mode": "concurrency", "value": 1},
                            "requests": [{"timestamp": 1_000, "response_timestamps": [2_000, 3_000],
                                          "response_outputs": [{"response": "data: 5"},
                                                               {"response": "data: [1, 2]"}]}]}]}
    f = tmp_path / "profile_export.json"
    f.write_text(json.dumps(doc))
    (run,) = read_runs(f)
    # both bodies carry something: 2 chunks, first at 1 µs after the request (ns timestamps), last at 2 µs
    r = run.records[0]
    assert r.num_output_tokens == 2 and r.first_token_s == pytest.approx(1e-6) and r.finish_s == pytest.approx(2e-6)


@pytest.mark.parametrize("args", [
    ["simulate", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--num-requests", "5", "--step-cost", "x" * 300 + ".json"],
    ["simulate", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--num-requests", "5", "--step-cost", "x" * 300],
    ["fp8-kv", "meta-llama/Llama-3.2-3B", "--gpu", "H100", "--calibration", "x" * 300 + ".csv"],
    ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=1s", "--utilization", "0.5",
     "--step-cost", "x" * 300 + ".json"],
])
def test_over_long_file_names_are_input_errors(args):
    res = invoke(args)  # was: OSError [Errno 36] File name too long, a traceback
    assert res.code == 2 and "not a usable name or path" in res.err


@pytest.mark.parametrize("rate", [-5, 1e12, "nan"])
def test_an_impossible_request_rate_in_a_benchmark_file_is_a_format_error(tmp_path, rate):
    from cases import _VLLM_DETAILED

    f = tmp_path / "bench.json"
    f.write_text(json.dumps({**_VLLM_DETAILED, "request_rate": rate}).replace('"nan"', "NaN"))
    with pytest.raises(FormatError, match="request_rate .* is out of range"):
        read_runs(f)
    f.write_text(json.dumps({**_VLLM_DETAILED, "request_rate": 0}))
    assert read_runs(f)[0].metadata.request_rate is None  # 0: not stated


def test_tensorrt_llm_keeps_no_negative_reserve_when_the_model_does_not_fit():
    # Llama-3.1-70B in bf16 on one L4 (22.5 GiB): 131.4 GiB of weights, nothing free after the dry run. The reserve was
    # (1 − 0.9) × (free after) with "free after" negative: −11 GiB "kept free"
    res = invoke(["plan", "meta-llama/Meta-Llama-3.1-70B", "--gpu", "L4", "--engine", "trtllm", "--json"])
    assert res.code == 3  # does not fit
    m = strict_json_lines(res.out)[0]["memory"]
    reserve = next(d for d in m["deductions"] if d["name"].startswith("reserve"))
    assert reserve["bytes"] == 0 and all(d["bytes"] >= 0 for d in m["deductions"])
