"""Sliding-window capacity while decoding, beside vLLM's start-up check.

vLLM's start-up check (``kv_cache_utils.py``, "Maximum concurrency for X tokens per request") counts each sliding
layer at ``cdiv(min(window − 1 + tokens in flight, L), block_size) + 1`` blocks (``SlidingWindowSpec.max_memory_usage
_bytes``). The engine reserves nothing of the kind: a running request allocates blocks as it computes tokens, and
``vllm/v1/core/single_type_kv_cache_manager.py : SlidingWindowManager.get_num_skipped_tokens`` (computed − window + 1)
lets ``remove_skipped_blocks`` free every block before the window, so while decoding each sliding group holds at most
``cdiv(window − 1, block_size) + 1`` blocks (the window, plus the block the next token opens) and each full-attention
group ``cdiv(L, block_size)``. Chunked-local attention (``ChunkedLocalAttentionManager.get_num_skipped_tokens`` =
⌊computed / chunk⌋ · chunk) frees every block before the current chunk, keeping ``chunk / block_size`` blocks where the
block size divides the chunk (else ``cdiv(chunk − 1, block_size) + 1``).

``held_blocks`` and ``requests_held`` give the same count for a request of any length (``kvledger simulate``'s
"the pool holds N requests of the mean length"): a windowed group at its window, a Mamba state group at the pages the
start-up check counts, full attention at ``cdiv(tokens, block_size)``, as ``plan``'s concurrency rows count them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvledger.accounting.kvlayout_types import KVLayout
    from kvledger.accounting.plan import ConcurrencyRow, Plan

__all__ = ["WINDOWED", "decode_blocks", "held_blocks", "requests_held", "held_words", "window_words", "manager_words",
           "at_max_words"]

WINDOWED = ("sliding_window", "chunked_local")
"""The group kinds whose blocks outside the window are freed as decoding proceeds."""


def decode_blocks(layout: KVLayout | None, context_tokens: int, inflight_tokens: int) -> int | None:
    """Blocks one request of ``context_tokens`` holds at most while decoding: windowed groups at their window (+ a
    block), the other groups as the start-up check counts them, blocks; None without a windowed group."""
    if layout is None or not any(g.kind in WINDOWED for g in layout.groups):
        return None
    return sum(g.blocks_for_tokens(context_tokens) if g.kind in WINDOWED
               else g.blocks_per_request(context_tokens, inflight_tokens) for g in layout.groups)


def held_blocks(layout: KVLayout | None, context_tokens: int, inflight_tokens: int) -> int | None:
    """Blocks one request of ``context_tokens`` holds at once while decoding, as ``plan``'s concurrency row at that
    context counts them: ``decode_blocks`` where a windowed group frees blocks, else the start-up check's (each Mamba
    state group at its state pages); None for one full-attention (or MLA) group, whose requests the token slots
    divide."""
    if layout is None or (len(layout.groups) == 1 and layout.groups[0].kind in ("full", "mla")):
        return None
    r = layout.blocks_per_request(context_tokens, inflight_tokens)
    d = decode_blocks(layout, context_tokens, inflight_tokens)
    return d if d is not None and d < r else r


def requests_held(p: Plan, tokens: float) -> tuple[int, int | None]:
    """(requests of ``tokens`` tokens — a mean, rounded up — ``p``'s pool holds at once while decoding, the blocks each
    holds): usable blocks ÷ ``held_blocks`` under vLLM's hybrid layouts, else token slots ÷ tokens (blocks None)."""
    m = p.memory
    d = held_blocks(p.layout, math.ceil(tokens), p.inflight_tokens) if m.engine == "vllm" and tokens > 0 else None
    if d:
        return m.usable_blocks // d, d
    return (int(m.usable_blocks * m.block_size // tokens) if tokens > 0 else 0), None


def held_words(layout: KVLayout) -> str:
    """Which rule ``held_blocks`` followed for ``layout``, in words (the windowed layers' manager, the state pages)."""
    said = []
    if any(g.kind in WINDOWED for g in layout.groups):
        said.append(f"{window_words(layout)} — {manager_words(layout)[1]}")
    state = {"a page per block of tokens" if g.state_page_per_block else f"{g.state_pages} page" + "s" * (g.state_pages
             != 1) for g in layout.groups if g.kind == "state"}
    if state:
        said.append(f"each Mamba state group at {' / '.join(sorted(state))}, as vLLM's start-up check counts it "
                    "(kv_cache_interface.py MambaSpec.max_memory_usage_bytes)")
    said.append("full-attention layers at every block of the request")
    return "; ".join(said)


def window_words(layout: KVLayout) -> str:
    """ "sliding layers hold ≤ 128 tokens + a block", "chunked-local layers hold ≤ their 8,192-token chunk": what a
    windowed group keeps while decoding."""
    said = []
    wins = sorted({g.window_tokens for g in layout.groups if g.kind == "sliding_window"})
    if wins:
        said.append(f"sliding layers hold ≤ {' / '.join(f'{w:,}' for w in wins)} tokens + a block")
    for c in sorted({(g.window_tokens, g.block_size) for g in layout.groups if g.kind == "chunked_local"}):
        said.append(f"chunked-local layers hold ≤ their {c[0]:,}-token chunk" + (" + a block" if c[0] % c[1] else ""))
    return "; ".join(said)


def manager_words(layout: KVLayout) -> tuple[str, str]:
    """(how vLLM's start-up check counts the windowed layers, which manager frees their blocks while decoding)."""
    kinds = {g.kind for g in layout.groups if g.kind in WINDOWED}
    if kinds == {"chunked_local"}:
        return ("each chunked-local layer counted at its chunk plus the tokens in flight",
                "the blocks before the current chunk are freed: single_type_kv_cache_manager.py "
                "ChunkedLocalAttentionManager")
    if kinds == {"sliding_window"}:
        return ("each sliding layer counted at its window plus the tokens in flight",
                "the blocks before the window are freed: single_type_kv_cache_manager.py SlidingWindowManager")
    return ("each sliding or chunked-local layer counted at its window or chunk plus the tokens in flight",
            "the blocks before the window or current chunk are freed: single_type_kv_cache_manager.py "
            "SlidingWindowManager, ChunkedLocalAttentionManager")


def at_max_words(p: Plan, caveat: str, retry: Callable[..., Plan | None]) -> tuple[str, int]:
    """The fits line's figure at max_model_len and the whole requests that say whether it is low: vLLM's start-up check
    (the × it prints) and, with windowed layers, what runs at once while decoding; with --disable-hybrid-kv-cache-
    manager either way, the other setting's figures (``retry(**update)`` re-plans, None when it cannot)."""
    m, row = p.memory, p.row_at(p.memory.max_model_len)
    c, n = (row.max_concurrency, row.max_requests) if row else (0.0, 0)
    reqs = f"{n:,} concurrent {m.max_model_len:,}-token request{'' if n == 1 else 's'}"
    if row is None or row.decode_requests is None:
        return f"{reqs} (engine figure {c:.2f}x){caveat}{_unified_words(p, n, retry)}", n
    text = (f"{reqs} at vLLM's start-up check (the engine's printed {c:.2f}x{caveat}); ≈{row.decode_requests:,} at "
            f"once while decoding ({window_words(p.layout)})")
    return text + _hybrid_words(p, row, retry), row.decode_requests


def _hybrid_words(p: Plan, row: ConcurrencyRow, retry: Callable[..., Plan | None]) -> str:
    """Where --disable-hybrid-kv-cache-manager raises the start-up × but not what runs: both figures."""
    q = retry(disable_hybrid_kv_cache_manager=True)
    qr = q.row_at(q.memory.max_model_len) if q is not None else None
    if qr is None or qr.max_concurrency <= row.max_concurrency:
        return ""
    head = f"; --disable-hybrid-kv-cache-manager would print {qr.max_concurrency:.2f}x at start-up"
    if qr.max_requests >= row.decode_requests:  # the flag costs nothing while decoding: no advice to keep the manager
        return (f"{head}, and with its sliding layers allocated as full it holds {qr.max_requests:,} at once while "
                f"decoding too, {'as many as' if qr.max_requests == row.decode_requests else 'more than'} the "
                f"≈{row.decode_requests:,} here")
    return (f"{head}, but with its sliding layers allocated as full it holds {qr.max_requests:,} at once while "
            f"decoding too, against ≈{row.decode_requests:,} here: keep the hybrid manager")


def _unified_words(p: Plan, n: int, retry: Callable[..., Plan | None]) -> str:
    """Under --disable-hybrid-kv-cache-manager on a windowed model: what the hybrid manager would run at once."""
    if not p.settings.disable_hybrid_kv_cache_manager or not any(g.kind in WINDOWED for g in p.kv.groups):
        return ""
    q = retry(disable_hybrid_kv_cache_manager=False)
    qr = q.row_at(q.memory.max_model_len) if q is not None else None
    if qr is None or qr.decode_requests is None or qr.decode_requests <= n:
        return ""
    return (f"; --disable-hybrid-kv-cache-manager allocates the sliding layers as full, so no more run while decoding; "
            f"without it ≈{qr.decode_requests:,} would run at once while decoding ({qr.max_concurrency:.2f}x at vLLM's "
            "start-up check)")
