"""Requests a vLLM bench file counts successful but that carry no first-token time: empty ones said apart from
non-streaming ones (a public vLLM 0.5.4 file holds three with output_len 0, ttft 0.0 and error "")."""

from __future__ import annotations

import json

from kvledger.evidence._arrays import no_ttft_notes
from kvledger.evidence.read import read_run


def test_the_notes_tell_empty_requests_from_non_streaming_ones():
    assert no_ttft_notes(0, 0) == []
    assert no_ttft_notes(3, 3) == ["3 request(s) the file counts as successful produced no output token (output_len "
                                   "0, ttft 0): completed, but with no first token they are never good under a TTFT "
                                   "SLO"]
    assert no_ttft_notes(5, 3)[1].startswith("2 successful requests have ttft 0 with output (non-streaming)")


def test_a_bench_file_with_empty_successful_requests(tmp_path):
    # four requests: two streamed (ttft 50 ms, two gaps of 10 ms), one empty (output 0, ttft 0, error ""), one
    # non-streaming (output 8, ttft 0, no gaps)
    obj = {"date": "x", "backend": "vllm", "model_id": "m", "tokenizer_id": "m", "num_prompts": 4,
           "request_rate": "inf", "completed": 4, "duration": 1.0, "total_input_tokens": 40,
           "total_output_tokens": 14, "request_throughput": 4.0, "input_lens": [10, 10, 10, 10],
           "output_lens": [3, 3, 0, 8],
           "ttfts": [0.05, 0.05, 0.0, 0.0], "itls": [[0.01, 0.01], [0.01, 0.01], [], []],
           "generated_texts": ["a", "b", "", "c"], "errors": ["", "", "", ""]}
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(obj), encoding="utf-8")
    run = read_run(path)
    notes = run.metadata.definitions
    assert any(n.startswith("1 request(s) the file counts as successful produced no output token") for n in notes)
    assert any(n.startswith("1 successful requests have ttft 0 with output (non-streaming)") for n in notes)
