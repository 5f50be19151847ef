"""Where a vLLM log's start-ups begin (evidence/vllm_log/restarts.py) and how a served run ends (serving_end.py)."""

from __future__ import annotations

from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.evidence.vllm_log.restarts import startup_starts, strip_ansi

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
