"""Sliding-window capacity while decoding, beside vLLM's start-up check.

vLLM's printed "Maximum concurrency for X tokens per request" (``kv_cache_utils.py``,
``get_max_concurrency_for_kv_cache_config``, every KV cache group in every release read) and its start-up check (the
same sum, except in 0.14–0.18, which count only the first group: ``vllm_check_demand``) count each sliding layer at
``cdiv(min(window − 1 + tokens in flight, L), block_size) + 1`` blocks (``SlidingWindowSpec.max_memory_usage_bytes``).
The engine reserves nothing of the kind: a running request allocates blocks as it computes tokens, and
``vllm/v1/core/single_type_kv_cache_manager.py : SlidingWindowManager.get_num_skipped_tokens`` (computed − window + 1)
lets ``remove_skipped_blocks`` free every block before the window, so while decoding each sliding group holds at most
``cdiv(window − 1, block_size) + 1`` blocks (the window, plus the block the next token opens) and each full-attention
group ``cdiv(L, block_size)``. Chunked-local attention (``ChunkedLocalAttentionManager.get_num_skipped_tokens`` =
⌊computed / chunk⌋ · chunk) frees every block before the current chunk, keeping ``chunk / block_size`` blocks where the
block size divides the chunk (else ``cdiv(chunk − 1, block_size) + 1``).

Mamba / linear-attention state groups (read in vLLM 0.33.0 and 0.27.0, ``single_type_kv_cache_manager.py :
MambaManager``): the start-up check counts ``MambaSpec.max_memory_usage_bytes`` ÷ page — 1 page with
``mamba_cache_mode`` "none" (prefix caching off; the Mamba block is max_model_len long), 2 with "align" (0.19–0.32),
2 + 1 prefill-checkpoint page with "align" in 0.33 (Mamba-2 and FlashInfer GDN layers), cdiv(max_model_len, block)
with "all" (0.19–0.27). While decoding, ``MambaManager.get_num_skipped_tokens`` = computed − 1, so
``remove_skipped_blocks`` frees every state page before the last computed token's at each step's allocation ("align"
also frees ``last_state_block_idx``). A decode step that crosses a block boundary (computed = k·B) allocates page k
while page k − 1 still holds the state it reads; page k − 1 is freed (into the prefix cache) at the next step. The
checkpoint page is only taken by the prefill chunk that ends the prompt. So a decoding request holds 1 page per state
group between steps and at most 2 (``state_decode_pages``: ``min(2, cdiv(tokens, B))`` in "align" and "all"; 1 in
"none", where one block covers max_model_len) — the figure counted here, as the sliding window's "+ a block".

``held_blocks`` and ``requests_held`` give the same count for a request of any length (``kvledger simulate``'s
"the pool holds N requests of the mean length"): a windowed group at its window, a Mamba state group at the pages it
holds while decoding, full attention at ``cdiv(tokens, block_size)``, as ``plan``'s concurrency rows count them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from kvledger.accounting.vllm_check_demand import first_group_only
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.units import cdiv

if TYPE_CHECKING:
    from kvledger.accounting.kvlayout_types import AllocGroup, KVLayout
    from kvledger.accounting.plan import ConcurrencyRow, Plan

__all__ = ["WINDOWED", "decode_blocks", "state_decode_pages", "held_blocks", "requests_held", "held_words",
           "window_words", "manager_words", "at_max_words"]

WINDOWED = ("sliding_window", "chunked_local")
"""The group kinds whose blocks outside the window are freed as decoding proceeds."""


def state_decode_pages(g: AllocGroup, context_tokens: int) -> int:
    """Pages one decoding request of ``context_tokens`` holds at most in Mamba state group ``g`` (module doc): 1 with
    ``mamba_cache_mode`` "none" (1 page, no page per block); with "align" or "all" the running state's page, and the
    next one while a step crosses a block boundary — ``min(2, cdiv(tokens, B))``: a request within one block never
    crosses one, pages."""
    if g.state_pages == 1 and not g.state_page_per_block:
        return 1
    return min(2, cdiv(context_tokens, g.block_size))


def _frees(layout: KVLayout) -> bool:
    """Whether a group of ``layout`` holds fewer blocks while decoding than the start-up check counts: a windowed
    group, or a Mamba state group counted at more than one page."""
    return any(g.kind in WINDOWED or (g.kind == "state" and (g.state_pages > 1 or g.state_page_per_block))
               for g in layout.groups)


def decode_blocks(layout: KVLayout | None, context_tokens: int, inflight_tokens: int) -> int | None:
    """Blocks one request of ``context_tokens`` holds at most while decoding: windowed groups at their window (+ a
    block), Mamba state groups at ``state_decode_pages``, the other groups as the start-up check counts them, blocks;
    None without a windowed group or a state group counted at more than a page."""
    if layout is None or not _frees(layout):
        return None
    return sum(g.blocks_for_tokens(context_tokens) if g.kind in WINDOWED
               else state_decode_pages(g, context_tokens) if g.kind == "state"
               else g.blocks_per_request(context_tokens, inflight_tokens) for g in layout.groups)


def held_blocks(layout: KVLayout | None, context_tokens: int, inflight_tokens: int) -> int | None:
    """Blocks one request of ``context_tokens`` holds at once while decoding, as ``plan``'s concurrency row at that
    context counts them: ``decode_blocks`` where a windowed or Mamba state group holds fewer than the start-up check
    counts, else the start-up check's; None for one full-attention (or MLA) group, whose requests the token slots
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
        said.append(f"{_windowed_words(layout)} — {_windowed_manager(layout)[1]}")
    if state := _state_words(layout):
        said.append(f"{state} — {_STATE_FREED}")
    elif any(g.kind == "state" for g in layout.groups):
        said.append("each Mamba state group at 1 page (mamba_cache_mode none), as vLLM's start-up check counts it "
                    "(kv_cache_interface.py MambaSpec.max_memory_usage_bytes)")
    said.append("full-attention layers at every block of the request")
    return "; ".join(said)


_STATE_FREED = ("the state pages before the last computed token's are freed at each step: "
                "single_type_kv_cache_manager.py MambaManager.remove_skipped_blocks")
"""Which manager frees a Mamba state group's pages while decoding (vLLM 0.27–0.33, module doc)."""


def _state_words(layout: KVLayout, brief: bool = False) -> str:
    """ "each Mamba state group holds ≤ 2 pages …": what a state group counted at more than a page keeps while
    decoding, the pages at each point of a step unless ``brief``; "" without one."""
    if not any(g.kind == "state" and (g.state_pages > 1 or g.state_page_per_block) for g in layout.groups):
        return ""
    return "each Mamba state group holds ≤ 2 pages" + ("" if brief else (
        ": 1 between steps, 2 while a step crosses a block boundary, 1 for a request within one block"))


def _windowed_words(layout: KVLayout) -> str:
    """ "sliding layers hold ≤ 128 tokens + a block", "chunked-local layers hold ≤ their 8,192-token chunk": what a
    windowed group keeps while decoding."""
    said = []
    wins = sorted({g.window_tokens for g in layout.groups if g.kind == "sliding_window"})
    if wins:
        said.append(f"sliding layers hold ≤ {' / '.join(f'{w:,}' for w in wins)} tokens + a block")
    for c in sorted({(g.window_tokens, g.block_size) for g in layout.groups if g.kind == "chunked_local"}):
        said.append(f"chunked-local layers hold ≤ their {c[0]:,}-token chunk" + (" + a block" if c[0] % c[1] else ""))
    return "; ".join(said)


def window_words(layout: KVLayout, brief: bool = False) -> str:
    """What the groups that free blocks keep while decoding, in words: the windowed layers' window or chunk, the Mamba
    state groups' pages (their bound alone where ``brief``: the short plan)."""
    return "; ".join(w for w in (_windowed_words(layout), _state_words(layout, brief)) if w)


def manager_words(layout: KVLayout) -> tuple[str, str]:
    """(how vLLM's start-up check counts the groups that free blocks while decoding, which manager frees them)."""
    parts = [_windowed_manager(layout)] if any(g.kind in WINDOWED for g in layout.groups) else []
    pages = sorted({g.state_pages for g in layout.groups if g.kind == "state" and g.state_pages > 1
                    and not g.state_page_per_block})
    if pages:
        parts.append((f"each Mamba state group counted at {' / '.join(map(str, pages))} pages "
                      "(MambaSpec.max_memory_usage_bytes)", _STATE_FREED))
    if any(g.kind == "state" and g.state_page_per_block for g in layout.groups):
        parts.append(("each Mamba state group counted at a page per block of the request", _STATE_FREED))
    return "; ".join(p[0] for p in parts), "; ".join(dict.fromkeys(p[1] for p in parts))


def _windowed_manager(layout: KVLayout) -> tuple[str, str]:
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
    (the × it prints) and, with windowed or Mamba state layers, what runs at once while decoding; with
    --disable-hybrid-kv-cache-manager either way, the other setting's figures (``retry(**update)`` re-plans, None
    when it cannot)."""
    m, row = p.memory, p.row_at(p.memory.max_model_len)
    c, n = (row.max_concurrency, row.max_requests) if row else (0.0, 0)
    reqs = f"{n:,} concurrent {m.max_model_len:,}-token request{'' if n == 1 else 's'}"
    if row is None or row.decode_requests is None:
        return f"{reqs} (engine figure {c:.2f}x){caveat}{_unified_words(p, n, retry)}", n
    text = (f"{reqs} at vLLM's {_check_words(p)} (the engine's printed {c:.2f}x{caveat}); ≈{row.decode_requests:,} "
            f"at once while decoding ({window_words(p.layout)})")
    return text + _hybrid_words(p, row, retry), row.decode_requests


def _check_words(p: Plan) -> str:
    """ "start-up check"; in vLLM 0.14–0.18 with several KV cache groups, whose check counts the first group alone,
    "printed concurrency" and why it is not the check."""
    m = p.memory
    if m.engine != "vllm" or not first_group_only(version_tuple(m.engine_version), p.layout):
        return "start-up check"
    return ("printed concurrency, which counts every KV cache group (its start-up check counts the first group "
            f"alone in {m.engine_version}: v1/core/kv_cache_utils.py _max_memory_usage_bytes_from_groups)")


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
