"""A vLLM log holding only metrics lines (rotated, ``kubectl logs --since``) is dated by the fields its metrics lines
print: ``v1/metrics/loggers.py::LoggingStatLogger.log`` builds the line from ``log_parts`` and adds ``Preemptions: %d``
(only when > 0), ``Corrupted:``, ``External prefix cache hit rate:`` and ``MM cache hit rate:`` from 0.11.1 (0.11.0's
fixed format string has none of them), ``Deferred: %d reqs`` from 0.20.0 (absent in 0.19.1) and ``KV fetch:`` from
0.32.0 (absent in 0.31.0), each read in the wheels; the prefix ``Engine %03d: `` from 0.8.3 (0.8.0–0.8.2 print
none) and ``{N} Engines Aggregated: `` (``--aggregate-engine-logging``) from 0.11.1. The lines below are printed
in those formats: prefix ``Engine 000: ``, parts joined by ", ", ``%.1f`` for throughputs and percentages."""

from __future__ import annotations

from kvledger.evidence.vllm_log import parse_vllm_log

_HEAD = ("(APIServer pid=1) INFO 04-22 00:06:00 [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: 9100.0 "
         "tokens/s, Avg generation throughput: 3800.0 tokens/s, Running: 196 reqs, Waiting: 61 reqs, ")
# vLLM 0.19.0 (loggers.py log(): "Preemptions: %d" between "Waiting" and "GPU KV cache usage")
V019 = _HEAD + "Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%"
# vLLM 0.20.0 onwards: "Deferred: %d reqs" before "Preemptions" (Waiting already counts the deferred ones)
V020 = _HEAD + "Deferred: 9 reqs, Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%"
# any of 0.8.5–0.33.0: no dating field (no preemption in the interval), only the "Engine 000: " prefix
PLAIN = _HEAD + "GPU KV cache usage: 35.2%, Prefix cache hit rate: 0.0%"
# vLLM 0.8.0–0.8.2 (loggers.py: the format string starts at "Avg prompt throughput", no engine prefix)
NO_PREFIX = PLAIN.replace("Engine 000: ", "")
# --aggregate-engine-logging, 0.11.1 on: AggregatedLoggingStatLogger.log_prefix "{} Engines Aggregated: "
AGGREGATED = PLAIN.replace("Engine 000: ", "2 Engines Aggregated: ")


def test_preemptions_field_dates_a_metrics_only_log_to_0_11_1_and_the_newest_rules_apply():
    lg = parse_vllm_log(PLAIN + "\n" + V019 + "\n", "tail.log")
    assert lg.version is None  # a range, not a version
    assert lg.version_source.startswith("not printed; 0.11.1 or later: its metrics lines print 'Preemptions:'")
    assert lg.rules_version == "0.33.0"
    assert "date the log to 0.11.1 or later: the newest rules in that range, 0.33.0's" in lg.rules_reason


def test_deferred_field_raises_the_floor_to_0_20_0():
    lg = parse_vllm_log(V020 + "\n", "tail.log")
    assert lg.version_source.startswith("not printed; 0.20.0 or later: its metrics lines print 'Deferred:'")
    assert lg.rules_version == "0.33.0"


def test_engine_prefix_dates_the_log_to_0_8_3_and_keeps_the_v1_fallback_rules():
    # 0.8.3 is below the 0.11.0 fallback, so the range 0.8.3 on holds the fallback: its rules stay
    lg = parse_vllm_log(PLAIN + "\n", "tail.log")
    assert lg.version_source.startswith("not printed; 0.8.3 or later: its metrics lines print 'Engine NNN:'")
    assert "(0.8.2's format string has no such prefix)" in lg.version_source
    assert lg.rules_version == "0.11.0"
    assert "(the metrics lines date it to 0.8.3 or later)" in lg.rules_reason


def test_a_line_without_dating_fields_or_prefix_keeps_the_v1_fallback():
    lg = parse_vllm_log(NO_PREFIX + "\n", "tail.log")
    assert lg.version_source == "not printed and not inferable from the line formats"
    assert lg.rules_version == "0.11.0"


def test_aggregated_prefix_dates_the_log_to_0_11_1():
    lg = parse_vllm_log(AGGREGATED + "\n", "tail.log")
    assert lg.version_source.startswith("not printed; 0.11.1 or later: its metrics lines print 'N Engines "
                                        "Aggregated:'")
    assert lg.rules_version == "0.33.0"
    assert lg.stats[0].engine == "aggregated"
