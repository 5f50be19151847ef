"""Where a vLLM log's start-ups begin (evidence/vllm_log/restarts.py) and how a served run ends (serving_end.py)."""

from __future__ import annotations

from kvledger.evidence.vllm_log import parse_vllm_log, read_vllm_log
from kvledger.evidence.vllm_log.restarts import startup_starts, strip_ansi
from kvledger.evidence.vllm_log.serving_end import crash_failures

BANNER = "(APIServer pid=1) INFO 04-22 00:03:35 [entrypoints/utils.py:299]  ▄▄ ▄█ █  version 0.19.0"
ENGINE = ("(EngineCore_DP{r} pid=24{r}) INFO 04-22 00:03:46 [v1/engine/core.py:105] Initializing a V1 LLM engine "
          "(v0.19.0) with config: model='m'")
READY = "(APIServer pid=1) INFO:     Application startup complete."
METRICS = ("(APIServer pid=1) INFO 04-22 00:05:10 [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: 1.0 "
           "tokens/s, Avg generation throughput: 1.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: "
           "1.0%, Prefix cache hit rate: 0.0%")


def test_data_parallel_engines_of_one_start_up_stay_one_start_up():
    lines = [BANNER, ENGINE.format(r=0), ENGINE.format(r=1), READY, METRICS]
    assert startup_starts(lines) == [1]


def test_a_second_banner_or_an_engine_line_after_serving_begins_a_start_up():
    assert startup_starts([BANNER, ENGINE.format(r=0), BANNER, ENGINE.format(r=0)]) == [1, 3]  # cut, then restarted
    # an offline engine (no API server): its engine line after serving is a restart
    assert startup_starts([ENGINE.format(r=0), METRICS, ENGINE.format(r=0)]) == [1, 3]


def test_the_last_start_up_keeps_the_files_line_numbers():
    log = parse_vllm_log("\n".join([BANNER, ENGINE.format(r=0), READY, METRICS, BANNER, ENGINE.format(r=0), READY,
                                    METRICS]) + "\n")
    assert log.first_line == 5 and log.serving_line == 7 and [s.line_no for s in log.stats] == [8]
    assert len(log.earlier) == 1 and log.earlier[0].serving_line == 3 and log.earlier[0].last_line == 4


def test_ansi_escapes_are_stripped():
    assert strip_ansi("\x1b[32mERROR\x1b[0m 04-22 x") == "ERROR 04-22 x"


TB = "Traceback (most recent call last):"
FRAME = '  File "/usr/local/lib/python3.12/dist-packages/vllm/x.py", line 1, in f'
OK_200 = 'INFO:     10.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK'


def test_a_start_up_warnings_traceback_after_the_banner_splits_no_start_up():
    # an optional plugin's ModuleNotFoundError between the banner (line 1) and the engine line (line 5)
    warn = ["(APIServer pid=1) WARNING 04-22 00:03:36 [utils.py:10] Failed to load optional plugin:",
            f"(APIServer pid=1) {TB}", "(APIServer pid=1) ModuleNotFoundError: No module named 'vllm_plugin_x'"]
    assert startup_starts([BANNER, *warn, ENGINE.format(r=0), READY, METRICS]) == [1]
    # the engine core's failed start ends the process: the engine line after it (line 5) is a restart's
    died = "(EngineCore pid=242) ERROR 04-22 00:04:25 [v1/engine/core.py:1100] EngineCore failed to start."
    assert startup_starts([BANNER, ENGINE.format(r=0), died, f"(EngineCore pid=242) {TB}",
                           ENGINE.format(r=0)]) == [1, 5]


def test_only_a_request_handlers_traceback_is_a_request_error():
    # untagged lines (vLLM before 0.11): line 3 "Error in preprocessing prompt inputs", its traceback at line 4, then
    # a metrics line (7): a request error
    head = ["INFO 04-22 00:03:35 [api_server.py:1] vLLM API server version 0.10.2", "INFO:     Application startup "
            "complete."]
    req = ["ERROR 04-22 00:05:12 [serving_chat.py:222] Error in preprocessing prompt inputs", TB, FRAME,
           "ValueError: This model's maximum context length is 8192 tokens.", METRICS]
    log = parse_vllm_log("\n".join(head + req) + "\n")
    assert log.request_errors == (4,) and log.excused_failures == (4,)
    # the same traceback with no request's line before it nor a 4xx/5xx after it, then a 200: not a request's (line 3)
    log = parse_vllm_log("\n".join(head + [TB, FRAME, "ValueError: bad state", OK_200]) + "\n")
    assert log.request_errors == () and log.excused_failures == ()
    # an untagged traceback followed by a 400 for its request (line 6) is the request's
    bad = 'INFO:     10.0.0.1:2 - "POST /v1/completions HTTP/1.1" 400 Bad Request'
    log = parse_vllm_log("\n".join(head + [TB, FRAME, "ValueError: bad prompt", bad, OK_200]) + "\n")
    assert log.request_errors == (3,)
    # the API server's tagged traceback ending in a CUDA OOM is never a request's (line 3)
    oom = "(APIServer pid=1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."
    log = parse_vllm_log("\n".join(head + [f"(APIServer pid=1) {TB}", oom, f"(APIServer pid=1) {OK_200}"]) + "\n")
    assert log.request_errors == () and log.excused_failures == ()


def test_each_start_up_reads_only_its_own_lines_numbered_as_in_the_file():
    # the first start-up (lines 1-5) ends in a traceback with no exception line before the restart's banner (line 6);
    # the restart's own traceback (line 8) ends in its exception (line 9), which is not the first one's cause
    text = "\n".join([BANNER, ENGINE.format(r=0), READY, METRICS, TB, BANNER, ENGINE.format(r=0), TB,
                      "RuntimeError: engine gone"]) + "\n"
    log = parse_vllm_log(text)
    first = log.earlier[0]
    assert (first.first_line, first.last_line, first.total_lines) == (1, 5, 5)
    assert [(f.kind, f.line_no) for f in first.failures] == [("traceback", 5)] and first.failure_cause is None
    assert (log.first_line, log.total_lines, log.failure_cause) == (6, 9, (9, "RuntimeError: engine gone"))
    assert [(f.kind, f.line_no) for f in log.failures] == [("traceback", 8)]


def test_a_crash_is_the_failures_after_serving_less_request_errors_and_a_stop():
    def crash(log):
        return [(f.kind, f.line_no) for f in crash_failures(log.failures, log.serving_line, log.excused_failures)]

    logs = "tests/fixtures/vllm_logs/constructed_v1_"
    # a request's traceback (line 14), then served on: no crash
    assert crash(read_vllm_log(logs + "client_errors.log")) == []
    # the asyncio runner's traceback (line 19) after the operator's shutdown: a stop
    stopped = read_vllm_log(logs + "sigterm.log")
    assert stopped.stopped_line is not None and crash(stopped) == []
    # a CUDA OOM (line 15) under the API server's traceback (12): a crash, whatever 200 follows
    assert crash(read_vllm_log(logs + "oom_then_200.log")) == [("traceback", 12), ("cuda_oom", 15)]
    # the first of two start-ups served from line 11 and died: its engine death, traceback and OOM
    earlier = read_vllm_log(logs + "crash_then_restart.log").earlier[0]
    assert crash(earlier) == [("engine_dead", 42), ("traceback", 43), ("cuda_oom", 48), ("engine_dead", 50)]
    assert crash_failures(earlier.failures, None, ()) == []  # never served: no crash
