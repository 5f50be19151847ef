"""``kvledger doctor`` on the parts of real logs users paste: V0's once-per-50 preemption warning, the tail of a crash
without its start-up, and a metrics line cut short at the end of the file.

Logs (tests/fixtures/vllm_logs/README.md gives each source):
- v0.5_swap_preemption_cumulative_tqdm.log: vllm-project/vllm#5578 — a SWAP warning saying
  total_num_cumulative_preemption=151 (line 2) between two V0 metrics lines glued behind progress bars;
- v1_engine_dead_tail.log: gpustack/gpustack#2965 — the API server's EngineDeadError (line 2), then traceback frames;
- v1_requests_failed_engine_dead.log: vllm-project/vllm#20056 — four "Request … failed (engine dead)." lines;
- v1_metrics_mtp_kv_near_full_queue.log: vllm-project/vllm#43295 — five V1 metrics lines (cut here in the test).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.analyses.doctor.diagnose import diagnose
from kvledger.cli.main import app
from kvledger.evidence.vllm_log import parse_vllm_log

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
runner = CliRunner()


def _doctor(path: Path) -> tuple[int, dict]:
    res = runner.invoke(app, ["doctor", str(path), "--json"])
    return res.exit_code, json.loads(res.output)


def test_v0_preemptions_are_counted_from_the_cumulative_total_not_the_warning_lines():
    # vLLM V0's scheduler warns only when num_cumulative_preemption % 50 == 0 and prints the running total + 1, so
    # the one warning of #5578 (line 2: "total_num_cumulative_preemption=151") stands for 151 preemptions, not 1
    code, d = _doctor(LOGS / "v0.5_swap_preemption_cumulative_tqdm.log")
    assert code == 0 and d["log"]["preemption_lines"] == 1 and d["log"]["metrics_lines"] == 2
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert cap["verdict"] == "capacity_bound_preemptions"
    assert cap["message"].startswith("151 preemption(s) (total_num_cumulative_preemption=151, line 2) with the KV "
                                     "cache full (usage up to ≈99.2%")  # line 1's KV usage, the sample before it
    assert any("one preemption warning per 50 preemptions" in n and "line 2" in n for n in cap["notes"])


def test_v0_warning_lines_without_a_larger_total_count_one_each():
    # v0.5_recompute_preemption.log (vllm#6102): its one warning says total_num_cumulative_preemption=1
    f = diagnose(parse_vllm_log((LOGS / "v0.5_recompute_preemption.log").read_text())).finding("capacity")
    assert f.message.startswith("1 preemption(s) with the KV cache full")


def test_an_engine_dead_tail_without_its_startup_is_a_crash_not_a_failed_startup():
    # before: KeyError 'engine_dead' (a traceback); the start-up-failure finding has no words for a dead engine.
    # EngineDeadError is raised only by an engine that had started, so the log begins after the start-up.
    code, d = _doctor(LOGS / "v1_engine_dead_tail.log")
    assert code == 1 and d["failed"] is True and d["not_started"] is False
    names = [f["name"] for f in d["findings"]]
    assert "startup_failure" not in names
    crash = d["findings"][names.index("crashed_while_serving")]
    assert crash["verdict"] == "engine_dead"
    assert "serving before the log begins" in crash["message"]
    assert "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue" in crash["message"]
    assert "(line 2)" in crash["message"] and "the error that killed the engine is not in this log" in crash["message"]


def test_requests_failed_engine_dead_lines_are_read_as_a_dead_engine():
    # before: exit 2, "no vLLM log lines" — async_llm.py's "Request R failed (engine dead)." is vLLM's own line
    code, d = _doctor(LOGS / "v1_requests_failed_engine_dead.log")
    assert code == 1 and d["log"]["vllm_lines"] == 4
    crash = next(f for f in d["findings"] if f["name"] == "crashed_while_serving")
    assert crash["verdict"] == "engine_dead" and len(crash["evidence"]) == 4
    assert "Request cmpl-37213c833eb74bb5a944eb261b4b60aa-0 failed (engine dead). (line 1)" in crash["message"]


def test_a_metrics_line_cut_short_is_not_read_as_zero_waiting(tmp_path):
    # the last line of #43295's excerpt prints "Running: 20 reqs, Waiting: 23 reqs, GPU KV cache usage: 98.4%"; cut
    # after "Waiting: 23 r" it was read as 0 waiting and no KV usage (the ITL evidence said "0 waiting")
    text = (LOGS / "v1_metrics_mtp_kv_near_full_queue.log").read_text()
    cut = text[:text.rindex("Waiting: 23 r") + len("Waiting: 23 r")]
    (tmp_path / "cut.log").write_text(cut)
    log = parse_vllm_log(cut)
    assert [s.line_no for s in log.stats] == [1, 2, 3, 4] and log.cut_metrics == (5,)
    code, d = _doctor(tmp_path / "cut.log")
    assert code == 0
    assert any("1 metrics line(s) cut short" in w and "(line 5)" in w for w in d["warnings"])
    values = [e["value"] for f in d["findings"] for e in f["evidence"]]
    assert not any("0 waiting" in v for v in values)
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert "usage up to 95.9%" in cap["message"] and "up to 43 waiting" in cap["message"]  # lines 1 and 4
