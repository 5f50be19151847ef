"""The shapes of vLLM's paged KV layout: an allocation group (``AllocGroup``) and the layout of groups (``KVLayout``).

Built by kvlayout.py (``vllm_layout``) and kvlayout_packed.py (DeepSeek-V4's packed layout).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.units import cdiv

__all__ = ["AllocGroup", "KVLayout"]


@dataclass(frozen=True)
class AllocGroup:
    """One KV cache group: ``slots`` layer slots drawing block ids from the shared pool.

    Attributes:
        kind: "full", "sliding_window", "chunked_local", "mla" or "state".
        num_layers: real layers in this group (≤ slots; the rest are padding), count.
        slots: layer slots per physical block (the layout's group_size), count.
        block_size: tokens per block for this group, tokens.
        page_bytes: bytes one layer spends on one block, B.
        window_tokens: sliding window W or chunk C, tokens (0 otherwise).
        state_pages: for a "state" group, the pages one request may claim: 1 with ``mamba_cache_mode`` "none",
            2 + prefill-checkpoint pages with "align" (``vllm/v1/kv_cache_interface.py :
            MambaSpec.max_memory_usage_bytes``; see ``vllm_rules.mamba_cache_rule``), pages.
        state_page_per_block: "all" mode (vLLM 0.19–0.27): a state group keeps a page per block of tokens and
            a request may claim cdiv(max_model_len, block_size) of them, like full attention.
    """

    kind: str
    num_layers: int
    slots: int
    block_size: int
    page_bytes: int
    window_tokens: int = 0
    state_pages: int = 1
    state_page_per_block: bool = False

    def blocks_per_request(self, max_model_len: int, inflight_tokens: int) -> int:
        """Blocks one request may need at ``max_model_len`` (spec ``max_memory_usage_bytes / page``)."""
        B, L = self.block_size, max_model_len
        if self.kind == "sliding_window":
            return cdiv(min(self.window_tokens - 1 + inflight_tokens, L), B) + 1
        if self.kind == "chunked_local":
            return cdiv(min(self.window_tokens + inflight_tokens, L), B)
        if self.kind == "state":  # 1 ("none") or 2 + checkpoint ("align") whatever L; "all": one per block
            return cdiv(L, B) if self.state_page_per_block else self.state_pages
        return cdiv(L, B)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        """Blocks a running request holds after ``num_tokens`` computed tokens (steady state, out-of-window blocks
        freed).

        A state group holds one page between steps in every Mamba mode: in "align" mode
        ``vllm/v1/core/single_type_kv_cache_manager.py : MambaManager.remove_skipped_blocks`` frees (into the
        prefix cache) every state before the last computed token's, so the second page of ``state_pages`` is
        only held while a step crosses a block boundary, and the checkpoint page only during a prefill chunk;
        in "all" mode the base ``remove_skipped_blocks`` frees the blocks before the last computed token
        (``MambaManager.get_num_skipped_tokens`` = computed − 1).
        """
        B = self.block_size
        if self.kind == "state":
            return 1
        if self.kind == "sliding_window":
            return min(cdiv(num_tokens, B), cdiv(self.window_tokens - 1, B) + 1)
        if self.kind == "chunked_local":  # ChunkedLocalAttentionManager skips ⌊n / C⌋ · C tokens: the current chunk
            C = self.window_tokens  # (≤ C tokens with the next one) on a block grid: C / B blocks when B divides C
            return min(cdiv(num_tokens, B), C // B if C % B == 0 else cdiv(C - 1, B) + 1)
        return cdiv(num_tokens, B)


@dataclass(frozen=True)
class KVLayout:
    """The paged layout of one GPU's KV pool.

    Attributes:
        groups: the KV cache groups. bytes_per_block: bytes of one physical block across all slots, B.
        block_size: tokens per block of the attention groups (the smallest if they differ), tokens.
        padding_layers: layer slots with no layer behind them (wasted), count.
        notes: how the layout was decided.
        global_layout: under pipeline parallelism, the whole model's layout (the global KV cache groups vLLM builds
            from every stage's layers), which vLLM 0.14.0–0.16.0's start-up check reads (``vllm_check_demand``);
            None otherwise. Not in JSON.
    """

    __json__ = ("bytes_per_block", "block_size", "padding_layers", "num_groups", "notes", "groups")
    groups: tuple[AllocGroup, ...]
    bytes_per_block: int
    block_size: int
    padding_layers: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    global_layout: KVLayout | None = None

    def blocks_per_request(self, max_model_len: int, inflight_tokens: int) -> int:
        """R(L): Σ over groups of the blocks one request may need, blocks (docs/engine-model.md §1.7)."""
        return sum(g.blocks_per_request(max_model_len, inflight_tokens) for g in self.groups)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        """Blocks a request holds after ``num_tokens`` computed tokens, summed over groups, blocks."""
        return sum(g.blocks_for_tokens(num_tokens) for g in self.groups)

    @property
    def num_groups(self) -> int:
        return len(self.groups)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
