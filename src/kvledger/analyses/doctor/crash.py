"""``doctor`` on a server that started, served, then died: the failure lines after the first serving line become one
``crashed_while_serving`` finding, with the error that killed the engine and what to change.

A start-up is over once the log shows the server serving (``VllmLog.serving_line``: vLLM's "Starting vLLM API server",
uvicorn's ready line, a metrics line or a preemption line); a failure after that line is a crash, not a start-up
failure, and the start-up comparison and the traffic findings read from the metrics still stand.
"""

from __future__ import annotations

from typing import Any

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log.failures import FAILURE_KINDS
from kvledger.evidence.vllm_log.serving_end import crash_failures
from kvledger.units import GiB

__all__ = ["diagnose_crash", "CRASH_RULE", "died_after_start", "sized"]

# what each kind of failure means, and what to change, once the server has been serving
_CRASH_FIX = {
    "cuda_oom": "a step needed more memory outside the KV cache (activations, sampler, CUDA graphs) than the start-up "
                "profile measured, or another process took GPU memory: lower --gpu-memory-utilization to leave "
                "headroom, lower --max-num-seqs or --max-num-batched-tokens (a smaller step), and check nvidia-smi "
                "for other processes",
    "nccl_error": "a GPU-to-GPU collective failed mid-run: check the GPUs' health (nvidia-smi, dmesg Xid errors) and "
                  "rerun with NCCL_DEBUG=INFO",
}
_DEFAULT_FIX = "read the exception (the root cause line) and change what it names"
CRASH_RULE = ("crashed while serving: a failure line (CUDA out of memory, NCCL error, EngineDeadError / 'EngineCore "
              "encountered a fatal error', a traceback, …) after the first line showing the server serving ('Starting "
              "vLLM API server', uvicorn's 'Application startup complete', a metrics or preemption line); the error "
              "named is the first exception after the first traceback past that line")
_KINDS_OF_DEATH = ("engine_dead", "traceback")  # they wrap the real error: named only when nothing else is


def sized(ctx: DoctorContext) -> str:
    """How the log shows the KV cache sized (the start-up's last step before serving)."""
    st = ctx.log.startup
    if st.available_kv_bytes:
        return (f"the KV cache was sized ({st.available_kv_bytes / GiB:.2f} GiB available, line "
                f"{st.lines['available_kv_bytes']})")
    if st.kv_cache_tokens:
        return f"the KV cache was sized ({st.kv_cache_tokens:,} tokens, line {st.lines['kv_cache_tokens']})"
    if st.num_gpu_blocks:
        return f"the KV cache was sized ({st.num_gpu_blocks:,} blocks, line {st.lines['num_gpu_blocks']})"
    return "the log begins after the start-up (no KV-cache sizing line)"


def died_after_start(log) -> bool:
    """True when the log shows no serving line but an engine-death line (EngineDeadError, "EngineCore encountered a
    fatal error", "Request R failed (engine dead)"), which only an engine that had started prints: the log begins
    after the start-up, mid-serving or mid-crash (a pasted tail), and its failures are a crash, not a start-up's."""
    return log.serving_line is None and any(f.kind == "engine_dead" for f in log.failures)


def diagnose_crash(ctx: DoctorContext) -> Finding | None:
    """The crash finding, or None when no failure line follows the first serving line."""
    log = ctx.log
    start = 0 if died_after_start(log) else log.serving_line  # 0: serving before the log's first line
    late = crash_failures(log.failures, start, log.excused_failures)
    if not late:
        return None
    kinds = [f.kind for f in late]
    real = [k for k in kinds if k not in _KINDS_OF_DEATH]
    kind = min(real or kinds, key=FAILURE_KINDS.index)
    first = next(f for f in late if f.kind == kind)
    evidence = tuple({"line": f.line_no, "time": None, "what": f.kind, "value": f.text} for f in late[:40])
    if kind == "traceback" and log.failure_cause is None:  # a traceback's head and no exception: nothing named
        msg = (f"a traceback begins at line {first.line_no}, after the server was serving (from line "
               f"{log.serving_line}), but no exception line follows it: the log stops before naming what failed, "
               "and the traceback may be the server's or a script's around it (an offline LLM run's). Fix: read the "
               "rest of the log, where the exception line is")
        return Finding("crashed_while_serving", True, kind, msg, CRASH_RULE, evidence, (),
                       (f"{len(late)} failure line(s) after line {log.serving_line}, no exception line among them",))
    cause_line, cause = log.failure_cause or (first.line_no, first.text)
    dead = next((f for f in late if "EngineDeadError" in f.text), None)
    since = (f"it was serving from line {start}" if start else
             "it was serving before the log begins (only an engine that had started prints EngineDeadError or "
             "'failed (engine dead)')")
    msg = (f"the server crashed while serving: {sized(ctx)} and {since}, then the engine died: {cause} "
           f"(line {cause_line})")
    if dead is not None and dead.line_no != cause_line:
        msg += f"; the API server then raised EngineDeadError (line {dead.line_no})"
    fix = (_CRASH_FIX.get(kind, _DEFAULT_FIX) if kind != "engine_dead" or log.failure_cause else _unnamed(log, first))
    msg += f". Fix: {fix}. Requests in flight failed; the findings below read the metrics up to the crash."
    notes = (f"{len(late)} failure line(s) after line {start}; the first {min(len(late), 40)} are listed",)
    return Finding("crashed_while_serving", True, kind, msg, CRASH_RULE, evidence, (), notes)


def _unnamed(log: Any, first: Any) -> str:
    """The fix for an engine death whose exception the log does not hold. vLLM's engine core logs "EngineCore
    encountered a fatal error" and then the traceback naming it (``v1/engine/core.py``, ``logger.exception``), so
    after that line the cause would follow; the API server's EngineDeadError comes after the engine core's traceback."""
    if "encountered a fatal error" in first.text:
        return (f"the error that killed the engine is not in this log: vLLM prints its traceback right after "
                f"'EngineCore encountered a fatal error' (line {first.line_no}), but no exception line follows in the "
                f"{log.total_lines:,} lines here, so the log was cut there: read the rest (the whole file, or "
                "`kubectl logs --previous` for a restarted pod)")
    return ("the error that killed the engine is not in this log (EngineDeadError only reports that it died): read "
            "the engine core's traceback, printed before this line")

