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
    """

    groups: tuple[tuple[str, int, int], ...]
    max_model_len: int
    inflight_tokens: int

    @classmethod
    def from_layout(cls, layout, max_model_len: int, inflight_tokens: int) -> StepBlockRule:
        return cls(tuple((g.kind, g.block_size, g.window_tokens) for g in layout.groups), max_model_len,
                   inflight_tokens)

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
                total += 1
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
            if kind == "state":
                total += 1
            elif kind == "sliding_window":
                total += min(cdiv(min(n, L), B), cdiv(min(W - 1 + F, L), B) + 1)
            elif kind == "chunked_local":
                total += min(cdiv(min(n, L), B), cdiv(min(W + F, L), B))
            else:
                total += cdiv(min(n, L), B)
        return total
