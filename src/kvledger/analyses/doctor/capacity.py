"""Preemptions with a full KV cache: a capacity problem, not a scheduling one — and what each remedy buys (ledger).

vLLM preempts only when a running request cannot get a block (V1 ``Scheduler.schedule`` → ``_preempt_request``;
V0's warning says "not enough KV cache space"), so every preemption is a KV-allocation failure. Whether it is
*capacity* shows in the usage around it: at ≥ ``KV_FULL_PCT`` the pool is simply full of running requests.
The remedies are the ones vLLM's tuning guide lists (docs/engine-model.md §6.7) plus FP8 KV, each re-planned by the
ledger with the log's own KV budget: capacity in blocks, the engine's concurrency figure at max_model_len,
and how many requests of the size observed at saturation fit at once.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.capacity_aggregated import AGGREGATED_VERDICT, aggregated_message, aggregated_preempting
from kvledger.analyses.doctor.capacity_options import LEDGER_BUDGET, capacity_options, kv_budget, option_row
from kvledger.analyses.doctor.capacity_step import step_options
from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.kv_usage import (
    KV_FULL_PCT,
    full_with_running,
    queue_clause,
    tokens_per_running_request,
    usage_at,
)
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log import PreemptionEvent, StatsSample
from kvledger.evidence.vllm_log.preemption_counts import preemption_counting

__all__ = ["KV_FULL_PCT", "diagnose_capacity", "usage_at", "tokens_per_running_request", "capacity_options"]
# capacity_options: capacity_options.py (plan_capacity imports it from here)

RULE = (f"preemption ⇒ a request could not get a KV block (vLLM preempts only on allocation failure); with GPU KV "
        f"cache "
        f"usage ≥ {KV_FULL_PCT:.0f}% in the same or previous metrics interval (V0: usage extrapolated from the last "
        f"two "
        "samples to the warning's timestamp) the pool is full of running requests → capacity-bound. Without "
        "preemptions, "
        f"usage ≥ {KV_FULL_PCT:.0f}% with requests waiting → admission is capacity-bound. Remedies: vLLM tuning guide "
        "(raise gpu_memory_utilization, raise tensor_parallel_size, lower max_num_seqs) and FP8 KV (page halves, "
        "vLLM kv_cache_interface.py page_size_bytes), each re-planned by the ledger with the log's KV budget.")


def _full(stats: tuple[StatsSample, ...], i: int) -> bool:
    window = [s.gpu_kv_usage_pct for s in stats[max(0, i - 1):i + 1] if s.gpu_kv_usage_pct is not None]
    return bool(window) and max(window) >= KV_FULL_PCT


def _evidence(stats: tuple[StatsSample, ...], events: tuple[PreemptionEvent, ...],
              full_idx: list[int]) -> list[dict[str, Any]]:
    rows = [{"line": stats[i].line_no, "time": stats[i].time_text, "what": "metrics",
             "value": f"Running {stats[i].running_reqs}, Waiting {stats[i].waiting_reqs}, "
                      + (f"Preemptions {stats[i].preemptions}, " if stats[i].preemptions is not None else "")
                      + f"GPU KV {stats[i].gpu_kv_usage_pct}%"} for i in full_idx]
    for e in events:
        u = usage_at(e, stats)
        rows.append({"line": e.line_no, "time": e.time_text, "what": f"{e.kind} ({e.mode or 'V1'})",
                     "value": f"request {e.request_id}" + (f", KV usage ≈ {u:.1f}%" if u is not None else "")})
    return sorted(rows, key=lambda r: r["line"])


def _v0_top(events: list[PreemptionEvent]) -> PreemptionEvent | None:
    """The V0 warning whose ``total_num_cumulative_preemption`` is the largest, when it counts more preemptions than
    there are warning lines: V0's scheduler warns only when ``num_cumulative_preemption % 50 == 0`` (the 1st, 51st,
    101st, …; ``core/scheduler.py::_preempt``) and prints the running total since the server started."""
    top = max((e for e in events if e.cumulative is not None), key=lambda e: e.cumulative, default=None)
    return top if top is not None and top.cumulative > len(events) else None


def _v0_count(events: list[PreemptionEvent], notes: list[str]) -> int:
    """V0's preemptions: the largest printed running total (``_v0_top``), else one per warning line."""
    top = _v0_top(events)
    if top is None:
        return len(events)
    notes.append(f"vLLM V0 prints one preemption warning per 50 preemptions: {len(events)} warning line(s), and the "
                 f"last says total_num_cumulative_preemption={top.cumulative} (line {top.line_no}), the count since "
                 f"the server started (up to 49 more may follow unprinted)")
    return top.cumulative


def _verdict(ctx: DoctorContext) -> tuple[str, bool, int, list[int], list[str]]:
    log = ctx.log
    stats, notes = log.stats, []
    v1_pre = sum(s.preemptions or 0 for s in stats)
    v0_events = [e for e in log.preemptions if e.kind == "preempted"]
    v0_full = [e for e in v0_events if (u := usage_at(e, stats)) is not None and u >= KV_FULL_PCT]
    full_pre = [i for i, s in enumerate(stats) if (s.preemptions or 0) > 0 and _full(stats, i)]
    total = v1_pre + _v0_count(v0_events, notes)
    if total:
        if full_pre or v0_full:
            return "capacity_bound_preemptions", True, total, full_pre, notes
        if not any(s.gpu_kv_usage_pct is not None for s in stats):
            notes.append("no KV usage in the log; vLLM's V0 warning itself says 'not enough KV cache space'")
            return "capacity_bound_preemptions", True, total, [], notes
        idx = [i for i, s in enumerate(stats) if (s.preemptions or 0) > 0]
        if aggregated_preempting(stats, idx):  # the N engines' mean usage, not one pool's (capacity_aggregated)
            notes.append("no step-size options: the aggregated lines do not show which engine's pool ran out")
            return AGGREGATED_VERDICT, True, total, idx, notes
        return "preemptions_below_full", True, total, idx, notes
    queued = [i for i, s in enumerate(stats) if s.waiting_reqs > 0 and (s.gpu_kv_usage_pct or 0) >= KV_FULL_PCT]
    if queued:
        kind, words = preemption_counting(log)
        if kind == "when_nonzero":  # "never" and "unknown": the message says it once (_unseen)
            notes.append(f"preemptions: {words}")
        return "capacity_bound_admission", True, 0, queued, notes
    return ("kv_not_binding" if stats else "no_metrics"), False, 0, [], notes


def diagnose_capacity(ctx: DoctorContext) -> Finding:
    """The capacity finding with the ledger's options when a model is known."""
    verdict, triggered, total, idx, notes = _verdict(ctx)
    stats = ctx.log.stats
    usage = [s.gpu_kv_usage_pct for s in stats if s.gpu_kv_usage_pct is not None]
    evidence = _evidence(stats, ctx.log.preemptions, idx)
    if not triggered:
        peak = f"peak GPU KV usage {max(usage):.1f}%" if usage else "no KV usage printed"
        waiting = max((s.waiting_reqs for s in stats), default=0)
        msg = (f"no preemptions and no capacity-bound queue in {len(stats):,} metrics line(s) ({peak}, at most "
               f"{waiting} waiting)"
               if stats else "the log has no metrics lines and no preemption warnings" + _startup_only(ctx))
        return Finding("capacity", False, verdict, msg, RULE, tuple(evidence), (), tuple(notes),
                       diagnosed=bool(stats))
    options, per_req, base = capacity_options(ctx)
    if verdict == "preemptions_below_full" and base is not None:  # a step's claim, not the pool (capacity_step.py)
        _, budget, how = kv_budget(ctx)
        options = step_options(ctx, options, [stats[i] for i in idx], (base, budget, how == LEDGER_BUDGET),
                               lambda a, p, d: option_row(a, p, per_req, base.settings.tp, d))
    v0_usage = [u for e in ctx.log.preemptions if (u := usage_at(e, stats)) is not None]
    top = _v0_top([e for e in ctx.log.preemptions if e.kind == "preempted"])
    cite = "" if top is None else f" (total_num_cumulative_preemption={top.cumulative}, line {top.line_no})"
    msg = _message(verdict, total, idx, stats, per_req, base, max(v0_usage, default=None), cite)
    if verdict == "capacity_bound_admission" and (unseen := _unseen(ctx.log, [stats[i] for i in idx])):
        msg = msg.replace(": a capacity problem", f"{unseen}: a capacity problem", 1)
    if options and options[0].get("inconsistent"):
        msg = msg.removesuffix(" What each option buys, from the ledger:") + f" {options[0]['inconsistent']}"
    if base is None:
        need = ("pass --model" if ctx.model is None else
                "the log prints no KV budget or block count: pass --gpu so the ledger can model it")
        notes.append(f"{need} for the options in numbers; FP8 KV doubles the blocks of standard and MLA attention "
                     f"whatever the model")
    return Finding("capacity", True, verdict, msg, RULE, tuple(evidence), tuple(options), tuple(notes))


def _startup_only(ctx: DoctorContext) -> str:
    """For a log with no serving lines, what its start-up says about preemption: the whole max_model_len requests the
    pool as logged holds against max_num_seqs. V1 admits a request on its prompt's blocks and preempts a running one
    when the pool has no block for its next token (``Scheduler.schedule``, 0.10.1 and 0.19.0), so preemption is
    possible under load where max_num_seqs lets more run than that, and impossible at or below it; "" without a
    plan."""
    base, _, how = kv_budget(ctx) if ctx.model is not None else (None, None, "")
    row = base.row_at(base.memory.max_model_len) if base is not None else None
    if row is None or row.max_requests < 1:
        return ""
    m, k = base.memory, row.max_requests
    whole = f"{k:,} request{'s' if k != 1 else ''} of max_model_len {m.max_model_len:,} tokens"
    seqs = f"max_num_seqs {m.max_num_seqs:,} ({ctx.sources.get('max_num_seqs') or 'the plan'})"
    lead = ("from the ledger's plan of its settings (the log prints no KV budget or block count, so the pool is "
            "modelled, not read)" if how == LEDGER_BUDGET else "from its start-up")
    if m.max_num_seqs <= k:
        return f"; {lead}: {seqs} is within the {whole} the pool holds, so no request can be preempted"
    spare = m.num_gpu_blocks - m.usable_blocks  # vLLM V1's null block, as _message says it
    null = f"; the {spare} null block vLLM counts in its printed size holds none" if spare else ""
    slots = f"{m.usable_blocks * m.block_size:,} token slots{null}"
    return (f"; {lead}: the pool holds {whole} at once ({slots}) "
            f"and {seqs} lets more run, so under load vLLM preempts once the running requests need more blocks than "
            f"are free; none can at --max-num-seqs {k} or fewer")


def _unseen(log: Any, full: list[StatsSample]) -> str:
    """Where the log cannot show preemptions (``preemption_counts``: a V1 release before 0.11.1, or one of unknown
    version that prints none), the clause saying so, for a full pool with requests waiting; else "". At 100% usage no
    block is free (V1 ``BlockPool.get_usage`` = 1 − free ÷ total, evictable cached blocks counted free), so a running
    request that needs a new block gets one only by preempting another (``Scheduler.schedule``); vLLM prints the usage
    to 0.1% (``%.1f%%``), so "100.0%" leaves under 0.05% of the blocks free."""
    kind, words = preemption_counting(log)
    if kind not in ("never", "unknown"):
        return ""
    top = max(full, key=lambda st: st.gpu_kv_usage_pct or 0.0)
    at = (f"; at the 100.0% usage of line {top.line_no} (printed to 0.1%: under 0.05% of the blocks free) a running "
          "request that needs a new block gets one only by preempting another, so preemptions are likely"
          if (top.gpu_kv_usage_pct or 0.0) >= 100.0 else "")
    return f" — and preemptions cannot show in this log: {words}{at}"


def _head(verdict: str, total: int, full: list[StatsSample], event_usage: float | None, cite: str = "") -> str:
    sampled = max((s.gpu_kv_usage_pct for s in full if s.gpu_kv_usage_pct is not None), default=None)
    peak = max([x for x in (sampled, event_usage) if x is not None], default=None)
    # a V0 warning's usage is extrapolated from the last two samples to its time (usage_at): said as such
    at = ("" if peak is None else f" (usage up to {peak:.1f}%)" if peak == sampled else
          f" (usage up to ≈{peak:.1f}%, extrapolated to a preemption warning's time from the two samples before it"
          + (f"; sampled up to {sampled:.1f}%)" if sampled is not None else ")"))
    if verdict == "capacity_bound_preemptions":
        return f"{total:,} preemption(s){cite} with the KV cache full{at}" + queue_clause(full)
    if verdict == "capacity_bound_admission":
        return f"requests wait while the KV cache is full{at}, up to {max(s.waiting_reqs for s in full)} waiting"
    return (f"{total:,} preemption(s){cite} while the sampled KV usage stayed below {KV_FULL_PCT:.0f}%: a step "
            "needed more blocks than were free (large prefill chunks or many requests growing at once)")


def _message(verdict: str, total: int, idx: list[int], stats: tuple[StatsSample, ...], per_req: float | None,
             base: Plan | None, event_usage: float | None = None, cite: str = "") -> str:
    if verdict == AGGREGATED_VERDICT:
        return aggregated_message(total, stats, idx, cite)
    head = _head(verdict, total, [stats[i] for i in idx], event_usage, cite)
    if verdict == "preemptions_below_full":
        return head + "; lowering max_num_batched_tokens shrinks the blocks one step can claim."
    text = head + ": a capacity problem, not a scheduling one — the scheduler can only choose whom to preempt or delay."
    if base is not None:
        m = base.memory
        spare = m.num_gpu_blocks - m.usable_blocks  # vLLM V1's null block: counted in the printed size, never used
        text += (f" The pool is {m.num_gpu_blocks:,} blocks ({m.usable_blocks * m.block_size:,} token slots"
                 + (f"; the {spare} null block vLLM counts in its printed size holds none" if spare else "") + ")")
        if per_req:
            lines = [st.line_no for st in full_with_running(stats)]  # tokens_per_running_request's lines
            text += (f"; at saturation each running request holds ≈{per_req:,.0f} tokens (usage × slots ÷ running, the "
                     f"median over the {len(lines):,} metrics lines at ≥ {KV_FULL_PCT:.0f}% KV usage: lines "
                     f"{', '.join(map(str, lines[:8]))}{', …' if len(lines) > 8 else ''})")
        text += ". What each option buys, from the ledger:"
    return text
