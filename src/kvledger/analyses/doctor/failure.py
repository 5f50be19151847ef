"""``doctor`` on a server that did not start: the failure lines become one finding with the cause and the fix."""

from __future__ import annotations

import re

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.failure_notes import CAUSE, FIX, RULE
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
    return f" ({n:,} is divisible by {', '.join(map(str, ok))}; TP {tp} is not)" if ok else ""


def _ledger_line(ctx: DoctorContext) -> str:
    """What the ledger says about memory for the log's settings (when it could plan them)."""
    p = ctx.model_plan
    if p is None:
        return " Pass --model and --gpu for the ledger's figures at these settings."
    m = p.memory
    terms = ", ".join(f"{d.name} {d.bytes / GiB:.2f} GiB" for d in m.deductions)
    return (f" The ledger for these settings: {m.requested_bytes / GiB:.2f} GiB requested, {terms}; "
            f"{m.available_kv_bytes / GiB:.2f} GiB left for the KV cache per GPU.")


def diagnose_failure(ctx: DoctorContext) -> Finding | None:
    """The start-up failure finding, or None when the log shows no failure."""
    log = ctx.log
    # a failure after the server began serving is a crash (crash.py), not a start-up failure; failures before it
    # did not stop the start-up
    fails = list(log.failures) if log.serving_line is None else []
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
    fix = FIX[kind] + (_tp_choices(cause) if kind == "not_divisible" else "")
    msg += f" Fix: {fix}."
    if kind in _MEMORY:
        msg += _ledger_line(ctx)
    evidence = tuple({"line": f.line_no, "time": None, "what": f.kind, "value": f.text} for f in fails[:40])
    notes = (f"{len(fails)} failure line(s) in the log; the first {min(len(fails), 40)} are listed",)
    return Finding("startup_failure", True, kind, msg, RULE, evidence, (), notes)
