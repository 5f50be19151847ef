"""`kvledger doctor` on a log without its start-up (rotated, or `kubectl logs --since`): the launch settings the log
does not print are taken from flags, so the pool the options start from is the server's, not vLLM's defaults."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json, refused

FIX = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
FULL = FIX / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# vLLM 0.19.0's metrics line (v1/metrics/loggers.py, LoggingStatLogger.log): Preemptions only where some happened in
# the interval. Running / Waiting / preemptions / KV usage of the last 4 lines: 196/61/12/99.1, 190/88/30/99.8,
# 188/102/41/99.9, then 150/20/-/80.0
_ROWS = [(1200.3, 2100.5, 40, 0, None, 35.2), (9100.0, 3800.0, 196, 61, 12, 99.1), (7000.2, 3500.7, 190, 88, 30, 99.8),
         (6500.0, 3300.0, 188, 102, 41, 99.9), (3000.0, 3000.1, 150, 20, None, 80.0)]


def _metrics_only(tmp_path: Path) -> Path:
    lines = []
    for i, (p, g, r, w, pre, kv) in enumerate(_ROWS):
        lines.append(f"(APIServer pid=1) INFO 04-22 00:{5 + i:02d}:00 [v1/metrics/loggers.py:259] Engine 000: Avg "
                     f"prompt throughput: {p:.1f} tokens/s, Avg generation throughput: {g:.1f} tokens/s, Running: {r} "
                     f"reqs, Waiting: {w} reqs, " + (f"Preemptions: {pre}, " if pre else "")
                     + f"GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%")
    path = tmp_path / "tail.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def _pool(d: dict) -> int:
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert cap["verdict"] == "capacity_bound_preemptions"
    return cap["options"][0]["num_gpu_blocks"]


def test_the_launch_flags_give_the_servers_pool_where_the_log_has_no_start_up(tmp_path):
    log = _metrics_only(tmp_path)
    base = [str(log), "--model", MODEL, "--gpu", "H100", "--engine-version", "0.19.0"]
    # without them vLLM 0.19's default gpu_memory_utilization 0.9: 79.19 GiB × 0.9 = 71.27 GiB − 17.13 GiB of non-KV
    # terms = 54.14 GiB ÷ 2 MiB = 27,721 blocks, 6.8 % under the 29,751 the server had
    assert _pool(cli_json("doctor", *base)) == 27_721
    # with the server's settings: 79.19 GiB × 0.95 = 75.23 GiB − weights 14.99 − activation peak 1.89 − non-torch
    # 0.25 = 58.10 GiB ÷ 2 MiB per 16-token block = 29,748 blocks (`kvledger plan` gives the same); the real start-up
    # of this deployment printed 476,016 tokens = 29,751 blocks (the fixture log, line 54): 3 blocks apart
    d = cli_json("doctor", *base, "--max-model-len", "8192", "--gpu-memory-utilization", "0.95")
    assert _pool(d) == 29_748
    # and the summary names what it planned with, the defaults among them, so none is taken for the server's
    note = next(n for n in d["notes"] if n.startswith("launch settings: "))
    assert ("max_model_len 8,192 [--max-model-len 8192 (the log does not print it)], gpu_memory_utilization 0.95 "
            "[--gpu-memory-utilization 0.95 (the log does not print it)], max_num_seqs 1,024 [vLLM default") in note


def test_a_flag_the_log_contradicts_is_not_used_and_said_so():
    d = cli_json("doctor", str(FULL), "--gpu-memory-utilization", "0.9")
    # the log prints 0.95 (its non-default args echo, line 4): that is what the server ran with
    assert ("--gpu-memory-utilization 0.9 not used: the log prints gpu_memory_utilization 0.95 (log line 4), the "
            "setting the server ran with") in d["notes"]
    # the plan is still the log's own: its 0.95, and the 29,751 blocks its 476,016 printed tokens give
    assert d["startup"]["settings"]["gpu_memory_utilization"] == {"value": 0.95, "source": "log line 4"}
    assert next(r for r in d["startup"]["rows"] if r["term"] == "GPU blocks")["log_value"] == 29_751


def test_a_launch_flag_the_model_cannot_take_is_refused(tmp_path):
    # Llama-3.1-8B's config allows 131,072 tokens; vLLM refuses more at start-up, so no server ran with it (exit 2)
    log = str(_metrics_only(tmp_path))
    msg = refused("doctor", log, "--model", MODEL, "--max-model-len", "999999", "--gpu", "H100")
    assert msg.startswith("--max-model-len 999,999 exceeds the 131,072 tokens")
    assert msg.endswith("(doctor plans with --max-model-len 999999)")
    assert "out of range" in refused("doctor", str(FULL), "--gpu-memory-utilization", "1.5")


def test_a_launch_flag_of_seven_digits_is_named_as_given_not_in_exponent_form(tmp_path):
    # 10M = 10 × 1,048,576 = 10,485,760 tokens (vLLM's M suffix, a power of 1,024); Python's %g would write it
    # 1.04858e+07, which is no --max-model-len a server takes
    msg = refused("doctor", str(_metrics_only(tmp_path)), "--model", MODEL, "--max-model-len", "10M", "--gpu", "H100")
    assert msg.endswith("(doctor plans with --max-model-len 10485760)")
