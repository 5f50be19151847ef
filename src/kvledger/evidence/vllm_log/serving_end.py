"""How a served start-up ends in the log: the failures that are not a crash (requests refused while the server kept
serving, the traceback of an operator's stop) and the shutdown line of a stop.

A request error is a traceback of the API server's request handling after which the server goes on serving (a later
metrics line, preemption line or HTTP 2xx response): vLLM's API server logs "Error in preprocessing prompt inputs" and
the traceback, answers 400, and serves on. The traceback is the request's when the API server's process printed it
(0.11+ tag each line "(APIServer pid=…)", the engine's "(EngineCore_DP0 pid=…)"), or, in an untagged log, when a
request's error line ("Error in preprocessing prompt inputs", uvicorn's "Exception in ASGI application") or an
entrypoints/ logger comes just before it or a 4xx/5xx response just after it. A traceback the engine or a worker
printed, and any CUDA out-of-memory, NCCL error or engine death, is never a request's: another process's 200 after it
does not make the engine alive. A shutdown the operator asked for (SIGTERM, Ctrl-C) prints uvicorn's "Shutting down" /
"Application shutdown complete" (and vLLM's "Shutting down FastAPI HTTP server") with no failure before them, often
followed by the asyncio runner's traceback ending in CancelledError or KeyboardInterrupt: a stop, not a crash. After
an engine death the API server prints the same shutdown lines, so a failure before them makes the end a crash.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kvledger.evidence.vllm_log.failures import cause_in_lines
from kvledger.evidence.vllm_log.lines import segments

__all__ = ["ServingEnd", "serving_end", "alive_or_shutdown", "crash_failures"]

_ALIVE_HTTP = re.compile(r'HTTP/[\d.]+"\s+2\d\d\b')  # uvicorn's access line: '… "POST /v1/… HTTP/1.1" 200 OK'
_ERROR_HTTP = re.compile(r'HTTP/[\d.]+"\s+[45]\d\d\b')  # '… "POST /v1/… HTTP/1.1" 400 Bad Request'
_REQUEST_CONTEXT = re.compile(r"Error in preprocessing prompt inputs|Exception in ASGI application|"
                              r"Error in (?:chat completion|completion|request)|\[entrypoints/")
# kinds that are never one request's error: the engine or the GPU is gone, whatever a later line shows
_NEVER_A_REQUEST = frozenset({"cuda_oom", "nccl_error", "engine_dead", "engine_core_init_failed", "worker_init_failed",
                              "negative_kv_memory", "no_kv_memory", "free_memory_below_request"})
_SHUTDOWN = re.compile(r"Shutting down FastAPI HTTP server|Application shutdown complete|Waiting for application "
                       r"shutdown|INFO:\s+Shutting down\b")


def alive_or_shutdown(raw: str) -> str | None:
    """"alive" for an HTTP 2xx access line, "shutdown" for a server-shutdown line, else None."""
    if "HTTP/" in raw and _ALIVE_HTTP.search(raw):
        return "alive"
    if "hutdown" in raw or "Shutting down" in raw:
        return "shutdown" if _SHUTDOWN.search(raw) else None
    return None


@dataclass(frozen=True)
class ServingEnd:
    """Attributes: request_errors: the traceback lines of requests that failed while the server served on.
    excused: every failure line that is no crash (those requests' lines, the stop's own traceback).
    stopped_line: the first shutdown line of a stop the operator asked for (no failure before it), else None."""

    request_errors: tuple[int, ...] = ()
    excused: tuple[int, ...] = ()
    stopped_line: int | None = None


def _process(raw: str) -> str | None:
    segs = segments(0, raw)
    return segs[0].worker if segs else None


def _request_lines(t: int, lines: list[str], first: int, late: list, late_lines: list[int]) -> tuple[int, ...]:
    """The failure lines of the request traceback at line ``t`` (``t`` first), or () when it is no request's.
    ``lines[0]`` is line ``first``; ``late_lines``: the line numbers of ``late``, in order (each block found by
    bisection, not a scan)."""
    i = t - first  # the traceback's index in ``lines``
    proc = _process(lines[i]) if i < len(lines) else None
    if proc is not None and not proc.lower().startswith("apiserver"):
        return ()  # the engine's or a worker's traceback
    cause = cause_in_lines(lines, t, first)
    end = cause[0] if cause else t
    block = late[bisect_left(late_lines, t):bisect_right(late_lines, end)]
    if any(f.kind in _NEVER_A_REQUEST for f in block):
        return ()
    j = end - first  # the exception line's index
    near = lines[max(0, i - 2):i + 1] + ([lines[j]] if end > t else [])
    after = lines[j + 1:j + 4]
    if proc is None and not (any(_REQUEST_CONTEXT.search(x) for x in near)
                             or any("HTTP/" in x and _ERROR_HTTP.search(x) for x in after)):
        return ()
    return tuple(f.line_no for f in block)


def serving_end(fails: list, serving: int | None, last_alive: int | None, shutdowns: list[int],
                lines: list[str], first: int = 1) -> ServingEnd:
    """Sort the failures after ``serving`` (``failures.StartupFailure`` rows) into request errors, a stop and the
    rest (a crash). ``last_alive``: the last line showing the server serving; ``shutdowns``: shutdown lines;
    ``lines``: the start-up's lines (``lines[0]`` is line ``first``); every line number is the file's."""
    if serving is None:
        return ServingEnd()
    late = sorted((f for f in fails if f.line_no > serving), key=lambda f: f.line_no)
    late_lines = [f.line_no for f in late]
    alive = last_alive if last_alive is not None and last_alive > serving else None
    requests: list[int] = []
    excused: set[int] = set()
    if alive is not None and not any(f.kind in _NEVER_A_REQUEST and f.line_no < alive for f in late):
        for f in late:
            if f.kind == "traceback" and f.line_no < alive and f.line_no not in excused:
                got = _request_lines(f.line_no, lines, first, late, late_lines)
                requests += got[:1]
                excused.update(got)
    rest = [f for f in late if f.line_no not in excused]
    stop = next((n for n in shutdowns if n > (alive or serving)), None)
    if stop is None or any(f.line_no < stop or f.kind != "traceback" for f in rest):
        return ServingEnd(tuple(requests), tuple(sorted(excused)), None)
    return ServingEnd(tuple(requests), tuple(sorted(excused)) + tuple(f.line_no for f in rest), stop)


def crash_failures(fails: Sequence, after: int | None, excused: Collection[int]) -> list:
    """The failures (``failures.StartupFailure`` rows, in log order) after line ``after`` that are neither a request's
    that the server served on after nor an operator's stop's (``excused``: ``ServingEnd.excused``): a crash's. None
    when ``after`` is None (the server never served)."""
    if after is None:
        return []
    return [f for f in fails if f.line_no > after and f.line_no not in excused]
