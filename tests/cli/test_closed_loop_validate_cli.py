"""`kvledger validate` on an aggregate run sent at request_rate inf: refused with what to pass when no client cap is
known, replayed as a closed loop of the --client-concurrency clients when one is given (SGLang bench_serving JSONL,
its `Infinity` rate as SGLang writes it)."""

from __future__ import annotations

import json

from cli_run import MODEL, refused, run_cli

#: SGLang bench_serving at --request-rate inf, no max_concurrency stated: 20 requests of 512 in / 64 out in 2 s
LINE = ('{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, "max_concurrency": null, '
        '"completed": 20, "duration": 2.0, "total_input_tokens": 10240, "total_output_tokens": 1280, '
        '"request_throughput": 10.0, "output_throughput": 640.0, "random_input_len": 512, "random_output_len": 64, '
        '"random_range_ratio": 1.0, "mean_ttft_ms": 40.0, "median_ttft_ms": 38.0, "p99_ttft_ms": 80.0, '
        '"mean_tpot_ms": 8.0, "median_tpot_ms": 8.0, "p99_tpot_ms": 12.0, "mean_e2e_latency_ms": 544.0, '
        '"median_e2e_latency_ms": 540.0, "p99_e2e_latency_ms": 800.0}\n')


def test_no_cap_is_refused_with_the_flag_to_pass_and_the_flag_replays_a_closed_loop(tmp_path):
    f = tmp_path / "agg_inf.jsonl"
    f.write_text(LINE)
    args = ("validate", str(f), "--model", MODEL, "--gpu", "H100", "--max-model-len", "2048")
    msg = refused(*args)
    assert msg.startswith(f"{f}: agg_inf @ inf req/s: the run was sent at request_rate inf")
    assert "pass --client-concurrency N" in msg and "N = its 20 requests" in msg
    res = run_cli(*args, "--client-concurrency", "4", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["run"] == "agg_inf @ 4 clients" and out["num_requests"] == 20
    rows = {r["metric"]: r for r in out["comparison"]["rows"]}
    assert rows["throughput"]["measured"] == 10.0 and rows["TTFT mean"]["measured"] == 0.04  # 40 ms as stated
    assert any("replayed as a closed loop of 4 clients" in n and "(--client-concurrency 4)" in n
               for n in out["notes"])
