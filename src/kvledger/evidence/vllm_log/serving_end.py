"""How a served start-up ends in the log: the failures that are not a crash (requests refused while the server kept
serving, the traceback of an operator's stop) and the shutdown line of a stop.

A traceback after which the server goes on serving (a later metrics line, preemption line or HTTP 2xx response) is one
request's error: vLLM's API server logs "Error in preprocessing prompt inputs" and the traceback, answers 400, and
serves on. A shutdown the operator asked for (SIGTERM, Ctrl-C) prints uvicorn's "Shutting down" / "Application
shutdown complete" (and vLLM's "Shutting down FastAPI HTTP server") with no failure before them, often followed by the
asyncio runner's traceback ending in CancelledError or KeyboardInterrupt: a stop, not a crash. After an engine death
the API server prints the same shutdown lines, so a failure before them makes the end a crash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ServingEnd", "serving_end", "alive_or_shutdown"]

_ALIVE_HTTP = re.compile(r'HTTP/[\d.]+"\s+2\d\d\b')  # uvicorn's access line: '… "POST /v1/… HTTP/1.1" 200 OK'
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


def serving_end(fails: list, serving: int | None, last_alive: int | None, shutdowns: list[int]) -> ServingEnd:
    """Sort the failures after ``serving`` (``failures.StartupFailure`` rows) into request errors, a stop and the
    rest (a crash). ``last_alive``: the last line showing the server serving; ``shutdowns``: shutdown lines."""
    if serving is None:
        return ServingEnd()
    late = [f for f in fails if f.line_no > serving]
    alive = last_alive if last_alive is not None and last_alive > serving else None
    excused: list[int] = []
    if alive is not None and not any(f.kind == "engine_dead" and f.line_no < alive for f in late):
        excused = [f.line_no for f in late if f.line_no < alive]
    rest = [f for f in late if f.line_no not in excused]
    requests = tuple(f.line_no for f in late if f.line_no in excused and f.kind == "traceback")
    stop = next((n for n in shutdowns if n > (alive or serving)), None)
    if stop is None or any(f.line_no < stop or f.kind != "traceback" for f in rest):
        return ServingEnd(requests, tuple(excused), None)
    return ServingEnd(requests, tuple(excused) + tuple(f.line_no for f in rest), stop)
