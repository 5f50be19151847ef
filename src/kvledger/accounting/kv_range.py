"""The range of a vLLM plan's KV figures: each term's low/high and the device total's propagated to available KV,
blocks, tokens and concurrency.

available_low  = ceil(total_low × util)  − Σ term highs      available_high = ceil(total_high × util) − Σ term lows
blocks = floor(available / bytes_per_block) at each end; tokens and concurrency follow the engine's own formulas.
Given the engine's printed memory, the range is the 2-decimal rounding of that figure (±0.005 GiB).
"""

from __future__ import annotations

import math

from kvledger.accounting.memory import Deduction, floor_div
from kvledger.units import GiB, fmt_low

__all__ = ["kv_ranges", "range_text", "concurrency_caveat", "no_fit_caveat", "printed_gib_block_range",
           "whole_requests_range"]


def kv_ranges(total_low: int, total_high: int, util: float, items: list[Deduction] | tuple[Deduction, ...],
              bytes_per_block: int, *, given_available: int | None = None, fixed_blocks: int | None = None,
              num_groups: int = 1, block_size: int = 16, blocks_per_request: int = 1) -> dict[str, tuple[float, float]]:
    """Low/high of available_kv_bytes, num_gpu_blocks, pool_tokens and max_concurrency (blocks ÷ blocks per request)."""
    if given_available is not None:
        shown = round(given_available / GiB, 2)
        a_lo, a_hi = max(0.0, (shown - 0.005) * GiB), (shown + 0.005) * GiB
    else:
        a_lo = math.ceil(total_low * util) - sum(i.high_bytes for i in items)
        a_hi = math.ceil(total_high * util) - sum(i.low_bytes for i in items)
    if fixed_blocks is not None:
        b_lo = b_hi = fixed_blocks
    elif bytes_per_block:
        b_lo, b_hi = floor_div(a_lo, bytes_per_block), floor_div(a_hi, bytes_per_block)
    else:
        b_lo = b_hi = 0
    groups = max(1, num_groups)
    return {"available_kv_bytes": (float(a_lo), float(a_hi)), "num_gpu_blocks": (b_lo, b_hi),
            "pool_tokens": ((b_lo // groups) * block_size, (b_hi // groups) * block_size),
            "max_concurrency": (b_lo / blocks_per_request if blocks_per_request else 0.0,
                                b_hi / blocks_per_request if blocks_per_request else 0.0)}


def range_text(low: float, high: float, scale: float = GiB, fmt: str = ",.1f") -> str:
    """ "(51.9–53.0)" for a range, "(−61.9 to −61.2)" when an end is negative (a dash between minus signs misreads),
    or "" when the two ends print the same."""
    a, b = format(low / scale, fmt), format(high / scale, fmt)
    if a == b:
        return ""
    if a.startswith("-") or b.startswith("-"):
        return f"({a.replace('-', '−')} to {b.replace('-', '−')})"
    return f"({a}–{b})"


def concurrency_caveat(ranges: dict[str, tuple[float, float]] | None, requests: int) -> str:
    """What the plan's range does to "fits: ``requests`` concurrent max_model_len requests": "" when its low end
    (``ranges["max_concurrency"][0]``, the engine's ×) still holds as many whole requests, else a clause saying so."""
    low = (ranges or {}).get("max_concurrency", (math.inf,))[0]
    if low >= requests:
        return ""
    if low < 1:
        return f" — but may not: the range's low end holds {fmt_low(low)}x, under one request"
    return f" — the range's low end holds {fmt_low(low)}x, so as few as {math.floor(low):,}"


def whole_requests_range(max_concurrency_range: tuple[float, float] | None, blocks_per_request: int,
                         reserved: int) -> tuple[int, int] | None:
    """Whole requests at each end of a concurrency row's range (the engine's × there × blocks per request, less the
    ``reserved`` blocks the pool keeps — vLLM's null block — ÷ blocks per request, as the point's), or None without a
    range or a per-request demand."""
    if not max_concurrency_range or not blocks_per_request:
        return None
    lo, hi = (max(0, (round(x * blocks_per_request) - reserved) // blocks_per_request) for x in max_concurrency_range)
    return lo, hi


def no_fit_caveat(ranges: dict[str, tuple[float, float]] | None) -> str:
    """What the range does to "max_model_len does not fit": a sentence when its high end holds one request, else ""."""
    high = (ranges or {}).get("max_concurrency", (0.0, 0.0))[1]
    return f" It may fit after all: the range's high end holds {high:.2f}x." if high >= 1 else ""


def printed_gib_block_range(available_bytes: int, bytes_per_block: int) -> tuple[int, int]:
    """Block counts consistent with an available-memory figure printed as GiB to 2 decimals (±0.005 GiB), (min, max)."""
    shown = round(available_bytes / GiB, 2)
    lo = max(0, math.ceil((shown - 0.005) * GiB))
    hi = math.ceil((shown + 0.005) * GiB) - 1
    return lo // bytes_per_block, hi // bytes_per_block
