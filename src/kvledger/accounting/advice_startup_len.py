"""The verdict on max_model_len against the pool as the plan's vLLM version checks it at start-up: "does not fit" with
vLLM's own estimated maximum model length, or, before 0.29 where a request needing every block of the pool passes the
check (``advice_len.check_blocks``), or where the check counts fewer blocks than the request takes (the first KV cache
group alone in 0.14–0.18, no padding slot before 0.14: ``advice_len.check_need``), "fits" with the warning that such a
request can never be scheduled; and "does not fit" where the check counts more than the pool holds though the request
fits it (the whole model's layers on one pipeline stage, 0.14–0.16)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.accounting.advice_len import (
    NULL_BLOCK_CHECK_FROM,
    OVERRIDE_IN_CHECK_FROM,
    blocks_at,
    check_blocks,
    check_need,
    estimate_len,
    estimate_len_low,
    low_len_clause,
    max_len_option,
    null_block_clause,
    printed_estimate,
)
from kvledger.accounting.advice_types import Advice, Option
from kvledger.accounting.kv_range import no_fit_caveat
from kvledger.accounting.vllm_check_demand import check_count_words
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["override_check", "starts_never_scheduled", "does_not_fit_words", "check_refuses", "fix_len", "fix_len_low"]

_BEFORE = ".".join(map(str, NULL_BLOCK_CHECK_FROM[:2]))
_WHY = (f"vLLM's start-up check counts the null block before {_BEFORE} (v1/core/kv_cache_utils.py "
        f"check_enough_kv_cache_memory reserves it from {_BEFORE}.0), which vllm/v1/core/block_pool.py never hands "
        "to a request")


#: why --max-model-len auto chose such a length (vLLM 0.19.0 kv_cache_utils._auto_fit_max_model_len: the binary
#: search of _estimate_max_model_len_from_groups over the available KV bytes, the null block's among them)
_AUTO_WHY = (f"auto's fit and the start-up check count it before {_BEFORE}: kv_cache_utils._auto_fit_max_model_len "
             "estimates from the available KV bytes")


def starts_never_scheduled(p: Plan, need_blocks: int) -> Advice | None:
    """Before vLLM 0.29, a max_model_len request that needs more than the usable blocks but no more than the whole pool:
    vLLM starts (its check counts the null block) but the scheduler can never give such a request its last block, so
    "fits" with that warning and the --max-model-len that runs; None otherwise."""
    m = p.memory
    if need_blocks <= m.usable_blocks:
        return None
    if need_blocks > check_blocks(m):
        return _check_counts_fewer(p, need_blocks)
    run = estimate_len(p)
    fix = f"; --max-model-len {run} runs (the {m.usable_blocks:,} usable blocks hold it)" if run else ""
    if p.settings.auto_max_model_len:  # auto chose the length: said in as few words (the short plan's 26 lines)
        msg = (f"fits: vLLM {m.engine_version} starts, but --max-model-len auto fits {m.max_model_len:,} tokens, and "
               f"a request that long can never be scheduled: it needs {need_blocks:,} blocks, every block of the "
               f"pool, and block_pool.py gives the null block to none ({_AUTO_WHY}){fix}")
    else:
        msg = (f"fits: vLLM {m.engine_version} starts, but a request of max_model_len {m.max_model_len:,} tokens can "
               f"never be scheduled: it needs {need_blocks:,} blocks, every block of the {m.num_gpu_blocks:,}-block "
               f"pool; {_WHY}, so the {m.usable_blocks:,} usable blocks never hold it and such a request waits "
               f"forever{fix}")
    opts = (max_len_option(p, run, estimate_len_low(p, run)),) if run else ()
    return Advice("fits", msg, options=opts)


def _counted(p: Plan) -> str:
    """Why the plan's vLLM release counts other blocks at start-up than one request takes (``check_count_words``: the
    first group alone, the whole model's groups on one stage, no padding slot), "" where it counts the same."""
    m = p.memory
    return check_count_words(p.layout, version_tuple(m.engine_version), m.engine_version) if m.engine == "vllm" else ""


def check_refuses(p: Plan) -> bool:
    """vLLM refuses to start though one max_model_len request fits the pool: its check counts more blocks than the
    pool holds (0.14–0.16 under PP: the whole model's groups on one stage's memory)."""
    return bool(_counted(p)) and check_need(p) > check_blocks(p.memory)


def fix_len(p: Plan) -> int | None:
    """The --max-model-len fix: the longest request the pool holds, and where the check counts more, no longer than
    the longest it passes (vLLM's printed estimate), tokens; None when none is."""
    run = estimate_len(p)
    if not check_refuses(p):
        return run
    est = printed_estimate(p)
    return min(run, est) if run and est else None


def fix_len_low(p: Plan, est: int) -> int | None:
    """``fix_len``'s ``est`` at the low end of the plan's block range: the length that runs there, and where the check
    counts more, no longer than the one it passes there, tokens."""
    low = estimate_len_low(p, est)
    if not check_refuses(p):
        return low
    checked = estimate_len_low(p, est, check_blocks(p.memory), check=True)
    return min(low, checked) if low and checked else None


def _check_counts_fewer(p: Plan, need_blocks: int) -> Advice | None:
    """A max_model_len request longer than the pool that the release's check passes as it counts fewer blocks (the
    first KV cache group alone in 0.14–0.18, no padding slot before 0.14): "fits" (vLLM starts) with the warning that
    such a request is never scheduled; None otherwise."""
    m = p.memory
    if not _counted(p) or check_need(p) > check_blocks(m):
        return None
    run = estimate_len(p)
    fix = f"; --max-model-len {run} runs (the {m.usable_blocks:,} usable blocks hold it)" if run else ""
    msg = (f"fits: vLLM {m.engine_version} starts, but a request of max_model_len {m.max_model_len:,} tokens can never "
           f"be scheduled: it needs {need_blocks:,} blocks, more than the {m.usable_blocks:,} usable of the "
           f"{m.num_gpu_blocks:,}-block pool; {_counted(p)}, where it counts "
           f"{check_need(p):,}, so the check passes and such a request waits forever{fix}")
    opts = (max_len_option(p, run, estimate_len_low(p, run)),) if run else ()
    return Advice("fits", msg, options=opts)


def does_not_fit_words(p: Plan, need_blocks: int) -> tuple[str, float, int | None, int | None]:
    """(message, shortfall B, vLLM's printed estimated maximum model length, the same at the range's low end) for a
    max_model_len request that needs more blocks than the plan's vLLM version's start-up check allows (the check's own
    count ``check_need``: the first KV cache group's alone in 0.14–0.18, the whole model's on one stage in 0.14–0.16
    under PP, no padding slot before 0.14)."""
    m = p.memory
    have_blocks = check_blocks(m)
    why = _counted(p)
    may = "" if check_refuses(p) else no_fit_caveat(m.ranges)  # the pool holds the request, the check asks more
    need_blocks = check_need(p) if why else need_blocks
    need, have = need_blocks * m.bytes_per_block, have_blocks * m.bytes_per_block
    est = printed_estimate(p)
    est_low = estimate_len_low(p, est, have_blocks, check=True)
    if have_blocks == m.usable_blocks:
        held = f"its {m.usable_blocks:,} usable blocks hold{null_block_clause(m)}"
    else:
        held = (f"its {have_blocks:,} blocks hold ({m.available_kv_bytes / GiB:.2f} GiB available; {_WHY}, so a "
                f"request gets at most {m.usable_blocks:,} of them)")
    counted = f" as {why}" if why else ""
    msg = (f"max_model_len does not fit: one {m.max_model_len:,}-token request needs {need / GiB:.2f} GiB of KV "
           f"cache ({need_blocks:,} blocks{counted}), more than the {have / GiB:.2f} GiB {held}; short by "
           f"{(need - have) / GiB:.2f} GiB. Based on the available memory the estimated maximum model length is "
           f"{est or 0:,}{low_len_clause(est, est_low)}{_runs_clause(p, est)}.{may}")
    return msg, need - have, est, est_low


def _runs_clause(p: Plan, est: int | None) -> str:
    """Before 0.29, where vLLM's printed estimate passes the check but needs a block no request gets: the length that
    runs; "" where they agree."""
    run = estimate_len(p)
    if not est or not run or run >= est:  # longer: the pool holds what the check refuses (check_refuses)
        return ""
    return f" (vLLM {p.memory.engine_version}'s own figure; a request that long would never be scheduled: {run:,} runs)"


_IN_CHECK = ".".join(map(str, OVERRIDE_IN_CHECK_FROM))


def override_check(p: Plan, need_blocks: int) -> Advice | None:
    """vLLM V1 before 0.21 with --num-gpu-blocks-override (``advice_len.OVERRIDE_IN_CHECK_FROM``): its start-up check
    judges one max_model_len request against the blocks the profiled memory holds, then the override replaces the
    count. Longer than the memory holds: refused, with vLLM's estimate from the memory; held by the memory but not by
    the override's usable blocks: vLLM starts and the request never finishes (``Scheduler.schedule`` preempts it when
    ``allocate_slots`` finds no free block, and it restarts); None otherwise and for other releases."""
    m = p.memory
    mem_blocks, counted = m.check_num_gpu_blocks, check_need(p)  # the check's count: the first group's in 0.14–0.18
    if mem_blocks is None or (need_blocks <= m.usable_blocks and counted <= mem_blocks):
        return None
    why = (f"vLLM {m.engine_version} checks max_model_len against the {mem_blocks:,} blocks the profiled memory holds, "
           f"not the override, which replaces the block count after the check (v1/core/kv_cache_utils.py, read in "
           f"0.8.0, 0.9.0, 0.19.0 and 0.20.0: the check on the profiled available memory, then the override); from "
           f"{_IN_CHECK} the check uses override × bytes per block")
    run = estimate_len(p)  # the length the override's usable blocks hold
    if counted <= mem_blocks:
        fix = f"; --max-model-len {run} runs (the {m.usable_blocks:,} usable blocks hold it)" if run else ""
        msg = (f"fits: vLLM {m.engine_version} starts, but a request of max_model_len {m.max_model_len:,} tokens can "
               f"never finish: it needs {need_blocks:,} blocks and --num-gpu-blocks-override {m.num_gpu_blocks:,} "
               f"leaves {m.usable_blocks:,} usable; {why}. Such a request is preempted when the pool runs dry and "
               f"restarts (v1/core/sched/scheduler.py Scheduler.schedule){fix}")
        return Advice("fits", msg, options=(max_len_option(p, run, None),) if run else ())
    est = printed_estimate(p)
    need, have = counted * m.bytes_per_block, mem_blocks * m.bytes_per_block
    held = (f"; the override's {m.usable_blocks:,} usable blocks would hold it, but the check comes first"
            if need_blocks <= m.usable_blocks else "")
    one = f" as {why}" if (why := _counted(p)) else ""
    msg = (f"max_model_len does not fit: one {m.max_model_len:,}-token request needs {need / GiB:.2f} GiB of KV "
           f"cache ({counted:,} blocks{one}), more than the {have / GiB:.2f} GiB of the profiled memory's "
           f"{mem_blocks:,} blocks; {why}{held}; short by {(need - have) / GiB:.2f} GiB. Based on the available "
           f"memory the estimated maximum model length is {est or 0:,}.")
    return Advice("max_model_len_does_not_fit", msg, need - have, est, _override_option(p, run, est))


def _override_option(p: Plan, run: int | None, est: int | None) -> tuple[Option, ...]:
    """--max-model-len at the shorter of the length the override's usable blocks hold and the one the check passes."""
    if not run or not est:
        return ()
    length = min(run, est)
    per = blocks_at(p, length)
    why = (f"the longest vLLM {p.memory.engine_version}'s start-up check passes" if length == est
           else "the longest request the override's pool holds")
    return (Option(f"--max-model-len {length}", p.memory.usable_blocks / per, p.memory.usable_blocks // per, why,
                   length),)
