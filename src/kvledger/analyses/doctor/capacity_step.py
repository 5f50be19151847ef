"""The capacity finding's --max-num-batched-tokens option for preemptions below a full KV cache (capacity.py): a step
claimed more blocks than were free, so the step budget is what to lower, to a value derived from the log's figures.

A V1 step claims at most ⌈max_num_batched_tokens ÷ block_size⌉ new blocks for the prompt tokens it schedules, plus one
per running request whose decode opens a block (``KVCacheManager.allocate_slots``). The value offered is half the
logged budget, or — where fewer — the blocks the fullest preempting metrics line leaves free, less one per running
request, × block_size (the step that fits the headroom the log shows); never below max_num_seqs, which vLLM requires.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.capacity_replan import replan
from kvledger.analyses.doctor.context import DoctorContext
from kvledger.evidence.vllm_log import StatsSample

__all__ = ["budget_tokens", "step_budget_option", "step_options"]


def budget_tokens(step: int, free: int, running: int, block: int, seqs: int) -> tuple[int, str]:
    """(the budget offered, tokens; which rule gave it)."""
    half, fits = step // 2 // block * block, max(0, free - running) * block
    if fits < half:
        n, why = fits, "the free blocks less one per running request × block_size"
    else:
        n, why = half, "half the logged budget (the free blocks sampled hold more than one step claims)"
    if n < seqs:
        return -(-seqs // block) * block, f"max_num_seqs {seqs:,} rounded up to a block (vLLM requires at least it)"
    return max(n, block), why


def step_budget_option(ctx: DoctorContext, preempting: list[StatsSample], base: Plan, budget: int,
                       own: bool) -> tuple[str, Plan | str, str] | None:
    """(action, its plan re-planned at that budget or the ledger's error, what it means), or None where the log gives
    no budget, no KV usage at the preemptions, or prefill is not chunked (a smaller budget than max_model_len would
    refuse long prompts)."""
    m = base.memory
    step, block = m.max_num_batched_tokens, m.block_size
    at = max((s for s in preempting if s.gpu_kv_usage_pct is not None), key=lambda s: s.gpu_kv_usage_pct, default=None)
    if not step or at is None or ctx.log.startup.enable_chunked_prefill is False:
        return None
    free = math.floor((1 - at.gpu_kv_usage_pct / 100) * m.usable_blocks)
    n, why = budget_tokens(step, free, at.running_reqs, block, m.max_num_seqs)
    if n >= step:
        return None
    p, moved = replan(ctx, budget, own, max_num_batched_tokens=n)
    claim = (-(-step // block), -(-n // block))
    detail = (f"a step claims up to ⌈budget ÷ {block}⌉ blocks of prompt tokens plus one per running request: "
              f"{claim[0]:,} + {at.running_reqs} at {step:,} tokens, {claim[1]:,} + {at.running_reqs} at {n:,}. The "
              f"fullest preempting line ({at.gpu_kv_usage_pct:.1f}% KV usage, {at.running_reqs} running, line "
              f"{at.line_no:,}) leaves ≈{free:,} of {m.usable_blocks:,} blocks free; the value is {why}. A smaller "
              "step lengthens prefill (TTFT) for long prompts; if preemptions persist, requests growing at once "
              f"fill the pool between samples: lower --max-num-seqs" + (f" (re-planned: {moved})" if moved else ""))
    return f"--max-num-batched-tokens {n}", p, detail


def step_options(ctx: DoctorContext, options: list[dict[str, Any]], preempting: list[StatsSample],
                 pool: tuple[Plan, int | None, bool], row_of: Callable[[str, Plan, str], dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """The options below a full cache: the step budget second (after the pool as logged), and no shorter
    --max-model-len, which frees no block. ``pool``: (the plan as logged, its KV budget, B, whether the pool is the
    ledger's own); ``row_of``: an option's row from its action, plan and meaning (capacity.py)."""
    base, budget, own = pool
    made = step_budget_option(ctx, preempting, base, budget, own) if budget else None
    rows = [o for o in options if not o["action"].startswith("--max-model-len")]
    if made is not None and isinstance(made[1], str):
        rows[0]["notes"] = [*rows[0]["notes"], f"{made[0]}: {made[1]}"]
    elif made is not None and rows:
        rows.insert(1, {**row_of(*made), "notes": []})
    return rows
