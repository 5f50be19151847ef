"""``doctor`` on a server that did not start: the failure lines become one finding with the cause and the fix."""

from __future__ import annotations

import re
from typing import Any

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.crash import died_after_start, sized
from kvledger.analyses.doctor.failure_notes import CAUSE, RULE, fix_words, graph_capture_words, utilization_that_fits
from kvledger.analyses.doctor.max_len_fix import max_len_fix
from kvledger.analyses.doctor.startup import MEMORY_TERMS
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log.failures import FAILURE_KINDS
from kvledger.units import GiB

__all__ = ["diagnose_failure"]

_MEMORY = ("negative_kv_memory", "no_kv_memory", "max_model_len_too_large", "cuda_oom")


def _tp_choices(cause: str) -> str:
    """For "N is not divisible by TP": the TP degrees up to 8 that divide N."""
    m = re.search(r"\b(\d+) is not divisible by (\d+)", cause)
    if not m:
        return ""
    n, tp = int(m.group(1)), int(m.group(2))
    ok = [d for d in (1, 2, 4, 8) if n % d == 0]
    return (f" (valid TP sizes, those of 1, 2, 4 and 8 that divide {n:,}: {', '.join(map(str, ok))}; TP {tp} does not "
            "divide it)") if ok else ""


def _ledger_line(ctx: DoctorContext, failed: Any) -> str:
    """What the ledger says about memory for the log's settings (when it could plan them); ``failed``: the failure
    line (``evidence.vllm_log.failures.StartupFailure``), whose printed KV figure may be negative (``value_bytes``;
    the start-up reader keeps only figures ≥ 0)."""
    p = ctx.model_plan
    if p is None:
        return " Pass --model and --gpu for the ledger's figures at these settings."
    m = p.memory
    terms = ", ".join(f"{d.name} {d.bytes / GiB:.2f} GiB" for d in m.deductions)
    return (f" The ledger for these settings: {m.requested_bytes / GiB:.2f} GiB requested, {terms}; "
            f"{m.available_kv_bytes / GiB:.2f} GiB left for the KV cache per GPU.") + _with_log_terms(ctx, m, failed)


#: the ledger's memory terms (``MemoryPlan.deductions`` names) a start-up log prints (``StartupFacts`` fields)
_LOG_TERMS = tuple((term, log_field) for term, log_field, _, _ in MEMORY_TERMS)  # ledger term → the log's field


def _with_log_terms(ctx: DoctorContext, m, failed: Any) -> str:
    """Where the log printed a memory term the ledger puts elsewhere (≥ 0.01 GiB apart): what the ledger leaves for
    the KV cache with the log's figures in place of its own, beside the log's own figure — the arithmetic that says
    which term the ledger missed (gpt-oss-120b on one H100, vLLM 0.10.1: weights 65.97 GiB logged, 60.82 in the
    ledger; 2.95 − 5.14 GiB, −2.20 unrounded, against the log's −2.14)."""
    st = ctx.log.startup
    swapped = [(name, d.bytes, getattr(st, field), st.lines.get(field)) for d in m.deductions
               for name, field in _LOG_TERMS if d.name == name and getattr(st, field) is not None
               and abs(getattr(st, field) - d.bytes) >= 0.01 * GiB]
    if not swapped:
        return ""
    left = m.available_kv_bytes - sum(logged - ledger for _, ledger, logged, _ in swapped)
    said = ", ".join(f"{name} {logged / GiB:.2f} GiB (line {line}; ledger {ledger / GiB:.2f})"
                     for name, ledger, logged, line in swapped)
    neg = getattr(failed, "value_bytes", None)
    log_kv = (neg / GiB, failed.line_no) if neg is not None else (
        None if st.available_kv_bytes is None else (st.available_kv_bytes / GiB, st.lines.get("available_kv_bytes")))
    out = (f" With the log's own {said} in the ledger: {left / GiB:.2f} GiB left"
           + (f" (the log: {log_kv[0]:.2f} GiB, line {log_kv[1]})" if log_kv is not None else "") + ".")
    if m.available_kv_bytes > 0 >= left:
        out += (f" The ledger alone would have started this server: its {', '.join(n for n, *_ in swapped)} "
                "figure is what misses this start-up (the log's is the measurement).")
    why = ctx.weights_release  # version_from_weights: which release's rules give the log's weights
    return out + (f" Why: {why}." if why and any(n == "weights" for n, *_ in swapped) else "")


def _graph_estimate(ctx: DoctorContext) -> str:
    """The log's own CUDA graph memory estimate, as a clause ("" when it prints none)."""
    st = ctx.log.startup
    if st.cudagraph_estimate_bytes is None:
        return ""
    return (f" (the log estimated the graphs at {st.cudagraph_estimate_bytes / GiB:.2f} GiB, line "
            f"{st.lines['cudagraph_estimate_bytes']}"
            + (", not taken out of the KV cache's memory" if st.cudagraph_estimate_applied is False else "") + ")")


def diagnose_failure(ctx: DoctorContext) -> Finding | None:
    """The start-up failure finding, or None when the log shows no failure."""
    log = ctx.log
    # a failure after the server began serving is a crash (crash.py), not a start-up failure; failures before it
    # did not stop the start-up
    fails = list(log.failures) if log.serving_line is None and not died_after_start(log) else []
    if not fails:
        return None
    kind = min((f.kind for f in fails), key=FAILURE_KINDS.index)  # the most specific kind the log shows
    first = next(f for f in fails if f.kind == kind)
    cause_line, cause = ctx.log.failure_cause or (first.line_no, first.text)
    if kind in ("worker_init_failed", "engine_core_init_failed", "traceback") and ctx.log.failure_cause:
        msg = f"the server did not start: {cause} (line {cause_line}). {CAUSE[kind][0].upper() + CAUSE[kind][1:]}."
    else:
        msg = f"the server did not start: {CAUSE[kind]} (line {first.line_no}: {first.text})."
        if ctx.log.failure_cause and ctx.log.failure_cause[1] not in first.text:
            msg += f" Root cause: {cause} (line {cause_line})."
    fix = fix_words(kind, ctx.model, log.failure_in_profile) + (_tp_choices(cause) if kind == "not_divisible" else "")
    if kind == "free_memory_below_request":
        fix += utilization_that_fits(first.text)
    if kind == "max_model_len_too_large" and (n := max_len_fix(ctx)):
        fix = fix.replace("to what the pool holds", f"to what the pool holds {n}")
    if kind == "cuda_oom" and log.failure_in_graph_capture is not None:
        what, fix = graph_capture_words(log.failure_in_graph_capture, sized(ctx), _graph_estimate(ctx))
        msg = f"the server did not start: {what} (line {first.line_no}: {first.text})."
    msg += f" Fix: {fix}."
    if kind in _MEMORY:
        msg += _ledger_line(ctx, first)
    evidence = tuple({"line": f.line_no, "time": None, "what": f.kind, "value": f.text} for f in fails[:40])
    notes = (f"{len(fails)} failure line(s) in the log; the first {min(len(fails), 40)} are listed",)
    return Finding("startup_failure", True, kind, msg, RULE, evidence, (), notes)
