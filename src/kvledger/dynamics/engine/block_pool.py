"""The exact KV block pool: block ids, the free queue in vLLM's eviction order, reference counts and cached hashes.

Behaviour follows vLLM v1 (``vllm/v1/core/block_pool.py::BlockPool`` and
``kv_cache_utils.py::FreeKVCacheBlockQueue``; docs/engine-model.md §2.3):

* Block ids are ``0 .. num_gpu_blocks-1``; block 0 is the *null block*, never free and
  never handed out, so ``num_gpu_blocks - 1`` blocks are usable.
* The free queue starts as ``1, 2, ..., num_gpu_blocks-1``. Allocation pops from the
  front; a popped block that still carries a cached hash loses it then (lazy eviction,
  ``_maybe_evict_cached_block``).
* Freeing takes a request's blocks in block-table order and releases them in *reverse*
  order (``single_type_kv_cache_manager.py::free``). With prefix caching on, released
  blocks that hold a hash (every full block) are appended to the tail (LRU order) and
  blocks without one (the partial last block) are prepended to the head, keeping their
  order (``free_blocks``: ``prepend_n`` then ``append_n``). With caching off every block
  is appended (vLLM PR #48017).
* A prefix-cache hit on a block whose ref count is 0 takes it out of the free queue
  (``touch``).

Speed. The simulator moves millions of blocks, so the pool stores reference counts only
for blocks registered in the hash map (the only blocks two requests can share). Every
other block in use is held by exactly one request (ref count 1) and is freed with C-level
list operations: the queue is a Python list with a moving head index, so taking ``n``
blocks is one slice. Removing a touched block from the middle of the queue is done
lazily: its old queue entry is counted as stale and skipped when it reaches the front. A
block with a stale entry is always registered, so it returns to the queue by ``append``
and its live entry is always behind its stale ones.

Cache keys are Python ints (``hash`` of tuples, see ``kv_manager.py``), not sha256: a
simulation has no adversary, and 64-bit collisions are negligible at these sizes.
"""

from __future__ import annotations

__all__ = ["BlockPool", "NULL_BLOCK_ID"]

NULL_BLOCK_ID = 0


class BlockPool:
    """Blocks ``0..num_gpu_blocks-1`` with vLLM's free queue, ref counts and hash map.

    Args:
        num_gpu_blocks: blocks in the pool, count (≥ 2: the null block plus one usable).
        enable_caching: prefix caching on (changes only the order freed blocks re-enter the queue).

    Use "check first, then commit": compare ``num_free_blocks`` with what you need before
    calling :meth:`allocate`, which raises ``RuntimeError`` on a shortfall (a simulator bug).
    """

    def __init__(self, num_gpu_blocks: int, enable_caching: bool) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(f"num_gpu_blocks must be ≥ 2 (the null block + 1), got {num_gpu_blocks}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self._queue: list[int] = list(range(1, num_gpu_blocks))  # free queue is _queue[_head:]
        self._head = 0
        self._stale: dict[int, int] = {}  # block id -> stale entries of it still in the queue
        self._num_stale = 0
        self._ref: dict[int, int] = {}  # ref counts of registered (cached) blocks only
        self._key_of: dict[int, int] = {}  # registered block id -> cache key
        self._blocks_of: dict[int, dict[int, None]] = {}  # cache key -> block ids (first = the one hits use)
        self.num_evictions = 0  # cached blocks whose hash was dropped on reuse, count

    # ---------------------------------------------------------------- queries
    @property
    def num_usable_blocks(self) -> int:
        """Blocks that can ever be allocated (all but the null block), count."""
        return self.num_gpu_blocks - 1

    @property
    def num_free_blocks(self) -> int:
        """Blocks in the free queue (cached blocks with ref count 0 included), count."""
        return len(self._queue) - self._head - self._num_stale

    @property
    def num_used_blocks(self) -> int:
        """Blocks held by at least one request, count (vLLM's KV usage numerator; usable − free, inline: a hot path)."""
        return self.num_gpu_blocks - 1 - len(self._queue) + self._head + self._num_stale

    @property
    def num_cached_blocks(self) -> int:
        """Blocks registered in the hash map (held or free), count."""
        return len(self._key_of)

    @property
    def is_uncached(self) -> bool:
        """No block is registered and no stale entry waits in the queue: free blocks are interchangeable and
        ``allocate`` takes the queue's front as one slice."""
        return not self._key_of and not self._num_stale

    def num_in_free_queue(self, cached_ids: list[int]) -> int:
        """Registered blocks among ``cached_ids`` with ref count 0 (they sit in the free queue), count."""
        ref = self._ref
        return sum(1 for b in cached_ids if ref[b] == 0)

    def num_freed_by_release(self, block_ids) -> int:
        """Blocks of ``block_ids`` that one release each returns to the free queue (an unregistered block is held by one
        request; a registered one returns when its ref count is 1), count."""
        ref = self._ref
        return sum(1 for b in block_ids if ref.get(b, 1) <= 1)

    def get_cached_block(self, key: int) -> int | None:
        """The block a prefix hit on ``key`` uses (the first registered), or None. Does not mutate."""
        ids = self._blocks_of.get(key)
        return None if ids is None else next(iter(ids))

    def cached_prefix(self, keys: list[int], n: int) -> list[int]:
        """Blocks of the longest run of ``keys[:n]`` all cached (``get_cached_block`` in a loop); no mutation."""
        get = self._blocks_of.get
        hits: list[int] = []
        for k in keys[:n]:
            ids = get(k)
            if ids is None:
                break
            hits.append(next(iter(ids)))
        return hits

    def is_cached(self, block_id: int) -> bool:
        """True when the block is registered under a cache key."""
        return block_id in self._key_of

    def key_of(self, block_id: int) -> int | None:
        """The cache key of a registered block, else None."""
        return self._key_of.get(block_id)

    def ref_cnt(self, block_id: int) -> int:
        """Reference count of one block, count (O(1) for cached blocks; O(N) otherwise, for tests)."""
        if block_id in self._ref:
            return self._ref[block_id]
        if block_id == NULL_BLOCK_ID:
            return 0
        return 0 if block_id in set(self.free_block_ids()) else 1

    def free_block_ids(self) -> list[int]:
        """The free queue, front (next allocated) to back, stale entries skipped; O(N), for tests and debugging."""
        skip = dict(self._stale)
        out = []
        for b in self._queue[self._head:]:
            if skip.get(b, 0) > 0:
                skip[b] -= 1
            else:
                out.append(b)
        return out

    # -------------------------------------------------------------- mutations
    def allocate(self, n: int) -> list[int]:
        """Pop ``n`` blocks from the front of the free queue, dropping any cached hash they carry.

        Returns the block ids in pop order; each now has ref count 1. Raises ``RuntimeError``
        when fewer than ``n`` blocks are free (callers check first).
        """
        q, h = self._queue, self._head
        if n <= 0:
            return []
        if n > len(q) - h - self._num_stale:
            raise RuntimeError(f"block pool: asked for {n} blocks, {self.num_free_blocks} free")
        if self._num_stale == 0:
            ids = q[h: h + n]
            self._head = h + n
            if self._key_of:
                for b in [b for b in ids if b in self._key_of]:
                    self._evict(b)
            if self._head > 4096 and self._head * 2 > len(q):
                del q[: self._head]
                self._head = 0
            return ids
        ids = []
        stale = self._stale
        while len(ids) < n:
            b = q[h]
            h += 1
            s = stale.get(b, 0)
            if s:
                if s == 1:
                    del stale[b]
                else:
                    stale[b] = s - 1
                self._num_stale -= 1
                continue
            if b in self._key_of:
                self._evict(b)
            ids.append(b)
        self._head = h
        return ids

    def _evict(self, b: int) -> None:
        key = self._key_of.pop(b)
        del self._ref[b]
        ids = self._blocks_of[key]
        del ids[b]
        if not ids:
            del self._blocks_of[key]
        self.num_evictions += 1

    def register(self, block_id: int, key: int) -> None:
        """Record that ``block_id`` (full, held by exactly one request) holds the content ``key``.

        A second block with the same key is kept as a duplicate, as vLLM does; hits use the first.
        """
        if block_id in self._key_of:
            raise RuntimeError(f"block {block_id} is already cached")
        self._key_of[block_id] = key
        self._ref[block_id] = 1
        ids = self._blocks_of.get(key)
        if ids is None:
            self._blocks_of[key] = {block_id: None}
        else:
            ids[block_id] = None

    def touch(self, block_ids: list[int]) -> None:
        """Take a reference on cached blocks hit by a request; a block with ref count 0 leaves the free queue."""
        ref = self._ref
        for b in block_ids:
            r = ref[b]
            if r == 0:
                self._stale[b] = self._stale.get(b, 0) + 1
                self._num_stale += 1
            ref[b] = r + 1

    def free(self, block_ids: list[int], num_registered: int, num_hashed: int) -> None:
        """Release one request's blocks, given in block-table order.

        Args:
            block_ids: the request's blocks, block-table order.
            num_registered: the leading blocks that are registered cache blocks (may be shared), count.
            num_hashed: the leading blocks that are full and so carry a hash in vLLM, count
                (≥ ``num_registered``); ignored when caching is off.

        Blocks are released last-to-first; with caching on, the unhashed tail goes to the
        head of the queue and hashed blocks whose ref count reaches 0 to the tail.
        """
        q = self._queue
        if not self.enable_caching:
            q.extend(reversed(block_ids))
            return
        # the unregistered blocks: unhashed tail to the head, hashed ones to the tail (free_unregistered's rule)
        self.free_unregistered([(block_ids[num_registered:] if num_registered else block_ids,
                                 num_hashed - num_registered)])
        if num_registered:
            ref = self._ref
            for i in range(num_registered - 1, -1, -1):
                b = block_ids[i]
                r = ref[b] - 1
                ref[b] = r
                if r == 0:
                    q.append(b)
                elif r < 0:
                    raise RuntimeError(f"block {b}: ref count below 0")

    def free_unregistered(self, batch: list[tuple[list[int], int]]) -> None:
        """``free(block_ids, 0, num_hashed)`` for each ``(block_ids, num_hashed)`` of ``batch``, in order, done at once.

        Each free sends its full blocks to the tail of the queue (last first) and its unhashed tail to the head; tails
        and heads do not interact, so the heads of later frees end up first and the tails follow in order.
        """
        q = self._queue
        if not self.enable_caching:
            for ids, _ in batch:
                q.extend(reversed(ids))
            return
        heads = []  # each free's unhashed blocks, last first; later frees' go in front
        for ids, nh in batch:
            tail = len(ids) - nh
            if tail == 1:  # the common case: one partial block
                heads.append((ids[-1],))
            elif tail:
                heads.append(ids[:nh - 1 if nh else None:-1])
            if nh:
                q += ids[nh - 1::-1]
        if heads:
            self._prepend([b for ids in reversed(heads) for b in ids])

    def _prepend(self, ids: list[int]) -> None:
        """Put ``ids`` at the front of the free queue, ``ids[0]`` first (vLLM ``prepend_n``)."""
        m, h = len(ids), self._head
        if m <= h:
            self._queue[h - m: h] = ids
            self._head = h - m
        else:
            self._queue[:h] = ids
            self._head = 0
