"""The longest max_model_len the KV pool holds, at the plan's point figure and at the low end of its block range, and
the --max-model-len fix built on it (vLLM ``_estimate_max_model_len_from_groups``; the null block of
vllm/v1/core/block_pool.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.accounting.advice_types import Option
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["blocks_at", "estimate_len", "estimate_len_low", "low_usable_blocks", "max_len_option", "null_block_clause",
           "low_len_clause"]


def blocks_at(p: Plan, length: int) -> int:
    """Blocks one ``length``-token request holds under the plan's engine rule (vLLM: its KV layout), count."""
    if p.layout is not None:
        return p.layout.blocks_per_request(length, p.inflight_tokens)
    return -(-length // p.memory.block_size)


def estimate_len(p: Plan, usable_blocks: int | None = None) -> int | None:
    """vLLM's estimated maximum model length for ``usable_blocks`` (the plan's own when None), tokens."""
    m = p.memory
    usable = m.usable_blocks if usable_blocks is None else usable_blocks
    if usable <= 0:
        return None
    if p.layout is not None:
        from kvledger.accounting.plan_vllm import estimate_max_model_len
        return estimate_max_model_len(p.layout, usable, p.inflight_tokens, m.max_model_len) or None
    if usable_blocks is not None:
        return None
    return m.pool_tokens or None


def low_usable_blocks(p: Plan) -> int | None:
    """Usable blocks at the low end of the plan's block range: its low num_gpu_blocks less the blocks the pool keeps
    (vLLM's null block, as at the point figure); None when the range does not reach below the point."""
    low = (p.memory.ranges or {}).get("num_gpu_blocks")
    if p.layout is None or not low or int(low[0]) >= p.memory.num_gpu_blocks:
        return None
    return int(low[0]) - (p.memory.num_gpu_blocks - p.memory.usable_blocks)


def estimate_len_low(p: Plan, est: int | None) -> int | None:
    """The estimate at the low end of the plan's block range (``low_usable_blocks``), the length that starts even if
    every ranged term lands at its worst; ``est`` when the plan has no block range below its point."""
    low = low_usable_blocks(p)
    return est if est is None or low is None else estimate_len(p, low)


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
