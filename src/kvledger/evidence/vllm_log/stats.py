"""vLLM's periodic metrics lines and per-preemption lines.

V1 (``v1/metrics/loggers.py::LoggingStatLogger.log``, every ``VLLM_LOG_STATS_INTERVAL`` = 10 s by default)::

    Engine 000: Avg prompt throughput: X tokens/s, Avg generation throughput: Y tokens/s, Running: N reqs,
    Waiting: M reqs[, Deferred: D reqs][, Preemptions: P], GPU KV cache usage: U%, Prefix cache hit rate: H%

``Preemptions`` is the count during the interval and is printed only when > 0 (docs/engine-model.md §6.7); the
hit rate is over a window of recent requests. V0 (``engine/metrics.py``, every 5 s)::

    Avg prompt throughput: …, Running: N reqs, Swapped: S reqs, Pending: M reqs, GPU KV cache usage: U%, CPU KV cache
    usage: C%.

with the hit rate on a separate line ``Prefix cache hit rate: GPU: X%, CPU: Y%`` and a warning on the 1st, 51st,
101st, … preemption (``num_cumulative_preemption % 50 == 0``): ``Sequence group G is preempted by
PreemptionMode.RECOMPUTE mode because there is not enough KV cache space … total_num_cumulative_preemption=K``, K the
running total. V1 has no per-preemption warning; with a KV connector
its scheduler logs ``Preempted request R has been resumed!``.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvledger.evidence.vllm_log.types import PreemptionEvent, StatsSample

__all__ = ["FORMAT_FIELDS", "format_markers", "parse_stats", "parse_v0_prefix_line", "parse_preemption"]

#: V1 metrics-line fields by the first release whose ``LoggingStatLogger.log`` prints them, each absent from the
#: release before it (read in the wheels of 0.8.4, 0.8.5, 0.9.0–0.9.2, 0.10.0–0.10.2, 0.11.0–0.11.2, 0.12.0–0.33.0):
#: ``Preemptions:``, ``Corrupted:``, ``External prefix cache hit rate:``, ``MM cache hit rate:`` from 0.11.1 (0.11.0's
#: format string has none), ``Deferred:`` from 0.20.0 (absent in 0.19.1), ``KV fetch:`` from 0.32.0 (absent in
#: 0.31.0). Each is printed only when non-zero or non-empty, so a line without one narrows nothing. The line's prefix
#: dates it too (read in 0.8.0–0.8.5 and the wheels above): ``Engine %03d: `` from 0.8.3 (0.8.0–0.8.2 print none), and
#: ``AggregatedLoggingStatLogger.log_prefix`` ``{N} Engines Aggregated: `` (``--aggregate-engine-logging``) from 0.11.1
#: (no such logger in 0.11.0).
FORMAT_FIELDS: dict[str, tuple[str, str, str]] = {
    "stats_kv_fetch": ("KV fetch: ", "0.32.0", "0.31.0"),
    "stats_aggregated_prefix": ("N Engines Aggregated: ", "0.11.1", "0.11.0"),
    "stats_engine_prefix": ("Engine NNN: ", "0.8.3", "0.8.2"),
    "stats_deferred": ("Deferred: ", "0.20.0", "0.19.1"),
    "stats_preemptions": ("Preemptions: ", "0.11.1", "0.11.0"),
    "stats_external_prefix": ("External prefix cache hit rate: ", "0.11.1", "0.11.0"),
    "stats_mm_cache": ("MM cache hit rate: ", "0.11.1", "0.11.0"),
    "stats_corrupted": ("Corrupted: ", "0.11.1", "0.11.0"),
}
"""marker → (field as printed, first release that prints it, the release before it, read without it)."""


_PREFIXES = {"stats_engine_prefix": re.compile(r"\bEngine \d{3,}: Avg prompt throughput: "),
             "stats_aggregated_prefix": re.compile(r"\b\d+ Engines Aggregated: Avg prompt throughput: ")}


def format_markers(message: str) -> set[str]:
    """The ``FORMAT_FIELDS`` markers a V1 metrics line carries (the two prefixes matched where the line starts)."""
    return ({k for k, (field, _, _) in FORMAT_FIELDS.items() if k not in _PREFIXES and field in message}
            | {k for k, rx in _PREFIXES.items() if rx.search(message)})

# Numbers only as vLLM prints them: "1.2.3" or 40 digits do not match (the field is then absent), never reach float().
_NUM = r"\d{1,15}(?:\.\d{1,15})?(?![\d.])"
_INT = r"\d{1,15}(?!\d)"
_ANCHOR = re.compile(
    r"Avg prompt throughput: (" + _NUM + r") tokens/s, Avg generation throughput: (" + _NUM + r") tokens/s"
)
_ENGINE = re.compile(r"(?:Engine (" + _INT + r")|(" + _INT + r") Engines Aggregated):\s*$")
_COUNTS = re.compile(
    r"\b(Running|Swapped|Pending|Waiting|Deferred): (" + _INT + r") reqs|\bPreemptions: (" + _INT + r")"
)
_PCTS = re.compile(
    r"\b(GPU KV cache usage|CPU KV cache usage|External prefix cache hit rate|Prefix cache hit rate): (" + _NUM + r")%"
)
_V0_PREFIX = re.compile(r"Prefix cache hit rate: GPU: (" + _NUM + r")%, CPU: (" + _NUM + r")%")
_V0_PREEMPT = re.compile(r"Sequence group (\S+) is preempted by PreemptionMode\.(\w+) mode because there is not enough "
                         r"KV "
                         r"cache space(?:.*?total_num_cumulative_preemption=(" + _INT + r"))?")
_V1_RESUMED = re.compile(r"Preempted request (\S+) has been resumed")


def parse_stats(message: str, line_no: int, time_text: str | None, t_s: float | None) -> StatsSample | None:
    """A metrics sample from one message, or None when it is not a metrics line."""
    m = _ANCHOR.search(message)
    if not m:
        return None
    eng = _ENGINE.search(message[:m.start()])
    engine = None if not eng else (eng.group(1) if eng.group(1) else "aggregated")
    counts: dict[str, int] = {}
    preempt = None
    for name, n, p in _COUNTS.findall(message[m.end():]):
        if p:
            preempt = int(p)
        else:
            counts.setdefault(name, int(n))
    pcts = {name: float(v) for name, v in _PCTS.findall(message[m.end():])}
    if "Running" not in counts or not {"Waiting", "Pending"} & counts.keys() or "GPU KV cache usage" not in pcts:
        return None  # every version prints all three: a line cut short (a log's last line) or garbled, not 0
    waiting = counts.get("Waiting", counts.get("Pending", 0))  # V1 "Waiting" already includes "Deferred"
    return StatsSample(line_no, time_text, t_s, engine, float(m.group(1)), float(m.group(2)), counts.get("Running", 0),
                       waiting,
                       counts.get("Swapped"), preempt, pcts.get("GPU KV cache usage"), pcts.get("CPU KV cache usage"),
                       pcts.get("Prefix cache hit rate"), pcts.get("External prefix cache hit rate"),
                       int(eng.group(2)) if eng and eng.group(2) else None)


def parse_v0_prefix_line(message: str, last: StatsSample | None) -> StatsSample | None:
    """V0's separate hit-rate line attached to the metrics sample printed just before it, or None."""
    m = _V0_PREFIX.search(message)
    if not m or last is None or last.prefix_cache_hit_pct is not None:
        return None
    return replace(last, prefix_cache_hit_pct=float(m.group(1)))


def parse_preemption(message: str, line_no: int, time_text: str | None, t_s: float | None) -> PreemptionEvent | None:
    """A V0 preemption warning or a V1 "resumed" line, or None."""
    m = _V0_PREEMPT.search(message)
    if m:
        return PreemptionEvent(line_no, time_text, t_s, m.group(1), "preempted", m.group(2),
                               int(m.group(3)) if m.group(3) else None)
    m = _V1_RESUMED.search(message)
    if m:
        return PreemptionEvent(line_no, time_text, t_s, m.group(1), "resumed")
    return None

