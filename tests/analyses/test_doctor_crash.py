"""``kvledger doctor`` on a server that started, served and then died: a ``crashed_while_serving`` finding (not a
start-up failure), the start-up still compared with the ledger, the traffic findings still read, exit status 1.

The log: tests/fixtures/vllm_logs/constructed_v1_oom_while_serving.log (README there): the real start-up of
Llama-3.1-8B-Instruct on an H100 (51.38 GiB available, 420,896 tokens, 26.31x at 16,000), one metrics line (line 9),
then the engine's CUDA OOM (line 14) and the API server's EngineDeadError (line 19).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.analyses.doctor.diagnose import diagnose
from kvledger.cli.main import app
from kvledger.evidence.vllm_log import parse_vllm_log

LOGS = Path(__file__).parents[2] / "tests" / "fixtures" / "vllm_logs"
CRASH = LOGS / "constructed_v1_oom_while_serving.log"
runner = CliRunner()


def test_the_serving_line_is_the_first_metrics_line_and_the_cause_follows_it():
    log = parse_vllm_log(CRASH.read_text())
    assert log.serving_line == 9  # `grep -n "Avg prompt throughput"`: the first metrics line
    assert log.failure_cause is not None and log.failure_cause[0] == 14  # first exception after line 11's traceback
    assert log.failure_cause[1].startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB")


def test_a_crash_while_serving_is_its_own_finding_and_not_a_startup_failure():
    res = runner.invoke(app, ["doctor", str(CRASH), "--json"])
    assert res.exit_code == 1  # a crashed server is never healthy
    d = json.loads(res.output)
    names = [f["name"] for f in d["findings"]]
    assert "startup_failure" not in names and d["failed"] is True and d["not_started"] is False
    crash = d["findings"][names.index("crashed_while_serving")]
    assert crash["verdict"] == "cuda_oom"
    assert "51.38 GiB available, line 6" in crash["message"] and "serving from line 9" in crash["message"]
    assert "torch.OutOfMemoryError" in crash["message"] and "EngineDeadError (line 19)" in crash["message"]
    # the start-up was compared: 51.38 GiB / (2 × 8 KV heads × 128 × 32 layers × 2 B × 16 tokens = 2 MiB per block)
    # = 26,306 blocks → 420,896 tokens, as the log prints (line 7)
    assert d["startup"]["consistent"] is True
    cap = d["findings"][names.index("capacity")]
    assert cap["verdict"] == "kv_not_binding"  # read from the one metrics line (38.2% KV, nobody waiting)


def test_human_output_diagnoses_the_traffic_findings_after_a_crash():
    res = runner.invoke(app, ["doctor", str(CRASH)])
    out = " ".join(res.output.split())
    assert res.exit_code == 1
    assert "FOUND crashed_while_serving (cuda_oom): the server crashed while serving" in out
    assert "did not start" not in out and "ok capacity (kv_not_binding)" in out


def test_failure_lines_before_serving_do_not_make_a_startup_failure():
    # a start-up traceback the server survived (it went on to serve): no finding claims it did not start
    text = ("INFO 11-04 14:58:40 [gpu_worker.py:298] Available KV cache memory: 51.38 GiB\n"
            "Traceback (most recent call last):\nValueError: a warning path\n"
            "INFO:     Application startup complete.\n")
    log = parse_vllm_log(text)
    assert log.serving_line == 4 and [f.kind for f in log.failures] == ["traceback"]
    assert diagnose(log).failed is False


def test_a_log_cut_at_the_engines_traceback_says_it_was_cut_not_to_look_above(tmp_path):
    # the same log cut after line 11, the first line of the traceback vLLM prints after "EngineCore encountered a fatal
    # error" (line 10; v1/engine/core.py logs it with logger.exception): the cause would follow line 10, not precede it
    cut = tmp_path / "cut.log"
    cut.write_text("".join(CRASH.read_text().splitlines(keepends=True)[:11]))
    res = runner.invoke(app, ["doctor", str(cut), "--json"])
    assert res.exit_code == 1
    crash = next(f for f in json.loads(res.output)["findings"] if f["name"] == "crashed_while_serving")
    assert crash["verdict"] == "engine_dead"
    assert ("Fix: the error that killed the engine is not in this log: vLLM prints its traceback right after "
            "'EngineCore encountered a fatal error' (line 10), but no exception line follows in the 11 lines here, so "
            "the log was cut there: read the rest (the whole file, or `kubectl logs --previous` for a restarted "
            "pod).") in crash["message"]
    assert "printed before this line" not in crash["message"]
