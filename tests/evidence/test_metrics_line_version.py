"""A vLLM log holding only metrics lines (rotated, ``kubectl logs --since``) is dated by the fields its metrics lines
print: ``v1/metrics/loggers.py::LoggingStatLogger.log`` builds the line from ``log_parts`` and adds ``Preemptions: %d``
(only when > 0), ``Corrupted:``, ``External prefix cache hit rate:`` and ``MM cache hit rate:`` from 0.11.1 (0.11.0's
fixed format string has none of them), ``Deferred: %d reqs`` from 0.20.0 (absent in 0.19.1) and ``KV fetch:`` from
0.32.0 (absent in 0.31.0), each read in the wheels. The lines below are printed in those formats: prefix
``Engine 000: ``, parts joined by ", ", ``%.1f`` for throughputs and percentages."""

from __future__ import annotations

from kvledger.evidence.vllm_log import parse_vllm_log

_HEAD = ("(APIServer pid=1) INFO 04-22 00:06:00 [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: 9100.0 "
         "tokens/s, Avg generation throughput: 3800.0 tokens/s, Running: 196 reqs, Waiting: 61 reqs, ")
# vLLM 0.19.0 (loggers.py log(): "Preemptions: %d" between "Waiting" and "GPU KV cache usage")
V019 = _HEAD + "Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%"
# vLLM 0.20.0 onwards: "Deferred: %d reqs" before "Preemptions" (Waiting already counts the deferred ones)
V020 = _HEAD + "Deferred: 9 reqs, Preemptions: 12, GPU KV cache usage: 99.1%, Prefix cache hit rate: 0.0%"
# any of 0.8.5–0.33.0: no dating field (no preemption in the interval)
PLAIN = _HEAD + "GPU KV cache usage: 35.2%, Prefix cache hit rate: 0.0%"


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


def test_a_line_without_dating_fields_keeps_the_v1_fallback():
    lg = parse_vllm_log(PLAIN + "\n", "tail.log")
    assert lg.version_source == "not printed and not inferable from the line formats"
    assert lg.rules_version == "0.11.0"
