"""The capacity finding's options (``capacity.py``): each remedy vLLM's tuning guide lists plus FP8 KV, re-planned by
the ledger with the log's own KV budget — the pool in blocks, the engine's concurrency figure at max_model_len, and how
many requests of the size observed at saturation fit at once. Apart from ``capacity.py`` (the verdict and its words)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.capacity_limit import shorter_limit_option
from kvledger.analyses.doctor.capacity_replan import kept_override_note, replan, seqs_option
from kvledger.analyses.doctor.context import DoctorContext, stand_in_gpu
from kvledger.analyses.doctor.kv_usage import impossible_per_request, ran_out_of_memory, tokens_per_running_request
from kvledger.analyses.doctor.pool_match import pool_mismatch
from kvledger.analyses.doctor.util_headroom import headroom_note
from kvledger.units import GiB

__all__ = ["LEDGER_BUDGET", "capacity_options", "kv_budget", "option_row"]


def option_row(action: str, p: Plan, per_req: float | None, gpus: int, detail: str,
         held: Callable[[Plan], int] | None = None) -> dict[str, Any]:
    m = p.memory
    slots = m.usable_blocks * m.block_size
    r = p.row_at(m.max_model_len)
    n = (held(p) if held else int(slots // per_req)) if per_req else None
    return {"action": action, "num_gpu_blocks": m.num_gpu_blocks, "token_slots": slots,
            "max_model_len": m.max_model_len,
            "max_concurrency": round(r.max_concurrency, 2) if r else None,
            "requests_of_observed_size": n, "gpus_per_replica": gpus, "detail": detail}


LEDGER_BUDGET = "the ledger's memory model (the log prints no KV budget)"


def kv_budget(ctx: DoctorContext) -> tuple[Plan | None, int | None, str]:
    """The as-logged plan (the log's own block count when known) and the KV budget per GPU the variants start from,
    B."""
    st, exact = ctx.log.startup, ctx.log_blocks_plan
    if st.available_kv_bytes:
        return exact or ctx.log_memory_plan, st.available_kv_bytes, "the log's available KV memory"
    if exact is not None:
        return (
            exact,
            exact.memory.num_gpu_blocks * exact.memory.bytes_per_block,
            "the log's block count × bytes per block (a lower bound)",
        )
    if ctx.model_plan is not None:
        return (
            ctx.model_plan,
            ctx.model_plan.memory.available_kv_bytes,
            LEDGER_BUDGET,
        )
    return None, None, ""


def _variants(ctx: DoctorContext, base: Plan, budget: int, per_req: float | None, own: bool,
              held: Callable[[Plan], int] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """The options, each re-planned by the ledger with its flag (capacity_replan.replan)."""
    kw, tp, notes = ctx.settings, base.settings.tp, []
    out: list[tuple[str, Any, int, str]] = []
    if not base.settings.kv_cache_dtype.startswith("fp8"):
        out.append(("--kv-cache-dtype fp8", replan(ctx, budget, own, kv_cache_dtype="fp8")[0], tp,
                    "page halves, blocks double (kv_cache_interface.py); check accuracy, and see the FP8 KV break-even "
                    "for speed"))
    util = base.memory.fraction
    total = ctx.log.startup.total_gpu_memory_bytes or (ctx.gpu.memory_bytes if ctx.gpu else None)
    if (oom := ran_out_of_memory(ctx.log)) is not None:
        notes.append(f"--gpu-memory-utilization is not raised: the server ran out of GPU memory (line {oom}), so it "
                     "needs more room outside the KV cache, not less")
    elif total and util + 0.05 <= 0.95 + 1e-9:
        p, moved = replan(ctx, budget, own, gpu_memory_utilization=round(util + 0.05, 4))
        out.append((f"--gpu-memory-utilization {util + 0.05:.2f}", p, tp,
                    f"+5% of {total / GiB:.2f} GiB for KV, re-planned ({moved}); risks OOM if anything else shares "
                    "the GPU"))
    elif total:
        notes.append(headroom_note(ctx.log, base, util, total))
    tp2 = 2 * tp
    p, moved = replan(ctx, budget, own, tp=tp2)
    on = "" if ctx.gpu_known else f", the ledger's terms on {stand_in_gpu(ctx.log, ctx.gpu, kw).name}"
    out.append((f"--tensor-parallel-size {tp2}", p, tp2,
                f"KV heads split and the terms per GPU re-planned at TP {tp2} ({moved}{on}); {tp2} GPUs per replica "
                "(plus all-reduce time per step)"))
    out.append(shorter_limit_option(ctx, base, budget, per_req))
    rows = []
    for action, p, gpus, detail in out:
        if isinstance(p, str):
            notes.append(f"{action}: {p}")
        else:
            rows.append(option_row(action, p, per_req, gpus, detail, held))
            if gpus != tp and not ctx.gpu_known:  # its per-GPU terms re-planned on stand_in_gpu's, not the server's
                rows[-1]["stand_in_gpu"] = True
            if per_req and per_req > p.memory.max_model_len:  # the requests observed do not fit under its limit
                rows[-1]["requests_of_observed_size"] = 0
    return rows, notes


def _seqs_row(ctx: DoctorContext, base_row: dict[str, Any], budget: int, own: bool, per_req: float,
              notes: list[str], base: Plan) -> dict[str, Any] | None:
    """--max-num-seqs at the requests of ``per_req`` tokens the slots as logged hold, re-planned at that cap; its
    ``num_gpu_blocks_change`` (and ``_pct``, %) against the pool as logged, and ``no_preemption_max_num_seqs``: the
    whole max_model_len requests the pool as logged holds. V1 admits a request on its prompt's blocks
    (``Scheduler.schedule``, 0.10.1 and 0.19.0), so requests that outgrow the observed size still preempt under the
    first cap; a request holds at most max_model_len tokens, so at the second none can."""
    seqs = base_row["requests_of_observed_size"]  # the slots ÷ per_req, or the held count (capacity_options)
    if seqs < 1:
        return None
    action, p, detail = seqs_option(ctx, base_row, budget, own, seqs, per_req)
    if isinstance(p, str):
        notes.append(f"{action}: {p}")
        return None
    row = option_row(action, p, per_req, base_row["gpus_per_replica"], detail)
    d = p.memory.num_gpu_blocks - base_row["num_gpu_blocks"]
    whole = base.row_at(base.memory.max_model_len)
    return {**row, "requests_of_observed_size": seqs, "num_gpu_blocks_change": d,
            "num_gpu_blocks_change_pct": round(100 * d / base_row["num_gpu_blocks"], 2),
            "no_preemption_max_num_seqs": whole.max_requests if whole is not None else None}


def capacity_options(ctx: DoctorContext, per_req: float | None = None, held: Callable[[Plan], int] | None = None
                     ) -> tuple[list[dict[str, Any]], float | None, Plan | None]:
    """(option rows, observed tokens per running request, the as-logged plan); empty without a model. ``per_req``:
    the tokens per running request to size the options by, instead of the log's at saturation (simulate's mean);
    ``held``: the requests of that length a plan's pool holds (simulate: as plan counts them), else slots ÷ per_req."""
    base, budget, how = kv_budget(ctx)
    if ctx.model is None or base is None or budget is None:
        return [], None, None
    m = base.memory
    given = per_req
    per_req = per_req or tokens_per_running_request(ctx.log.stats, m.usable_blocks, m.block_size)
    impossible = None if given else impossible_per_request(per_req, m.max_model_len, m.block_size)
    per_req = None if impossible else per_req  # no remedy is sized from a figure no request can hold
    # "as modelled" where the log prints no KV budget nor block count: the pool is the ledger's, not the log's
    first = "as logged" if how.startswith("the log's") else "as modelled"
    # "gpus_per_replica_source": where the log says its TP (doctor_view)
    rows = [{**option_row(first, base, per_req, base.settings.tp, f"KV budget from {how}", held),
             **({"gpus_per_replica_source": t} if (t := ctx.sources.get("tp")) else {})}]
    if (miss := pool_mismatch(ctx)) is not None:  # the ledger's page is not the server's: no option (pool_match)
        return [{**rows[0], "notes": [], "inconsistent": miss}], per_req, base
    own = how == LEDGER_BUDGET
    variants, notes = _variants(ctx, base, budget, per_req, own, held)
    rows += variants
    seqs = _seqs_row(ctx, rows[0], budget, own, per_req, notes, base) if per_req else None
    rows += [seqs] if seqs else []
    if n := ctx.settings.get("num_gpu_blocks_override"):  # the log's own: every option was planned with it
        notes.append(kept_override_note(ctx, n, base))
    for r in rows:
        r["notes"] = notes if r is rows[0] else []
    if impossible:  # the message says it (diagnose_capacity); simulate's sizes are never read off a log
        rows[0]["inconsistent"] = impossible
    return rows, per_req, base

