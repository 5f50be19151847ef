"""A log holding several start-ups (a restart, a container's journal): where each begins, each read on its own.

A start-up begins at vLLM's API-server announcement (0.19's banner "… version 0.19.0", earlier "vLLM API server
version X") or the engine's "Initializing a V1 LLM engine (vX) with config" line. The next such line begins a new
start-up when the current one has already announced its API server (a second banner), or has served or failed since it
began (an engine line after a crash or a failed start). Once an API banner has opened the start-up, only a failure that
ends a process (the engine core or a worker failed to start, the engine died) or serving ends it: a traceback alone (a
warning's, e.g. an optional plugin that did not import) is no failed start, and the engine line after it is the same
start-up's. Data-parallel engines each print the engine line during one start-up, before any serving: they stay one
start-up.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvledger.evidence.vllm_log.failures import SERVING_READY, failure_on_line
from kvledger.evidence.vllm_log.parse import parse_one_startup
from kvledger.evidence.vllm_log.types import VllmLog

__all__ = ["parse_vllm_log", "startup_starts", "strip_ansi"]

_API_START = re.compile(r"vLLM API server version \d|[█▄▀].*\bversion\s+\d")
_ENGINE_START = re.compile(r"Initializing an? (?:V[01] )?LLM engine \(v?\d")
# failures after which the process is gone (an engine line after one is a new engine's)
_PROCESS_ENDS = frozenset({"engine_core_init_failed", "worker_init_failed", "engine_dead"})
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    """The text without terminal colour and cursor codes (a log captured from a terminal: "\\x1b[32mERROR\\x1b[0m")."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def startup_starts(lines: list[str]) -> list[int]:
    """The 1-based first line of each start-up (1 for the first, whatever precedes its banner)."""
    starts, api, moved = [1], False, False
    for n, raw in enumerate(lines, start=1):
        is_api = "version" in raw and _API_START.search(raw) is not None
        if is_api or ("LLM engine (" in raw and _ENGINE_START.search(raw)):
            if (is_api and api) or moved:
                starts.append(n)
                api, moved = False, False
            api = api or is_api
        elif not moved and ("Avg prompt throughput" in raw or SERVING_READY.search(raw)):
            moved = True
        elif not moved and (fail := failure_on_line(n, raw)) is not None:
            moved = not api or fail.kind in _PROCESS_ENDS
    return starts


def parse_vllm_log(text: str, source: str = "<text>") -> VllmLog:
    """Read a vLLM server log's text: the last start-up is the log read (its line numbers the file's), and each
    earlier one is read the same way into ``earlier``."""
    text = strip_ansi(text)
    lines = text.removesuffix("\n").split("\n") if text else []  # split once; each start-up reads its slice
    starts = startup_starts(lines)
    if len(starts) == 1:
        return parse_one_startup(lines, source)
    ends = [s - 1 for s in starts[1:]] + [len(lines)]
    # each start-up's lines keep the file's numbers (``first``); the lines before it count in its total only
    logs = [parse_one_startup(lines[a - 1:b], source, a) for a, b in zip(starts, ends)]
    return replace(logs[-1], first_line=starts[-1], earlier=tuple(
        replace(lg, first_line=a, last_line=b) for lg, a, b in zip(logs[:-1], starts, ends)))
