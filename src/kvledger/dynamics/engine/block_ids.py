"""The block ids a new pool's free queue starts with, written to its queue list only as allocation reaches them.

A new pool's free queue is ``1 .. num_gpu_blocks − 1`` (block_pool.py). A configuration search builds a pool per probe
of up to ~10⁶ blocks, of which a run uses a few thousand: making and freeing a list of them all cost ~5–30 ms a run (an
int object each), most of it for ids never handed out. So the queue is ``_queue[_head:]`` (prepends and the ids written
so far), then the ids not yet written (``_fresh`` … ``num_gpu_blocks − 1``), then ``_tail`` (blocks appended while some
are unwritten): the same order, the same ids handed out.
"""

from __future__ import annotations

__all__ = ["UnwrittenIds", "FRESH_CHUNK"]

FRESH_CHUNK = 4096  # never-used ids written to the queue list at a time


class UnwrittenIds:
    """The pool's queue fields (``_queue``, ``_head``, ``_fresh``, ``_tail``) and the two steps that write ids."""

    num_gpu_blocks: int
    _queue: list[int]
    _head: int

    def start_queue(self) -> None:
        """An empty list, every usable id unwritten, no tail."""
        self._queue, self._head, self._fresh, self._tail = [], 0, 1, []

    def _refill(self, n: int) -> None:
        """Write unwritten ids to the list until it holds ``n`` entries past the head (at least ``FRESH_CHUNK`` ids, or
        all that are left; then the tail behind them)."""
        q, f, end = self._queue, self._fresh, self.num_gpu_blocks
        k = min(max(n - (len(q) - self._head), FRESH_CHUNK), end - f)
        q += range(f, f + k)
        self._fresh = f + k
        if f + k == end:
            q += self._tail
            self._tail = []

    def materialize_fresh(self) -> None:
        """Write every unwritten id and the tail to the list (before a stale entry can arise: ``BlockPool.touch``)."""
        if self._fresh < self.num_gpu_blocks:
            self._refill(self.num_gpu_blocks)
