"""The capacity finding's options re-planned (capacity.py): each is the ledger's plan for its changed settings.

Where the pool is the ledger's own (no KV budget nor block count in the log; ``kvledger simulate``'s planned pool) the
option is that plan itself — what ``kvledger plan`` prints with the flag. Where the pool is a log's (its printed KV
budget, or its block count × bytes per block), the option is planned on that budget moved by as much as the ledger's
available KV moves between its plan as logged and its plan with the flag (every term re-planned: weights per GPU,
activation peak, non-torch memory, CUDA graphs, the requested memory), on the log's GPU or its stand-in.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.context import DoctorContext, plan_with, stand_in_gpu
from kvledger.units import GiB, MiB

__all__ = ["replan", "moved_terms", "seqs_option", "override_basis", "kept_override_note"]


def _ledger(ctx: DoctorContext, **change: Any) -> Plan | str:
    gpu = stand_in_gpu(ctx.log, ctx.gpu, ctx.settings)
    if not change and ctx.gpu is not None and ctx.model_plan is not None:
        return ctx.model_plan
    return plan_with(ctx.model, gpu, ctx.settings, **change)


def replan(ctx: DoctorContext, budget: int, own: bool, **change: Any) -> tuple[Plan | str, str]:
    """(the option's plan or the ledger's error, the ledger's terms that moved, in words: ``moved_terms``). ``own``:
    the pool is the ledger's (``ctx.model_plan``), so the option is the ledger's plan with ``change``; else the log's
    ``budget``, B, moved by the ledger's change in available KV (module doc)."""
    base, changed = _ledger(ctx), _ledger(ctx, **change)
    if isinstance(changed, str) or isinstance(base, str):
        return (changed if isinstance(changed, str) else str(base)), ""
    if own:
        return changed, moved_terms(base, changed)
    moved = changed.memory.available_kv_bytes - base.memory.available_kv_bytes
    return plan_with(ctx.model, stand_in_gpu(ctx.log, ctx.gpu, ctx.settings), ctx.settings, **change,
                     available_kv_memory_bytes=budget + moved), moved_terms(base, changed)


def moved_terms(base: Plan, changed: Plan) -> str:
    """The ledger's terms per GPU that differ between two plans, in words ("weights 15.27 → 7.64 GiB, …"), and the
    net change of the requested memory less them (the available KV's change), GiB."""
    old = {d.name: d.bytes for d in base.memory.deductions}
    new = {d.name: d.bytes for d in changed.memory.deductions}
    words = [f"{n} {old.get(n, 0) / GiB:.2f} → {new.get(n, 0) / GiB:.2f} GiB" for n in dict.fromkeys([*old, *new])
             if abs(new.get(n, 0) - old.get(n, 0)) >= GiB / 200]
    if changed.memory.requested_bytes != base.memory.requested_bytes:
        words.append(f"requested {base.memory.requested_bytes / GiB:.2f} → {changed.memory.requested_bytes / GiB:.2f} "
                     "GiB")
    d = changed.memory.available_kv_bytes - base.memory.available_kv_bytes
    return ", ".join(words or ["no term moves"]) + f"; available KV {d / GiB:+.2f} GiB"


def seqs_option(ctx: DoctorContext, base_row: dict[str, Any], budget: int, own: bool, seqs: int,
                per_req: float) -> tuple[str, Plan | str, str]:
    """--max-num-seqs at the requests of ``per_req`` tokens the pool as logged holds (``seqs``): it caps the batch so
    preemptions stop, and re-planned at that cap the pool changes — vLLM sizes the sampler's warm-up and the CUDA
    graphs it captures by max_num_seqs, so a lower cap frees memory for KV. (action, plan or error, detail)."""
    p, moved = replan(ctx, budget, own, max_num_seqs=seqs)
    if isinstance(p, str):
        return f"--max-num-seqs {seqs}", p, ""
    n0 = base_row["num_gpu_blocks"]
    d = p.memory.num_gpu_blocks - n0
    return (f"--max-num-seqs {seqs}", p,
            f"caps running requests at the number of ≈{per_req:,.0f}-token requests the slots hold, so preemptions "
            f"(and their recompute) stop while requests stay near that size and the excess waits in the queue "
            f"(requests admitted on their prompts still preempt when they grow past it); re-planned at this cap the "
            f"pool is "
            f"{p.memory.num_gpu_blocks:,} blocks ({d:+,}, {d / n0:+.1%} on {n0:,}: the sampler's warm-up and the "
            f"CUDA graphs are sized by max_num_seqs; the ledger's terms at this cap: {moved})")


def override_basis(blocks: int, base: Plan, plain: Plan | str | None, where: str, kept: bool) -> str:
    """What the options' block counts compare where the pool is a block-count override (``where``: the flag, or the
    log's line). vLLM keeps an override's count under any flag (v1 ``kv_cache_planning.may_override_num_blocks``: it
    replaces the profiled count). ``kept``: the options were planned with the override still set (a log's own
    setting: ``doctor``), so none moves the pool; else (``simulate``'s override, read as the pool a server's memory
    left) the override's ``blocks`` × ``base``'s bytes per block are the KV memory per GPU each option moves by what
    the ledger's plan moves with its flag (``replan``), all on that one basis. ``plain``: the ledger's own plan for
    these settings without the override, whose pool is named."""
    bpb = base.memory.bytes_per_block
    own = (f"; without the override the ledger plans {plain.memory.num_gpu_blocks:,} blocks for these settings"
           if isinstance(plain, Plan) else "")
    rule = "vLLM keeps an override's block count under any flag (kv_cache_planning.may_override_num_blocks)"
    if kept:
        return (f"the pool is the block-count override ({where}): {rule}, so each option here, set with it, keeps "
                f"{blocks:,} blocks; only raising or dropping the override changes the pool{own}")
    return (f"the pool is the block-count override ({where}): the options read its {blocks:,} blocks × "
            f"{bpb / MiB:,.4g} MiB per block = {blocks * bpb / GiB:,.2f} GiB as the KV memory per GPU and move that "
            f"by the terms each flag moves in the ledger's plan, so every ratio is to these {blocks:,} blocks on that "
            f"one basis; {rule}: set together with the override, no flag here changes the pool{own}")


def kept_override_note(ctx: DoctorContext, n: int, base: Plan) -> str:
    """The options' basis where the log's settings fix the block count at ``n`` (``override_basis``, kept), with the
    ledger's own pool for them without it."""
    line = ctx.log.startup.lines.get("num_gpu_blocks_override")
    plain = plan_with(ctx.model, stand_in_gpu(ctx.log, ctx.gpu, ctx.settings),
                      {k: v for k, v in ctx.settings.items() if k != "num_gpu_blocks_override"})
    return override_basis(n, base, plain, "num_gpu_blocks_override" + (f", line {line}" if line else ""), kept=True)
