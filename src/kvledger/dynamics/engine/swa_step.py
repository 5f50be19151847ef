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
computed token's state between steps (``get_num_skipped_tokens`` = computed − 1). A chunk that crosses a block boundary
keeps the page it reads until the next step. The prefill-checkpoint page (Mamba-2, FlashInfer GDN;
``get_num_blocks_to_allocate`` caps the new pages at 1 + checkpoint) is taken only by the chunk that reaches the prefill
end ``max(num_prompt_tokens, num_tokens − 1)`` (``_needs_internal_checkpoint``: with the default
``prefix_cache_retention_interval`` = 0 the coordinator passes the real prefill end) and only where the backend can
export it (``kv_cache_interface.py : is_mamba_prefill_checkpoint_valid``, hash block = Mamba block B): the chunk
starts on a block boundary and ends past the next one (checkpoint column ``cdiv(end, B) − 2`` > initial-state column
``(start − 1) // B``). Both extra pages are freed at the next step (``remove_skipped_blocks``). The admission check
counts 1 + the checkpoint page for a sequence longer than a block. A decode step that crosses a block boundary
(computed a multiple of the block) likewise holds the old page with the new one for that step; decode stretches,
which only add blocks, stop before such a step (``steps_before_crossing``), so the general step takes it and the next
frees the old page. With "none" (prefix caching off) a state group is always 1 page. With "all" (vLLM 0.19–0.27, models
implementing SupportsMambaPrefixCaching: ``state_per_block``) the base manager gives a state group a page per block of
the step's tokens, ``cdiv(computed + new, B)``, less the blocks before the last computed token's
(``get_num_skipped_tokens`` = computed − 1): a prefill chunk of k blocks holds k pages (one more when it starts past a
block's first token), a decode step 1, or 2 as it crosses a block; the admission and start-up checks count
``cdiv(tokens, B)`` (``MambaSpec.max_memory_usage_bytes``), as the plan does.

Block-aligned prefill chunks (vLLM 0.33 ``v1/core/sched/scheduler.py : Scheduler._mamba_block_aligned_split``, align
mode): a prefill chunk that stops short of the prefill end is cut to end on a multiple of B (when that leaves tokens,
or when B ≤ the step's token limit), so states are written on block boundaries; the chunk reaching the prefill end is
not cut, but without an internal checkpoint it stops at the last block boundary before ``num_tokens`` (and a chunk
starting mid-block at the next boundary); with prefix caching it also stops at the shared prefix's junction (the
request's ``shared_prefix_boundary``, block-floored; which releases do: ``accounting/mamba_prefix_rules.py``). Up to
0.31 the last stop is ``num_tokens − num_tokens % B`` (``state_split``, ``mamba_prefix_rules.SPLITS``)::

    B = 320, max_num_batched_tokens = 2048, a 5,000-token prompt (checkpoint page, GDN on Hopper):
      chunks 0→1920, 1920→3840 (2048 cut to 6 × 320), 3840→5000 (the last, 1160 tokens, takes the checkpoint page)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.accounting.mamba_prefix_rules import mamba_prefix_rule, mamba_split
from kvledger.dynamics.engine.swa_retention import DENSE, SlidingRetention, sliding_retention, with_interval
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
        retention: which sliding-window blocks the release keeps in its prefix cache (swa_retention.py).
        state_prefix: align mode: the release's Mamba prefix-cache rule (``mamba_prefix_rules.MambaPrefixRule``, from
            ``engine_version``); None: not known (no prefix hits are modelled for the state groups).
        state_split: the release's align-mode chunk split (a key of ``mamba_prefix_rules.SPLITS``).
        state_per_block: Mamba state groups in "all" mode: a page per block of the step's tokens (module doc).
    """

    groups: tuple[tuple[str, int, int], ...]
    max_model_len: int
    inflight_tokens: int
    state_boundary_page: bool = False
    state_checkpoint_pages: int = 0
    retention: SlidingRetention = DENSE
    state_prefix: Any = None
    state_split: str = "0.32"
    state_per_block: bool = False

    @classmethod
    def from_layout(cls, layout, max_model_len: int, inflight_tokens: int, engine_version: str | None = None,
                    retention_interval: int | None = None) -> StepBlockRule:
        """The layout's rule; ``engine_version``: the vLLM release whose sliding-window retention, Mamba prefix rule and
        chunk split apply; ``retention_interval``: ``--prefix-cache-retention-interval`` (0.29 on; before, the
        environment variable set: ``retention_flag.py``), tokens; None: the release's default."""
        state = [g for g in layout.groups if g.kind == "state"]
        align = [g for g in state if g.state_pages > 1 and not g.state_page_per_block]
        boundary, ck = bool(align), max((g.state_pages - 2 for g in align), default=0)
        prefix = mamba_prefix_rule(engine_version, retention_interval) if boundary and engine_version else None
        retention = sliding_retention(engine_version, retention_interval)
        retention = with_interval(retention, retention_interval) if retention_interval else retention
        return cls(tuple((g.kind, g.block_size, g.window_tokens) for g in layout.groups), max_model_len,
                   inflight_tokens, boundary, max(ck, 0), retention, prefix, mamba_split(engine_version),
                   any(g.state_page_per_block for g in state))

    @property
    def state_block_size(self) -> int:
        """B of the (first) state group, the scheduler's block size in a hybrid layout; 0 without one, tokens."""
        return next((B for kind, B, _ in self.groups if kind == "state"), 0)

    def state_pages(self, computed: int, new: int, block_size: int, at_end: bool = True) -> int:
        """Pages one state group holds once a step's ``new`` tokens after ``computed`` have their slots (module doc):
        1, + 1 where the step crosses a block boundary, + the checkpoint page where the chunk reaching the prefill end
        (``at_end``) can export it, pages."""
        t, B = computed + new, block_size
        if self.state_per_block:  # "all": a page per block, less those before the last computed token's
            return cdiv(t, B) - max(0, computed - 1) // B
        if not self.state_boundary_page:
            return 1
        crosses = computed > 0 and (computed - 1) // B != (t - 1) // B
        # a positive --prefix-cache-retention-interval: every chunk's checkpoint (the coordinator passes prefill_end 0)
        at_end = at_end or bool(self.state_prefix is not None and self.state_prefix.retention_interval)
        ck = at_end and self.state_checkpoint_pages and _checkpoint_valid(computed, t, (t - 1) // B * B, B)
        return 1 + int(crosses) + (self.state_checkpoint_pages if ck else 0)

    def aligned_chunk(self, start: int, new: int, num_prompt_tokens: int, num_tokens: int, max_tokens: int,
                      junction: int = 0) -> int:
        """vLLM's ``Scheduler._mamba_block_aligned_split`` (module doc; ``state_split``): the ``new`` tokens after
        ``start`` a prefill chunk keeps in align mode, ``max_tokens`` the step's token limit
        (``max_num_batched_tokens``), ``junction`` the request's ``shared_prefix_boundary`` (0: none), tokens (0: not
        scheduled this step)."""
        prefill_end = max(num_prompt_tokens, num_tokens - 1)
        if start >= prefill_end:
            return new
        B, end, split = self.state_block_size, start + new, self.state_split
        last = (num_tokens - 1) // B * B if split == "0.32" else num_tokens - num_tokens % B  # last_cache_position
        internal = (self.state_checkpoint_pages > 0 and end >= prefill_end
                    and _checkpoint_valid(start, end, (prefill_end - 1) // B * B, B))
        if end < prefill_end:  # ≤ 0.26 cuts only short of ``last``: the same chunks (mamba_prefix_rules.py)
            aligned = end // B * B
            if aligned > start or B <= max_tokens:
                end = aligned
        if not internal:  # stop at the next boundary (a mid-block start) and the last cacheable one
            for stop in ((start // B + 1) * B if start % B else 0, last):
                if start < stop < end:
                    end = stop
        if start < junction < end and start < (stop := start + (junction - start) // B * B):  # block-floored
            end = stop
        return max(end - start, 0)

    def steps_before_crossing(self, comp: list[int], rems: list[int], k: int) -> int:
        """Decode steps (≤ ``k``) of a stretch before the first in which a request (``comp[i]`` computed tokens at the
        start, ``rems[i]`` steps left) crosses a state group's block boundary and takes a second page, steps."""
        if not (self.state_boundary_page or self.state_per_block):
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

    def held_after(self, computed: int, new: int, at_end: bool = True) -> int:
        """Blocks held once a step's ``new`` tokens after ``computed`` have their slots, blocks (≥ ``steady``);
        ``at_end``: the chunk reaches the prefill end (a whole sequence does)."""
        t = computed + new
        total = 0
        for kind, B, W in self.groups:
            if kind == "state":
                total += self.state_pages(computed, new, B, at_end)
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
            if kind == "state" and self.state_per_block:  # "all": a page per block (the base manager's count)
                total += cdiv(min(n, L), B)
            elif kind == "state":  # MambaManager's admission cap: 1 + the checkpoint page past the first block
                total += 1 + (self.state_checkpoint_pages if min(n, L) > B else 0)
            elif kind == "sliding_window":
                total += min(cdiv(min(n, L), B), cdiv(min(W - 1 + F, L), B) + 1)
            elif kind == "chunked_local":
                total += min(cdiv(min(n, L), B), cdiv(min(W + F, L), B))
            else:
                total += cdiv(min(n, L), B)
        return total

    def startup(self, max_model_len: int) -> int:
        """Blocks vLLM's start-up check counts for one request of ``max_model_len``, blocks: each group's
        ``max_memory_usage_bytes`` in pages (0.33 ``kv_cache_interface.py``; 0.19 the same rule with F =
        max_num_batched_tokens), summed over groups — a sliding group at ``cdiv(min(W − 1 + F, L), B) + 1`` whether or
        not the request has that many blocks of tokens, which the runtime ``admission`` caps (Gemma-2-9B at L 8,192,
        W 4,096, F 4,096: 512 full + 513 sliding = 1,025 against admission's 1,024)."""
        L, F = max_model_len, self.inflight_tokens
        total = 0
        for kind, B, W in self.groups:
            if kind == "sliding_window":
                total += cdiv(min(W - 1 + F, L), B) + 1
            elif kind == "chunked_local":
                total += cdiv(min(W + F, L), B)
            elif kind != "state":
                total += cdiv(L, B)
        return total + sum(cdiv(L, B) if self.state_per_block else 1 + (self.state_checkpoint_pages if L > B else 0)
                           for kind, B, _ in self.groups if kind == "state")


def _checkpoint_valid(start: int, end: int, position: int, B: int) -> bool:
    """vLLM 0.33 ``is_mamba_prefill_checkpoint_valid`` with the hash block = the Mamba block ``B`` (a multiple of the
    checkpoint alignment, so that condition holds): can the chunk ``start → end`` export the state at ``position``."""
    return (start % B == 0 and -(-end // B) - 2 > (start - 1) // B and start + B <= position
            and start < position < end)
