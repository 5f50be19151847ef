"""What a fresh-user trial fed the readers that cannot be true: per-request latencies in ms where vLLM writes seconds,
a hand-edited duration shorter than the requests' own timeline, counts that contradict the arrays, aggregates in
seconds under *_ms keys (a TPOT below the weight-read floor); and a byte-order mark, a cut-off JSON, an empty {}."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.evidence.read import read_run
from kvledger.records import WARNING_PREFIX


def bench(**over) -> dict:
    """A ``vllm bench serve --save-detailed`` result: 3 requests sent at 0, 1, 2 s, TTFT 0.1/0.2/0.3 s, 5 output tokens
    4 × 0.25 s apart (E2E = TTFT + 1.0 s: 1.1, 1.2, 1.3 s), so the last finishes at 2 + 1.3 = 3.3 s; duration 3.5 s."""
    ttfts = [0.1, 0.2, 0.3]
    doc = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 3, "request_rate": 1.0,
           "duration": 3.5, "completed": 3, "failed": 0, "request_throughput": 3 / 3.5,
           "input_lens": [10] * 3, "output_lens": [5] * 3,
           "ttfts": ttfts, "itls": [[0.25] * 4] * 3, "latencies": [t + 1.0 for t in ttfts],
           "start_times": [0.0, 1.0, 2.0], "errors": [""] * 3, "generated_texts": ["x"] * 3}
    return doc | over


def write(tmp_path: Path, doc: dict, name: str = "run.json", bom: bool = False) -> Path:
    p = tmp_path / name
    p.write_text(("\ufeff" if bom else "") + json.dumps(doc), encoding="utf-8")
    return p


def warnings(run) -> list[str]:
    return [d for d in run.metadata.definitions if d.startswith(WARNING_PREFIX)]


def test_latencies_in_ms_are_refused_naming_the_key_and_both_figures(format_refusal):
    doc = bench(ttfts=[100.0, 200.0, 300.0], latencies=[1100.0, 1200.0, 1300.0], itls=[[250.0] * 4] * 3)
    # the longest TTFT, request 2's 300 s, against the 3.5 s run (limit 3.5 × 1.05 + 0.05 = 3.725 s)
    msg = format_refusal(read_run, json.dumps(doc))
    assert "ttfts" in msg and "request 2's TTFT is 300.000 s" in msg and "'duration': 3.500 s" in msg
    assert "milliseconds" in msg and "0.300 s" in msg


def test_a_duration_shorter_than_the_timeline_is_replaced_by_it_and_said(tmp_path):
    run = read_run(write(tmp_path, bench(duration=1.5)))
    # the starts span 2 s (> 1.5 × 1.05 + 0.05 = 1.625 s: the duration is wrong, not the latencies); the timeline is
    # first start 0 to last finish 2 + 1.3 = 3.3 s
    assert run.metadata.duration_s == pytest.approx(3.3)
    (w,) = warnings(run)
    assert "'duration' 1.500 s" in w and "3.300 s" in w and "the starts alone span 2.000 s" in w


def test_a_stated_duration_covering_the_timeline_is_kept_without_a_word(tmp_path):
    run = read_run(write(tmp_path, bench()))
    assert run.metadata.duration_s == 3.5 and not warnings(run)


def test_counts_that_contradict_the_arrays_are_warned(tmp_path):
    run = read_run(write(tmp_path, bench(completed=2, failed=1)))
    (w,) = warnings(run)
    assert "completed: 2, failed: 1" in w and "3 requests, 0 with an error entry, so 3 completed and 0 failed" in w
    assert sum(r.ok for r in run.records) == 3  # the arrays are used


def aggregate(**over) -> dict:
    return {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "gpu": "H100", "num_prompts": 300,
            "duration": 65.9, "completed": 300, "failed": 0, "request_throughput": 4.55,
            "mean_ttft_ms": 7.1, "mean_tpot_ms": 0.0325,
            "median_tpot_ms": 0.0334, "p99_tpot_ms": 0.0373} | over


def test_a_tpot_below_the_weight_read_floor_is_warned_with_its_terms(tmp_path):
    run = read_run(write(tmp_path, aggregate(tensor_parallel_size="1")))
    (w,) = warnings(run)
    # Llama-3.1-8B's 16.06 GB of bf16 weights read at the H100's 3.35 TB/s: 16.06e9 / 3.35e12 = 4.79 ms a step
    assert "mean TPOT (mean_tpot_ms) is 32.5 µs" in w and "4.79 ms" in w and "16.06 GB" in w
    assert "the run's tensor_parallel_size" in w


def test_the_floor_without_a_stated_tp_is_taken_at_eight_gpus(tmp_path):
    run = read_run(write(tmp_path, aggregate()))
    (w,) = warnings(run)
    # 16.06 GB / 8 = 2.01 GB a GPU, read in 0.599 ms
    assert "2.01 GB of weights per GPU (8 GPUs)" in w and "599" in w


def test_a_tpot_above_the_floor_passes(tmp_path):
    run = read_run(write(tmp_path, aggregate(mean_tpot_ms=32.5, median_tpot_ms=33.4, p99_tpot_ms=37.3)))
    assert not warnings(run)


def test_an_aggregate_latency_longer_than_the_run_is_refused(format_refusal):
    msg = format_refusal(read_run, json.dumps(aggregate(mean_ttft_ms=7097.0, p99_ttft_ms=197_552.5)))
    assert "TTFT summary reaches 197.553 s" in msg and "65.900 s" in msg


def test_a_byte_order_mark_is_read_past(tmp_path):
    run = read_run(write(tmp_path, bench(), bom=True))
    assert len(run.records) == 3


def test_a_cut_off_json_says_so_with_its_position(format_refusal):
    msg = format_refusal(read_run, json.dumps(bench())[:100], "cut.json")
    assert "looks cut off" in msg and "ends at character 100 before its JSON closes" in msg


def test_an_empty_object_is_named_as_such(format_refusal):
    msg = format_refusal(read_run, "{}", "e.json")
    assert "empty JSON object ({}): no keys at all" in msg and "Keys seen: ." not in msg


def test_a_trailing_comma_is_named(format_refusal):
    msg = format_refusal(read_run, '{"completed": 3, "duration": 2.0,}', "t.json")
    assert "a trailing comma, which JSON does not allow" in msg
