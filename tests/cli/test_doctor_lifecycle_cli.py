"""``kvledger doctor`` on how a server's runs end (a fresh SRE's trial): a log holding a restart is read from its last
start-up; a request refused while the server serves on, and a stop the operator asked for, are no failure (exit 0);
a CUDA-graph-capture OOM is named as such; after an OOM no remedy raises --gpu-memory-utilization; an impossible
per-request figure sizes no remedy; a computed figure cites no log line; ANSI colours do not reach the text.

Logs: tests/fixtures/vllm_logs/constructed_v1_*.log and constructed_v0.5.4_oom_while_serving.log (README there,
"Constructed logs"); the line numbers below are `grep -n` on them.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"


def _doctor_json(name: str, *args: str) -> tuple[int, dict]:
    res = run_cli("doctor", str(LOGS / name), "--json", *args)
    return res.exit_code, json.loads(res.output)


def _text(name: str, *args: str) -> tuple[int, str]:
    res = run_cli("doctor", str(LOGS / name), *args)
    return res.exit_code, " ".join(res.output.split())


def test_a_failed_restart_after_a_healthy_run_is_judged_on_the_restart():
    # banners at lines 1 and 12; the first run serves from line 11 (uvicorn's ready line); the restart fails: its
    # ValueError (max_model_len 131072 needs 16.00 GiB of KV cache) is line 28
    code, d = _doctor_json("constructed_v1_restart_then_failed.log")
    assert code == 1 and d["failed"] is True and d["not_started"] is True
    names = [f["name"] for f in d["findings"]]
    assert "crashed_while_serving" not in names
    fail = d["findings"][names.index("startup_failure")]
    assert fail["verdict"] == "max_model_len_too_large" and "line 28" in fail["message"]
    assert [(s["first_line"], s["last_line"]) for s in d["startups"]] == [(1, 11), (12, 32)]  # 32 lines in all
    assert [s["outcome"] for s in d["startups"]] == ["served", "verdict"]
    assert d["startups"][0]["says"].startswith("served from line 11; no crash or shutdown line")
    assert d["log"]["version_source"] == "printed (line 12)"  # the restart's own banner
    _, out = _text("constructed_v1_restart_then_failed.log")
    assert ("2 start-ups in this log; the verdict and the start-up comparison are the last one's (from line 12); "
            "earlier: #1 (lines 1–11) served from line 11") in out


def test_a_crash_then_a_healthy_restart_is_healthy_and_says_what_became_of_the_first_run():
    # the first run crashes (torch.OutOfMemoryError at line 48, EngineDeadError at 50); the restart (banner line 54)
    # serves from line 65 with two metrics lines (66, 67) and a 200 (68)
    code, d = _doctor_json("constructed_v1_crash_then_restart.log")
    assert code == 0 and d["failed"] is False and d["unfinished"] is False
    assert "crashed_while_serving" not in [f["name"] for f in d["findings"]]
    assert d["log"]["metrics_lines"] == 2  # the restart's own, not the first run's 30
    assert d["startups"][0]["outcome"] == "crashed"
    assert d["startups"][0]["says"].startswith("served from line 11, then crashed at line 48 "
                                               "(torch.OutOfMemoryError: CUDA out of memory.")
    kv = next(r for r in d["startup"]["rows"] if r["term"] == "available KV memory")
    assert kv["log_line"] == 60  # the restart's "Available KV cache memory: 58.11 GiB", not the first run's (line 7)


def test_a_request_refused_while_the_server_serves_on_is_a_request_error_not_a_crash():
    # line 14: the request's traceback; line 17: ValueError "maximum context length is 8192"; line 18: 400; then a
    # metrics line (19) and a 200 (20): the server served on
    code, d = _doctor_json("constructed_v1_client_errors.log")
    assert code == 0 and d["failed"] is False
    names = [f["name"] for f in d["findings"]]
    assert "crashed_while_serving" not in names
    req = d["findings"][names.index("request_errors")]
    assert req["message"].startswith("1 request(s) failed while the server kept serving (first at line 14: "
                                     "ValueError: This model's maximum context length is 8192 tokens.")
    assert "(line 17)" in req["message"] and "not a crash" in req["message"]


def test_an_operators_stop_is_stopped_not_a_crash():
    # line 15: "Shutting down FastAPI HTTP server."; line 19: the asyncio runner's traceback, line 22 CancelledError
    code, d = _doctor_json("constructed_v1_sigterm.log")
    assert code == 0 and d["failed"] is False and d["stopped"] == 15
    assert "crashed_while_serving" not in [f["name"] for f in d["findings"]]
    _, out = _text("constructed_v1_sigterm.log")
    assert "stopped (shutdown at line 15): the server served from line 11" in out
    assert "the traceback after it (line 19) belongs to the shutdown, not a crash" in out


def test_an_oom_while_capturing_cuda_graphs_names_the_phase_and_its_fixes():
    # line 6: "Estimated CUDA graph memory: 0.84 GiB total"; line 7: 58.11 GiB available; line 15: the capture_model
    # frame; line 17: torch.OutOfMemoryError
    code, out = _text("constructed_v1_graph_oom.log")
    assert code == 1
    assert ("a CUDA allocation failed while capturing CUDA graphs (line 15: capture_model), after the KV cache was "
            "sized (58.11 GiB available, line 7)") in out
    assert "the log estimated the graphs at 0.84 GiB, line 6" in out
    assert "loading or profiling the model" not in out
    for fix in ("lower --gpu-memory-utilization", "--max-cudagraph-capture-size", "--enforce-eager"):
        assert fix in out


def test_after_an_oom_no_remedy_raises_gpu_memory_utilization_and_computed_figures_cite_no_line():
    # vLLM 0.5.4: "# GPU blocks: 27784" (line 7), OOM at line 29 (the only line printing the device total, 79.19 GiB)
    code, d = _doctor_json("constructed_v0.5.4_oom_while_serving.log", "--gpu", "H100")
    assert code == 1
    names = [f["name"] for f in d["findings"]]
    crash = d["findings"][names.index("crashed_while_serving")]
    assert "lower --gpu-memory-utilization" in crash["message"]
    cap = d["findings"][names.index("capacity")]
    assert not any(o["action"].startswith("--gpu-memory-utilization") for o in cap["options"])
    req = next(r for r in d["startup"]["rows"] if r["term"].startswith("requested"))
    assert req["log_line"] is None and "computed from its device total (line 29)" in req["explanation"]
    _, out = _text("constructed_v0.5.4_oom_while_serving.log", "--gpu", "H100")
    assert "the log prints its block count (27,784, line 7)" in out and "prints no block count" not in out
    assert "log 71.27 GiB (computed from the log, not printed)" in out and "71.27 GiB (line 29)" not in out


def test_an_impossible_per_request_figure_is_flagged_and_sizes_no_remedy():
    # 99.5% of 476,000 slots over 50 running requests (lines 12–21) = 9,472 tokens a request > max_model_len 8,192
    code, d = _doctor_json("constructed_v1_impossible_usage.log")
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert "The log's figures are inconsistent: they give each running request ≈9,472 tokens" in cap["message"]
    assert all(o["requests_of_observed_size"] is None for o in cap["options"])
    assert not any(o["action"].startswith("--max-num-seqs") for o in cap["options"])


def test_ansi_colours_are_stripped_and_counts_have_separators(tmp_path):
    text = (LOGS / "constructed_v1_sigterm.log").read_text(encoding="utf-8")
    colored = text.replace(" INFO ", " \x1b[32mINFO\x1b[0m ")
    p = tmp_path / "ansi.log"
    p.write_text(colored, encoding="utf-8")
    res = run_cli("doctor", str(p))
    assert res.exit_code == 0 and "\x1b" not in res.output and "[0m" not in res.output
    assert "stopped (shutdown at line 15)" in " ".join(res.output.split())
    many = tmp_path / "many.log"  # 1,200 metrics lines after the start-up
    metric = next(x for x in text.split("\n") if "Avg prompt throughput" in x)
    many.write_text("\n".join(text.split("\n")[:13] + [metric] * 1200) + "\n", encoding="utf-8")
    assert "1,200 metrics lines" in run_cli("doctor", str(many)).output


def test_an_engine_oom_then_another_processs_200_is_a_crash_not_a_request_error():
    # the EngineCore's traceback at line 12 ends in torch.OutOfMemoryError (line 15); the API server's 200 (line 16)
    # and uvicorn's "Shutting down" (17) follow: the engine is dead, the 200 shows nothing
    code, d = _doctor_json("constructed_v1_oom_then_200.log")
    assert code == 1 and d["failed"] is True and d["stopped"] is None
    names = [f["name"] for f in d["findings"]]
    assert "request_errors" not in names
    crash = d["findings"][names.index("crashed_while_serving")]
    assert crash["verdict"] == "cuda_oom" and "(line 15)" in crash["message"]
    _, out = _text("constructed_v1_oom_then_200.log")
    assert "no failure before it" not in out and "stopped (shutdown" not in out


def test_an_engine_traceback_without_the_fatal_error_line_is_a_crash():
    # EngineCore_DP0-style tag "(EngineCore pid=242)": traceback line 12, "ValueError: something broke in the engine"
    # line 15, then a 200 (16) and the shutdown (17)
    code, d = _doctor_json("constructed_v1_engine_traceback_then_shutdown.log")
    assert code == 1 and d["failed"] is True and d["stopped"] is None
    names = [f["name"] for f in d["findings"]]
    assert "request_errors" not in names
    crash = d["findings"][names.index("crashed_while_serving")]
    assert "ValueError: something broke in the engine (line 15)" in crash["message"]


def test_a_start_up_warnings_traceback_keeps_one_start_up_and_the_stop_says_so():
    # banner line 1, non-default args line 2, the plugin's traceback lines 4–6 (ModuleNotFoundError), the engine line
    # 7; serving from line 15; a request's traceback at 18 (400 at 22); shutdown at 25 (26 lines)
    code, d = _doctor_json("constructed_v1_startup_warning_traceback.log")
    assert code == 0 and d["failed"] is False and d["stopped"] == 25
    assert d["startups"] == [{"first_line": 1, "last_line": 26, "outcome": "verdict", "says": "the verdict below",
                              "preemptions": {"count": 0, "report_lines": 0, "first_line": None, "last_line": None,
                                              "peak_gpu_kv_usage_pct": None, "peak_line": None,
                                              "metrics_lines": 2},
                              "changed_settings": []}]
    assert d["log"]["version_source"] == "printed (line 1)"  # the banner stays in the verdict's start-up
    _, out = _text("constructed_v1_startup_warning_traceback.log")
    assert "start-ups in this log" not in out
    assert ("stopped (shutdown at line 25): the server served from line 15 and was shut down as asked (SIGTERM or "
            "Ctrl-C), no failure while it served (the failure at line 4 came during start-up, which went on to serve)"
            ) in out
    assert "prefix caching is off (log line 2)" in out


def test_a_graph_capture_oom_a_crash_and_a_healthy_restart_read_as_three_start_ups():
    # banners at lines 1, 19 and 45: #1 "EngineCore failed to start" (13), OutOfMemoryError line 17; #2 serves from
    # line 29 and crashes (OutOfMemoryError line 39, EngineDeadError 41); #3 serves from line 56, 200 at line 59
    code, d = _doctor_json("constructed_v1_three_startups.log")
    assert code == 0 and d["failed"] is False
    assert [(s["first_line"], s["last_line"], s["outcome"]) for s in d["startups"]] == [
        (1, 18, "failed_to_start"), (19, 44, "crashed"), (45, 59, "verdict")]
    assert d["startups"][0]["says"].startswith("did not start: failed at line 17 (torch.OutOfMemoryError")
    assert d["startups"][1]["says"].startswith("served from line 29, then crashed at line 39 (torch.OutOfMemoryError")
