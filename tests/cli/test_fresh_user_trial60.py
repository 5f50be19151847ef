"""What a performance engineer's trial of goodput and validate on LLMServingSim-derived vLLM files found: runs on two
GPUs ranked in one --target sweep, vLLM's --goodput SLO syntax refused, a run's stated request rate missing from
validate --json, LLMServingSim requests not read by goodput, and impossible files read without a word."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import refused, run_cli

SLO = ["--slo", "ttft=250ms,tpot=50ms"]


def bench(gpu: str, rate: float, ttfts: list[float], **over) -> dict:
    """A ``vllm bench serve --save-detailed`` result: one request every 0.5 s, each 10 prompt and 5 output tokens
    streamed one a chunk 20 ms apart (TPOT 20 ms), E2E = TTFT + 4 × 20 ms; the run's stated duration 2 s."""
    n = len(ttfts)
    return {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "gpu": gpu, "num_prompts": n,
            "request_rate": rate, "duration": 2.0, "completed": n, "failed": 0, "request_throughput": n / 2.0,
            "input_lens": [10] * n, "output_lens": [5] * n, "ttfts": ttfts, "itls": [[0.02] * 4] * n,
            "latencies": [t + 0.08 for t in ttfts], "start_times": [100.0 + 0.5 * i for i in range(n)],
            "errors": [""] * n, "generated_texts": ["x"] * n, **over}


def write(tmp_path: Path, name: str, doc: dict) -> str:
    f = tmp_path / name
    f.write_text(json.dumps(doc))
    return str(f)


def test_a_target_sweep_over_two_gpus_is_refused(tmp_path):
    a = write(tmp_path, "pro6000.json", bench("RTX PRO 6000", 1.0, [0.1, 0.1, 0.1]))
    b = write(tmp_path, "r4090.json", bench("RTX 4090", 2.0, [0.1, 0.3, 0.3]))
    msg = refused("goodput", a, b, *SLO, "--target", "0.9")
    assert "ran on different GPUs" in msg and "NVIDIA GeForce RTX 4090: r4090.json" in msg


def test_vllms_goodput_syntax_is_read_with_a_note(tmp_path):
    a = write(tmp_path, "run.json", bench("H100", 1.0, [0.1, 0.2, 0.3]))
    out = run_cli("goodput", a, "--slo", "ttft:250 tpot:50").output
    # TTFT ≤ 250 ms: 0.1 and 0.2 s meet, 0.3 s misses; TPOT 20 ms meets → 2 of 3
    assert "66.7% of 3 requests" in out and "read as vLLM's --goodput syntax, milliseconds implied" in out


def test_a_hand_shortened_duration_is_replaced_by_the_timeline_in_goodput(tmp_path):
    a = write(tmp_path, "run.json", bench("H100", 1.0, [0.1, 0.2, 0.3], duration=0.5))
    out = run_cli("goodput", a, *SLO, "--json").output
    doc = json.loads(out)
    # first start 100.0 to last finish 101.0 + 0.3 + 0.08 = 101.38 s: 1.38 s; 2 good requests (TTFT ≤ 250 ms)
    run = doc
    assert abs(run["duration_s"] - 1.38) < 1e-9 and run["duration_source"].endswith("(the file's 0.5 s is shorter than "
                                                                                   "them)")
    assert abs(run["goodput_req_per_s"] - 2 / 1.38) < 1e-9
    assert any("'duration' 0.500 s is shorter than its requests' own timeline" in n for n in run["notes"])


def test_latencies_in_ms_end_with_a_clear_error(tmp_path):
    a = write(tmp_path, "ms.json", bench("H100", 1.0, [100.0, 200.0, 300.0], latencies=[180.0, 280.0, 380.0]))
    msg = refused("goodput", a, *SLO)
    assert "request 2's TTFT is 300.000 s, longer than the whole run ('duration': 2.000 s)" in msg


def test_goodput_reads_an_llmservingsim_run(tmp_path):
    rows = [{"request_id": str(i), "input_toks": 10, "output_toks": 5, "queued_ts": 10.0 + i, "first_token_ts":
             10.1 + i + 0.2 * (i == 2), "last_token_ts": 10.2 + i + 0.2 * (i == 2)} for i in range(3)]
    f = tmp_path / "requests.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = run_cli("goodput", str(f), *SLO).output
    # TTFT 0.1, 0.1, 0.3 s: two within 250 ms
    assert "66.7% of 3 requests" in out and "llmservingsim-vllm" in out


def test_a_max_num_seqs_sweep_from_metadata_keys_is_one_deployment_on_that_axis(tmp_path):
    a = write(tmp_path, "s64.json", bench("H100", 1.0, [0.1, 0.1, 0.1], max_num_seqs="64"))
    b = write(tmp_path, "s128.json", bench("H100", 1.0, [0.3, 0.3, 0.3], max_num_seqs="128"))
    out = " ".join(run_cli("goodput", a, b, *SLO, "--target", "0.9", "--axis", "max_num_seqs").output.split())
    # 64: every TTFT 100 ms meets; 128: every TTFT 300 ms misses the 250 ms limit
    assert "SLO boundary on max_num_seqs for attainment ≥ 90%: 64 max_num_seqs" in out
    # on the request-rate axis the two launches are two deployments
    assert "were launched by different records" in refused("goodput", a, b, *SLO, "--target", "0.9")
