"""The TP option's "(N as logged)" only where the log states the TP: a metrics-only log (rotated, ``--since``) prints
none, so the 1 it plans with is vLLM's default or the user's flag, and the line says which."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# vLLM 0.19.0's metrics line (v1/metrics/loggers.py, LoggingStatLogger.log: "Engine %03d: " then log_parts joined by
# ", ", "Preemptions: %d" only when > 0); the 3 lines at ≥ 90 % KV hold 196/190/188 running requests
_LINE = ("(APIServer pid=1) INFO 04-22 00:0{i}:00 [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: "
         "9100.0 tokens/s, Avg generation throughput: 3800.0 tokens/s, Running: {r} reqs, Waiting: {w} reqs, "
         "Preemptions: {p}, GPU KV cache usage: {kv}%, Prefix cache hit rate: 0.0%")
_ROWS = [(196, 61, 12, 99.1), (190, 88, 30, 99.8), (188, 102, 41, 99.9)]


def _tp_line(out: str) -> str:
    return next(x for x in out.splitlines() if x.strip().startswith("→ --tensor-parallel-size 2:"))


def test_a_log_without_tp_does_not_say_as_logged(tmp_path):
    log = tmp_path / "tail.log"
    log.write_text("".join(_LINE.format(i=i, r=r, w=w, p=p, kv=kv) + "\n" for i, (r, w, p, kv) in enumerate(_ROWS)))
    base = ["doctor", str(log), "--model", MODEL, "--gpu", "H100", "--engine-version", "0.19.0"]
    line = _tp_line(run_cli(*base).stdout)
    assert "of 2 GPUs (1 assumed: vLLM's default, the log prints no TP)" in line and "as logged" not in line
    line = _tp_line(run_cli(*base, "--tensor-parallel-size", "1").stdout)
    assert "of 2 GPUs (1 as given by --tensor-parallel-size)" in line
    out = run_cli(*base).stdout  # the pool is the ledger's too: its servers are "as modelled"
    assert "more servers instead: 2 servers as modelled on the 2 GPUs of --tensor-parallel-size 2" in out


def test_a_log_that_prints_tp_still_says_as_logged():
    # the constructed 0.11.0 log's engine config line (line 3) prints tensor_parallel_size=1
    out = run_cli("doctor", str(LOGS / "constructed_v1_preemptions_at_full_kv.log"), "--model",
                  "meta-llama/Llama-3.1-8B", "--gpu", "H100").stdout
    assert "58,282 blocks per replica of 2 GPUs (1 as logged)" in _tp_line(out)
    assert "more servers instead: 2 servers as logged on the 2 GPUs" in out
