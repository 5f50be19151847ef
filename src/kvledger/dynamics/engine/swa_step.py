"""vLLM's per-step block rule for sliding-window and chunked-local KV cache groups: blocks for the whole chunk while it
is computed, the window afterwards, and the capped admission check.

Source (vLLM 0.33): ``v1/core/single_type_kv_cache_manager.py : SingleTypeKVCacheManager.
allocate_new_blocks`` gives a request blocks for every token up to ``computed + new`` — a
chunk's KV is written before anything leaves the window — and ``remove_skipped_blocks`` then
drops the blocks wholly before the window of the tokens already processed (``SlidingWindowManager``:
``computed − W + 1`` tokens skipped; ``ChunkedLocalAttentionManager``: the chunks before the
current one). The admission check (``KVCacheManager.allocate_slots(full_sequence_must_fit)``)
counts, per sliding group, at most ``SlidingWindowSpec.max_admission_blocks_per_request`` =
``cdiv(min(W − 1 + F, L), B) + 1`` blocks (F: tokens in flight, ``max_in_flight_tokens``)::

    window W = 8, block 4, a 30-token prompt in one chunk:
      during the chunk   [b0 b1 b2 b3 b4 b5 b6 b7]   8 blocks (cdiv(30, 4))
      next decode step   [ .  .  .  .  .  b5 b6 b7]   3 blocks: 0..4 before token 23 are freed

Decode steps hold ``min(cdiv(t, B), cdiv(W − 1, B) + 1)`` blocks for ``t`` tokens (the
steady-state window, ``AllocGroup.blocks_for_tokens``), an upper bound of vLLM's, which
alternates between that and one block fewer as the window crosses block boundaries. With
async scheduling vLLM frees on ``computed − in flight`` tokens; here on ``computed`` (a
request's out-of-window blocks go one step early).

Mamba state groups (vLLM 0.33 ``MambaManager``, "align" mode — prefix caching on): a request holds the page of its last
computed token's state between steps (``get_num_skipped_tokens`` = computed − 1). A prefill chunk that ends past the
first block also takes the prefill-checkpoint page (Mamba-2, FlashInfer GDN; ``get_num_blocks_to_allocate`` caps the new
pages at 1 + checkpoint), and a chunk that crosses a block boundary keeps the page it reads until the next step; both
are freed at the next step (``remove_skipped_blocks``). The admission check counts 1 + the checkpoint page for a
sequence longer than a block. A decode step that crosses a block boundary (computed a multiple of the block) likewise
holds the old page with the new one for that step; decode stretches, which only add blocks, stop before such a step
(``steps_before_crossing``), so the general step takes it and the next frees the old page. With "none" (prefix caching
off), and "all" (not modelled), a state group is always 1 page.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.units import cdiv

__all__ = ["StepBlockRule"]


@dataclass(frozen=True)
class StepBlockRule:
    """Blocks a request holds per step, summed over KV cache groups (module doc).

    Attributes:
        groups: per group ``(kind, block_size, window_tokens)``; kinds as ``AllocGroup.kind``.
        max_model_len: L, tokens.
        inflight_tokens: F in the admission cap, tokens.
        state_boundary_page: Mamba state groups in "align" mode: a prefill chunk that crosses a block boundary holds
            the page it reads for the step ("all" mode, vLLM 0.19–0.27, stays at 1 page: its prefill not modelled).
        state_checkpoint_pages: prefill-checkpoint pages per state group ("align", vLLM 0.33), pages.
    """

    groups: tuple[tuple[str, int, int], ...]
    max_model_len: int
    inflight_tokens: int
    state_boundary_page: bool = False
    state_checkpoint_pages: int = 0

    @classmethod
    def from_layout(cls, layout, max_model_len: int, inflight_tokens: int) -> StepBlockRule:
        state = [g for g in layout.groups if g.kind == "state"]
        align = [g for g in state if g.state_pages > 1 and not g.state_page_per_block]
        boundary, ck = bool(align), max((g.state_pages - 2 for g in align), default=0)
        return cls(tuple((g.kind, g.block_size, g.window_tokens) for g in layout.groups), max_model_len,
                   inflight_tokens, boundary, max(ck, 0))

    def state_pages(self, computed: int, new: int, block_size: int) -> int:
        """Pages one state group holds once a step's ``new`` tokens after ``computed`` have their slots (module doc):
        1, + 1 where the step crosses a block boundary, + the checkpoint page where a prefill chunk ends past the
        first block, pages."""
        if not self.state_boundary_page:
            return 1
        t, B = computed + new, block_size
        crosses = computed > 0 and (computed - 1) // B != (t - 1) // B
        return 1 + int(crosses) + (self.state_checkpoint_pages if new > 1 and t > B else 0)

    def steps_before_crossing(self, comp: list[int], rems: list[int], k: int) -> int:
        """Decode steps (≤ ``k``) of a stretch before the first in which a request (``comp[i]`` computed tokens at the
        start, ``rems[i]`` steps left) crosses a state group's block boundary and takes a second page, steps."""
        if not self.state_boundary_page:
            return k
        for kind, B, _ in self.groups:
            if kind == "state":
                for c, m in zip(comp, rems):
                    j = -c % B  # the step whose schedule finds a multiple of B computed
                    if j < m and j < k and c + j > 0:
                        k = j
        return k

    def steady(self, num_tokens: int) -> int:
        """Blocks held after a decode step brings a request to ``num_tokens`` tokens, blocks."""
        total = 0
        for kind, B, W in self.groups:
            if kind == "state":
                total += 1
            elif kind == "sliding_window":
                total += min(cdiv(num_tokens, B), cdiv(W - 1, B) + 1)
            elif kind == "chunked_local":
                total += min(cdiv(num_tokens, B), cdiv(W, B) + 1)
            else:
                total += cdiv(num_tokens, B)
        return total

    def held_after(self, computed: int, new: int) -> int:
        """Blocks held once a step's ``new`` tokens after ``computed`` have their slots, blocks (≥ ``steady``)."""
        t = computed + new
        total = 0
        for kind, B, W in self.groups:
            if kind == "state":
                total += self.state_pages(computed, new, B)
                continue
            blocks = cdiv(t, B)
            if kind == "sliding_window":
                skipped = max(0, computed - W + 1) // B
                total += max(blocks - skipped, min(blocks, cdiv(W - 1, B) + 1))
            elif kind == "chunked_local":
                skipped = (computed // W) * W // B
                total += max(blocks - skipped, min(blocks, cdiv(W, B) + 1))
            else:
                total += blocks
        return total

    def admission(self, num_tokens: int) -> int:
        """Blocks the full-sequence admission check counts for a request of ``num_tokens`` tokens, blocks."""
        n, L, F = num_tokens, self.max_model_len, self.inflight_tokens
        total = 0
        for kind, B, W in self.groups:
            if kind == "state":  # MambaManager's admission cap: 1 + the checkpoint page past the first block
                total += 1 + (self.state_checkpoint_pages if min(n, L) > B else 0)
            elif kind == "sliding_window":
                total += min(cdiv(min(n, L), B), cdiv(min(W - 1 + F, L), B) + 1)
            elif kind == "chunked_local":
                total += min(cdiv(min(n, L), B), cdiv(min(W + F, L), B))
            else:
                total += cdiv(min(n, L), B)
        return total
