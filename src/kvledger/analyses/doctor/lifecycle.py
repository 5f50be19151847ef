"""``doctor`` on how the server's runs end: the start-ups a log holds (restarts) and what became of each, requests that
failed while the server served on, and a stop the operator asked for."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.doctor.restarts import changed_settings, preemptions_of
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log import VllmLog
from kvledger.evidence.vllm_log.serving_end import crash_failures

__all__ = ["startups", "startups_line", "request_errors_finding", "stopped_line", "REQUEST_ERRORS_RULE",
           "OUTCOMES"]

REQUEST_ERRORS_RULE = ("a request error: a traceback of the API server's request handling (printed by its "
                       "APIServer process, or next to a request's error line or 4xx/5xx response) after which the "
                       "server goes on serving (a later metrics, preemption or HTTP 2xx line) with no engine death, "
                       "CUDA OOM or NCCL error in between; vLLM's API server answers the request with an error "
                       "(400 for a prompt over max_model_len) and serves on: no crash. An engine's or worker's "
                       "traceback is never a request's")
# what became of an earlier start-up, for scripts (``startups``'s "outcome"; the last one's is "verdict")
OUTCOMES = ("served", "crashed", "stopped", "failed_to_start", "unfinished", "verdict")


def _short(cause: tuple[int, str] | None) -> str:
    if cause is None:
        return ""
    text = cause[1] if len(cause[1]) <= 90 else cause[1][:89] + "…"
    return f" ({text})"


def outcome(lg: VllmLog) -> tuple[str, str]:
    """What became of one start-up: one of OUTCOMES (not "verdict"), and in a few words with its lines."""
    s = lg.serving_line
    if s is None:
        if lg.failures:
            first = lg.failure_cause[0] if lg.failure_cause else lg.failures[0].line_no
            return "failed_to_start", f"did not start: failed at line {first}{_short(lg.failure_cause)}"
        return "unfinished", f"ended during start-up at line {lg.last_line} (no serving line)"
    crash = crash_failures(lg.failures, s, lg.excused_failures)
    if crash:
        at = lg.failure_cause[0] if lg.failure_cause else crash[0].line_no
        return "crashed", f"served from line {s}, then crashed at line {at}{_short(lg.failure_cause)}"
    if lg.stopped_line is not None:
        return "stopped", f"served from line {s}, then stopped (shutdown at line {lg.stopped_line})"
    return "served", (f"served from line {s}; no crash or shutdown line before the next start-up "
                      f"(line {lg.last_line + 1})")


def startups(log: VllmLog) -> list[dict[str, Any]]:
    """Every start-up in the log, first first: its lines, what became of it ("outcome", one of OUTCOMES; the last
    one's is "verdict": the report's own) and that in words ("says"), its preemptions (restarts.preemptions_of) and the
    settings it ran with otherwise than the last one ("changed_settings", restarts.changed_settings)."""
    rows = [{"first_line": lg.first_line, "last_line": lg.last_line, "outcome": o, "says": says,
             "preemptions": preemptions_of(lg), "changed_settings": changed_settings(lg, log)}
            for lg in log.earlier for o, says in [outcome(lg)]]
    return rows + [{"first_line": log.first_line, "last_line": log.total_lines, "outcome": "verdict",
                    "says": "the verdict below", "preemptions": preemptions_of(log), "changed_settings": []}]


def startups_line(log: VllmLog) -> str | None:
    """One line for a log holding several start-ups (None for one): how many, whose verdict, the earlier ones' fate."""
    if not log.earlier:
        return None
    said = "; ".join(f"#{i} (lines {lg.first_line:,}–{lg.last_line:,}) {outcome(lg)[1]}"
                     for i, lg in enumerate(log.earlier, start=1))
    return (f"{len(log.earlier) + 1} start-ups in this log; the verdict and the start-up comparison are the last one's "
            f"(from line {log.first_line:,}); earlier: {said}")


def stopped_line(log: VllmLog) -> str | None:
    """The stop the operator asked for, in a line (None when the log shows none)."""
    if log.stopped_line is None:
        return None
    after = [n for n in log.excused_failures if n > log.stopped_line]
    tb = (f"; the traceback after it (line {after[0]:,}) belongs to the shutdown, not a crash") if after else ""
    before = [f.line_no for f in log.failures if f.line_no < log.stopped_line and f.line_no not in
              log.excused_failures]
    none = (f"no failure while it served (the failure at line {before[0]:,} came during start-up, which went on to "
            "serve)" if before else "no failure before it")
    return (f"stopped (shutdown at line {log.stopped_line:,}): the server served from line {log.serving_line:,} and "
            f"was shut down as asked (SIGTERM or Ctrl-C), {none}{tb}")


def request_errors_finding(log: VllmLog) -> Finding | None:
    """The requests that failed while the server served on, or None."""
    tbs = log.request_errors
    if not tbs:
        return None
    cause = log.request_error_cause
    first = f"first at line {tbs[0]:,}" + (f": {cause[1]} (line {cause[0]:,})" if cause else "")
    long = cause is not None and "maximum context length" in cause[1]
    fix = ("clients must send shorter prompts (or the server needs a larger --max-model-len, which `kvledger plan` "
           "sizes)" if long else "read the exception: it names what the request got wrong")
    msg = (f"{len(tbs):,} request(s) failed while the server kept serving ({first}). The server answered them with an "
           f"error and served on (metrics or 2xx responses follow): a request error, not a crash. Fix: {fix}")
    evidence = tuple({"line": n, "time": None, "what": "request traceback", "value": ""} for n in tbs[:40])
    return Finding("request_errors", True, "served_on", msg, REQUEST_ERRORS_RULE, evidence)
