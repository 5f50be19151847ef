"""The block-count views a KV manager built on one BlockPool reports (``PoolUsage``: paged and hybrid managers)."""

from __future__ import annotations

from kvledger.dynamics.engine.block_pool import BlockPool

__all__ = ["PoolUsage"]


class PoolUsage:
    """The block-count views a KV manager built on one :class:`BlockPool` (``self.pool``) reports, shared by the
    paged and the hybrid manager: capacity, free and used blocks, and vLLM's "KV cache usage"."""

    pool: BlockPool
    block_size: int

    @property
    def capacity_blocks(self) -> int:
        return self.pool.num_usable_blocks

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        """Blocks held by at least one request, count."""
        return self.pool.num_used_blocks

    @property
    def allocatable_tokens(self) -> int:
        """Token slots an allocation can get now: the free blocks (cached ones with ref count 0 included), tokens."""
        return self.pool.num_free_blocks * self.block_size

    def admission_hold_tokens(self, handle) -> int:
        """0: on a block pool the SGLang admission check keeps counting cached hit blocks as free (a simplification:
        taking them does take them out of ``allocatable_tokens``), tokens."""
        return 0

    @property
    def usage(self) -> float:
        """Share of usable blocks held by requests (vLLM's "KV cache usage"), fraction."""
        return self.num_used_blocks / self.pool.num_usable_blocks
