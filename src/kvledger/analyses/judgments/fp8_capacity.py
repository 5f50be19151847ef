"""The capacity side of the FP8 KV analysis: the two pools side by side and how long a context each holds at a given
concurrency (the engine's demand rule, ``accounting.plan.concurrency_rows``); apart from ``fp8_kv`` to keep it small."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.plan import Plan, concurrency_rows

__all__ = ["Fp8Capacity", "capacity", "requests_at", "max_context_holding", "default_curve_contexts"]


def requests_at(plan: Plan, context_tokens: int) -> int:
    """Whole requests of ``context_tokens`` the plan's pool holds at once (the engine's demand rule), count."""
    return concurrency_rows(plan.memory, plan.layout, plan.kv, plan.inflight_tokens, [context_tokens])[0].max_requests


def max_context_holding(plan: Plan, num_requests: int) -> int:
    """Longest context (≤ max_model_len) at which the pool holds ``num_requests`` whole requests, tokens; 0 if none."""
    top = plan.memory.max_model_len
    if requests_at(plan, 1) < num_requests:
        return 0
    if requests_at(plan, top) >= num_requests:
        return top
    lo, hi = 1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if requests_at(plan, mid) >= num_requests:
            lo = mid
        else:
            hi = mid
    return lo


def default_curve_contexts(max_model_len: int) -> list[int]:
    """512 tokens doubling up to max_model_len, and max_model_len itself, tokens."""
    out, c = [], 512
    while c < max_model_len:
        out.append(c)
        c *= 2
    return out + [max_model_len]


@dataclass(frozen=True)
class Fp8Capacity:
    """The two pools side by side (per GPU).

    Attributes:
        bf16 / fp8: blocks, block_size (tokens), bytes_per_block, pool_tokens, available_kv_bytes, elem_bytes (B).
        rows: per context: max_concurrency (engine figure, ×) and max_requests (whole requests) for both.
        target_concurrency: the concurrency asked about, count.
        bf16_max_context_tokens / fp8_max_context_tokens: longest context holding that many whole requests, tokens.
    """

    bf16: dict[str, float]
    fp8: dict[str, float]
    rows: tuple[dict[str, float], ...]
    target_concurrency: int
    bf16_max_context_tokens: int
    fp8_max_context_tokens: int


def _pool(p: Plan) -> dict[str, float]:
    m = p.memory
    return {"num_gpu_blocks": m.num_gpu_blocks, "block_size": m.block_size, "bytes_per_block": m.bytes_per_block,
            "pool_tokens": m.num_gpu_blocks * m.block_size, "available_kv_bytes": m.available_kv_bytes,
            "elem_bytes": p.kv.elem_bytes, "bytes_per_token": p.kv.bytes_per_token}


def capacity(pb: Plan, pf: Plan, n: int) -> Fp8Capacity:
    rows = tuple({"context_tokens": a.context_tokens, "bf16_max_concurrency": a.max_concurrency,
                  "fp8_max_concurrency": b.max_concurrency, "bf16_max_requests": a.max_requests,
                  "fp8_max_requests": b.max_requests} for a, b in zip(pb.concurrency, pf.concurrency))
    return Fp8Capacity(_pool(pb), _pool(pf), rows, n, max_context_holding(pb, n), max_context_holding(pf, n))
