"""Splitting raw log lines into vLLM messages: strips wrappers (docker-compose, kubectl boxes, quoting, ISO stamps) and
reads the header.

A vLLM logger line looks like ``INFO 03-21 20:15:45 [worker.py:267] message`` (0.8+) or
``INFO 10-28 11:16:34 metrics.py:349] message`` (earlier), optionally preceded by a process
tag ``(EngineCore_DP0 pid=312)`` and by whatever a collector adds. Posted logs also lose
newlines, so one physical line may hold several records; each header starts a new segment.
Lines without a header (trimmed posts) are kept whole as one segment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Segment", "segments", "seconds_of"]

_HEADER = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+(?P<month>\d{2})-(?P<day>\d{2})\s+"
    r"(?P<hms>\d{2}:\d{2}:\d{2})(?:[.,]\d+)?\s+\[?(?P<src>[\w./<>-]+\.py:\d+)\]\s?")
_WORKER = re.compile(r"\((?P<name>[A-Za-z][\w.-]*)\s+pid=(?P<pid>\d+)(?:,\s*ip=[^)]*)?\)")
_ISO = re.compile(r"\[?(?P<iso>\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(?:[.,]\d+)?Z?\]?")
_STAMP = re.compile(r"^(?:(\d{4})-)?(\d{2})-(\d{2})[T ](\d{2}):(\d{2}):(\d{2})$")
_WRAPPERS = re.compile(r"^[\s>│|]+|[\s│]+$")


@dataclass(frozen=True)
class Segment:
    """One vLLM record: its message text and what the header said.

    Attributes:
        line_no: 1-based physical line. message: text after the header (or the whole cleaned line).
        level: "INFO", ... or None. time_text: "MM-DD HH:MM:SS" or an ISO stamp, or None.
        src: "worker.py:267" or None. worker: process tag "EngineCore_DP0 pid=312" or None.
    """

    line_no: int
    message: str
    level: str | None
    time_text: str | None
    src: str | None
    worker: str | None


def _worker(prefix: str) -> str | None:
    matches = list(_WORKER.finditer(prefix))
    m = matches[-1] if matches else None
    return f"{m.group('name')} pid={m.group('pid')}" if m else None


def segments(line_no: int, raw: str) -> list[Segment]:
    """The vLLM records on one physical line (usually one; several when newlines were lost)."""
    heads = list(_HEADER.finditer(raw))
    if not heads:
        iso = _ISO.match(raw.strip())
        text = _WRAPPERS.sub("", raw)
        return [Segment(line_no, text, None, iso.group("iso") if iso else None, None, _worker(raw))] if text else []
    out = []
    for i, h in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(raw)
        before = raw[heads[i - 1].end() if i else 0:h.start()]
        msg = _WRAPPERS.sub("", raw[h.end():end])
        out.append(Segment(line_no, msg, h.group("level"), f"{h.group('month')}-{h.group('day')} {h.group('hms')}",
                           h.group("src"), _worker(before) if i == 0 else None))
    return out


def seconds_of(time_text: str | None) -> float | None:
    """Seconds since 2000-01-01 for "MM-DD HH:MM:SS" (year unknown: taken as 2000, a leap year) or an ISO stamp, s."""
    m = _STAMP.match(time_text or "")
    if not m:
        return None
    year, month, day, hh, mm, ss = (int(g) if g else 2000 for g in m.groups())
    try:
        return (datetime(year, month, day, hh, mm, ss) - datetime(2000, 1, 1)).total_seconds()
    except ValueError:
        return None
