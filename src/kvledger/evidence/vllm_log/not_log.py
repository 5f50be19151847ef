"""Input that is not a server log at all: a table (CSV/TSV), JSON or a Prometheus scrape handed to ``doctor``.

What every real vLLM log holds is text lines as vLLM's logger prints them — a header (``INFO 03-21 20:15:45
[gpu_worker.py:267]``) before each message, or, in a post trimmed to the messages, the messages alone. A file with no
logger header at all whose lines are rows of one table (a header row of column names, then rows of the same width) or
a JSON document is data *about* start-ups, not a log: its cells may quote vLLM's messages ("… is not divisible by 5")
without the server having printed them there. This module names such input so ``doctor`` refuses it instead of
reading quoted cells as events.
"""

from __future__ import annotations

import csv
import json
import re

from kvledger.evidence.prometheus_text import scrape_summary

__all__ = ["not_a_log"]

_COLUMN = re.compile(r"^[A-Za-z_][\w .()/%-]{0,80}$")  # a column name: no ':' and does not start with a digit
_SAMPLE = 200  # the file's first lines, read to decide


def _table(lines: list[str]) -> str | None:
    for delim, name in ((",", "CSV"), ("\t", "TSV")):
        try:
            rows = list(csv.reader(lines, delimiter=delim))
        except csv.Error:  # a field over csv's limit, a NUL byte: not a table csv reads
            return None
        width = len(rows[0])
        if width < 3 or len(rows) < 2 or not all(_COLUMN.match(c.strip()) for c in rows[0]):
            continue
        same = sum(len(r) == width for r in rows[1:])
        if same >= 0.9 * (len(rows) - 1):
            return (f"a {name} table ({len(rows) - 1:,} rows of {width} columns under a header row: "
                    f"{', '.join(c.strip() for c in rows[0][:4])}, …)")
    return None


def _json(text: str) -> str | None:
    body = text.lstrip()
    if not body.startswith(("{", "[")):
        return None
    try:
        json.loads(body)
        return "a JSON document"
    except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion limit: read as lines
        return None  # JSON lines may be a collector's structured log, whose messages are read as lines


def not_a_log(lines: list[str], headed_lines: int, first: int = 1) -> str | None:
    """What the input is when it is plainly not a log (a table, JSON), else None. Only asked when no line carries
    vLLM's logger header (``headed_lines`` == 0): a file with one is a log. ``lines``: a start-up's lines, ``lines[0]``
    the file's line ``first``; only those among the file's first 200 lines are sampled."""
    if headed_lines:
        return None
    sample = [ln for ln in lines[:max(0, _SAMPLE + 1 - first)] if ln.strip()]
    if not sample:
        return None
    return _json("\n".join(lines)) or scrape_summary("\n".join(sample)) or _table(sample)
