"""The longest max_model_len the KV pool holds, at the plan's point figure and at the low end of its block range, and
the --max-model-len fix built on it (vLLM ``_estimate_max_model_len_from_groups``; the null block of
vllm/v1/core/block_pool.py).

vLLM's start-up check and its printed estimate (``v1/core/kv_cache_utils.py``: ``check_enough_kv_cache_memory`` and
``get_kv_cache_configs``) reserve the null block only from 0.29.0 ("Reserve the null block BlockPool permanently holds
back"; absent in 0.19.0 and 0.28.0, which compare against the whole available memory): before 0.29 a request may need
every block of the pool and vLLM still starts, though such a request never gets its last block (the scheduler's
``BlockPool`` never hands out the null block). ``check_blocks`` is the pool the check compares against, and
``check_need`` what it counts for one request (``vllm_check_demand``: in 0.14–0.18 the first KV cache group's blocks
alone)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.accounting.advice_types import Option
from kvledger.accounting.vllm_check_demand import check_demand_blocks, check_estimate_len
from kvledger.accounting.vllm_override_check import (
    NULL_BLOCK_CHECK_FROM,
    OVERRIDE_IN_CHECK_FROM,
    check_ignores_override,
)
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["NULL_BLOCK_CHECK_FROM", "OVERRIDE_IN_CHECK_FROM", "blocks_at", "check_ignores_override", "check_blocks",
           "check_need",
           "estimate_len", "estimate_len_low", "low_usable_blocks", "max_len_option", "null_block_clause",
           "low_len_clause", "printed_estimate"]



def check_blocks(m: Any) -> int:
    """Blocks vLLM's start-up check lets one max_model_len request take, count: the usable blocks from 0.29.0 (and for
    V0, which has no null block, and the other engines), every block of the pool before (the null block counted); with
    --num-gpu-blocks-override before 0.21, every block the profiled memory holds (``OVERRIDE_IN_CHECK_FROM``)."""
    if getattr(m, "check_num_gpu_blocks", None) is not None:
        return m.check_num_gpu_blocks
    ver = version_tuple(m.engine_version) if m.engine == "vllm" else None
    if ver is None or ver >= NULL_BLOCK_CHECK_FROM or m.usable_blocks <= 0 or m.kv_free:
        return m.usable_blocks
    return m.num_gpu_blocks


def _vllm_version(p: Plan) -> tuple[int, int, int] | None:
    return version_tuple(p.memory.engine_version) if p.memory.engine == "vllm" else None


def check_need(p: Plan, length: int | None = None) -> int:
    """Blocks the plan's vLLM version's start-up check counts for one request of ``length`` tokens (max_model_len when
    None): ``blocks_at``'s, but only the first KV cache group's in 0.14–0.18 (``vllm_check_demand``), count."""
    length = p.memory.max_model_len if length is None else length
    if p.layout is None:
        return blocks_at(p, length)
    return check_demand_blocks(p.layout, length, p.inflight_tokens, _vllm_version(p))


def printed_estimate(p: Plan) -> int | None:
    """The estimated maximum model length vLLM's start-up error prints for the plan's version (``check_blocks``: one
    block longer than the runnable ``estimate_len`` before 0.29 for full attention; ``check_need``'s demand), tokens."""
    return estimate_len(p, check_blocks(p.memory), check=True)


def blocks_at(p: Plan, length: int) -> int:
    """Blocks one ``length``-token request holds under the plan's engine rule (vLLM: its KV layout), count."""
    if p.layout is not None:
        return p.layout.blocks_per_request(length, p.inflight_tokens)
    return -(-length // p.memory.block_size)


def estimate_len(p: Plan, usable_blocks: int | None = None, check: bool = False) -> int | None:
    """The longest max_model_len whose request ``usable_blocks`` (the plan's own when None) hold, tokens: with
    ``check``, the start-up check's estimate (``check_need``'s demand), else the length a request really fits."""
    m = p.memory
    usable = m.usable_blocks if usable_blocks is None else usable_blocks
    if usable <= 0:
        return None
    if p.layout is not None:
        ver = _vllm_version(p) if check else None
        return check_estimate_len(p.layout, usable, p.inflight_tokens, m.max_model_len, ver) or None
    if usable_blocks is not None:
        return None
    return m.pool_tokens or None


def low_usable_blocks(p: Plan, point: int | None = None) -> int | None:
    """Usable blocks at the low end of the plan's block range: its low num_gpu_blocks less the blocks the pool keeps
    (vLLM's null block, as at the point figure: ``point`` blocks there, the usable ones when None); None when the range
    does not reach below the point."""
    low = (p.memory.ranges or {}).get("num_gpu_blocks")
    if p.layout is None or not low or int(low[0]) >= p.memory.num_gpu_blocks:
        return None
    return int(low[0]) - (p.memory.num_gpu_blocks - (p.memory.usable_blocks if point is None else point))


def estimate_len_low(p: Plan, est: int | None, point: int | None = None, check: bool = False) -> int | None:
    """The estimate at the low end of the plan's block range (``low_usable_blocks``), the length that starts even if
    every ranged term lands at its worst; ``est`` when the plan has no block range below its point. ``point``: the
    blocks ``est`` was estimated for (``check_blocks`` for vLLM's printed one, with ``check``), the usable ones when
    None."""
    low = low_usable_blocks(p, point)
    return est if est is None or low is None else estimate_len(p, low, check)


def max_len_option(p: Plan, est: int, est_low: int | None) -> Option:
    """--max-model-len at the range's low end (a guaranteed start), naming the point estimate when they differ."""
    if not est_low or est_low == est:
        return Option(f"--max-model-len {est}", p.memory.usable_blocks / max(1, blocks_at(p, est)), 1,
                      "the longest request the current pool holds", est)
    low_usable = low_usable_blocks(p) or 0
    return Option(f"--max-model-len {est_low}", low_usable / max(1, blocks_at(p, est_low)), 1,
                  f"fits even at the low end of the range ({low_usable:,} usable blocks); the point estimate "
                  f"{est:,} holds only if the memory lands at the plan's point figure", est_low)


def null_block_clause(m: Any) -> str:
    """Why the usable blocks are one fewer than the pool's (vLLM's null block), "" for engines without one."""
    if m.engine != "vllm" or m.num_gpu_blocks != m.usable_blocks + 1:
        return ""
    return (f" ({m.num_gpu_blocks:,} blocks, {m.available_kv_bytes / GiB:.2f} GiB available, less vLLM's null block: "
            f"vllm/v1/core/block_pool.py keeps block 0 for itself)")


def low_len_clause(est: int | None, est_low: int | None) -> str:
    """The estimate at the range's low end when it differs from the point one, "" otherwise."""
    if not est or not est_low or est_low == est:
        return ""
    return f" (at the range's low end {est_low:,}, the length that starts for sure)"
