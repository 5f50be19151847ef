"""The exact KV block pool: block ids, the free queue in vLLM's eviction order, reference counts and cached hashes.

Behaviour follows vLLM v1 (``vllm/v1/core/block_pool.py::BlockPool`` and ``kv_cache_utils.py::FreeKVCacheBlockQueue``;
docs/engine-model.md §2.3):

* Block ids are ``0 .. num_gpu_blocks-1``; block 0 is the *null block*, never free and never handed out, so
  ``num_gpu_blocks - 1`` blocks are usable.
* The free queue starts as ``1, 2, ..., num_gpu_blocks-1``. Allocation pops from the front; a popped block that still
  carries a cached hash loses it then (lazy eviction, ``_maybe_evict_cached_block``).
* Freeing takes a request's blocks in block-table order and releases them in *reverse* order
  (``single_type_kv_cache_manager.py::free``). With prefix caching on, released blocks that hold a hash (every full
  block) are appended to the tail (LRU order) and blocks without one (the partial last block) are prepended to the
  head, keeping their order (``free_blocks``: ``prepend_n`` then ``append_n``). With caching off every block is
  appended (vLLM PR #48017).
* A prefix-cache hit on a block whose ref count is 0 takes it out of the free queue (``touch``).

Speed. The pool keeps ref counts only for blocks registered in the hash map (the only ones two requests can share),
in lists indexed by block id (faster than dicts). Every other block in use is held by one request (ref count 1) and is
freed with C-level list operations: the queue is a list with a moving head index (ids no allocation has reached are not
written yet: block_ids.py), so taking ``n`` blocks is one slice; a touched block's entry turns stale (then skipped).

Cache keys are Python ints (``hash`` of tuples, see ``kv_manager.py``), not sha256: a simulation has no adversary, and
64-bit collisions are negligible at these sizes. vLLM's key -> blocks map is kept as each key's first block (the one
hits use) plus a list of later duplicates, so that runs of blocks are looked up, touched, registered and released with
C-level dict and list operations (``map``, ``update``).

Prefix-closed: a chain's cached keys (one request's block keys; a key fixes the keys before it) are always a prefix of
it, so ``cached_prefix_len`` bisects. Registration extends a run the request holds; a block with key ``i`` enters the
free queue no later than some block with key ``i−1`` (a request releases its blocks last to first; a hit on ``i``
takes ``i−1``'s hit block too), and eviction takes the queue's front, so ``i`` leaves the cache no later than ``i−1``.
"""

from __future__ import annotations

from collections import deque
from itertools import compress, filterfalse, repeat
from operator import is_not

from kvledger.dynamics.engine.block_ids import UnwrittenIds

__all__ = ["BlockPool", "NULL_BLOCK_ID"]

NULL_BLOCK_ID = 0
HEAD_ROOM = 1024  # free-queue entries kept before the head when the used front is dropped (else a prepend inserts)


class BlockPool(UnwrittenIds):
    """Blocks ``0..num_gpu_blocks-1`` with vLLM's free queue, ref counts and hash map.

    Args:
        num_gpu_blocks: blocks in the pool, count (≥ 2: the null block plus one usable).
        enable_caching: prefix caching on (changes only the order freed blocks re-enter the queue).

    Use "check first, then commit": compare ``num_free_blocks`` with what you need before calling :meth:`allocate`,
    which raises ``RuntimeError`` on a shortfall (a simulator bug).
    """

    def __init__(self, num_gpu_blocks: int, enable_caching: bool) -> None:
        if num_gpu_blocks < 2:
            raise ValueError(f"num_gpu_blocks must be ≥ 2 (the null block + 1), got {num_gpu_blocks}")
        self.num_gpu_blocks = num_gpu_blocks
        self.enable_caching = enable_caching
        self.start_queue()  # the free queue: _queue[_head:], the ids not yet written, _tail (block_ids.py)
        self._stale: list[int] = [0] * num_gpu_blocks  # per block id: its stale entries still in the queue
        self._num_stale = 0
        self._ref: list[int] = [0] * num_gpu_blocks  # per block id: ref count (kept for registered blocks only)
        self._key_of: list[int | None] = [None] * num_gpu_blocks  # per block id: cache key (None: not registered)
        self._num_cached = 0  # registered blocks, count
        self._first: dict[int, int] = {}  # cache key -> the first registered block (the one hits use)
        self._dups: dict[int, list[int]] = {}  # cache key -> its later registered blocks, in registration order
        self.num_evictions = 0  # cached blocks whose hash was dropped on reuse, count

    @property
    def num_usable_blocks(self) -> int:
        """Blocks that can ever be allocated (all but the null block), count."""
        return self.num_gpu_blocks - 1

    @property
    def num_free_blocks(self) -> int:
        """Blocks in the free queue (cached blocks with ref count 0 included), count."""
        return len(self._queue) - self._head - self._num_stale + self.num_gpu_blocks - self._fresh + len(self._tail)

    @property
    def num_used_blocks(self) -> int:
        """Blocks held by at least one request, count (vLLM's KV usage numerator; usable − free, inline: a hot path)."""
        return self._fresh - 1 - len(self._queue) + self._head + self._num_stale - len(self._tail)

    @property
    def num_cached_blocks(self) -> int:
        """Blocks registered in the hash map (held or free), count."""
        return self._num_cached

    @property
    def is_uncached(self) -> bool:
        """No block registered, no stale queue entry: free blocks are interchangeable (``allocate``: one slice)."""
        return not self._num_cached and not self._num_stale

    def num_in_free_queue(self, cached_ids: list[int]) -> int:
        """Registered blocks among ``cached_ids`` with ref count 0 (they sit in the free queue), count."""
        return self.refs_of(cached_ids).count(0)

    def refs_of(self, cached_ids: list[int]) -> list[int]:
        """Ref counts of registered blocks, count each (``touch`` takes them back, to look them up once)."""
        return list(map(self._ref.__getitem__, cached_ids))

    def num_freed_by_release(self, block_ids) -> int:
        """Blocks of ``block_ids`` that one release each returns to the free queue (an unregistered block is held by one
        request; a registered one returns when its ref count is 1), count."""
        return sum(1 for b in block_ids if self._key_of[b] is None or self._ref[b] <= 1)

    def get_cached_block(self, key: int) -> int | None:
        """The block a prefix hit on ``key`` uses (the first registered), or None. Does not mutate."""
        return self._first.get(key)

    def blocks_with_key(self, key: int) -> list[int]:
        """Every registered block holding ``key``, the one hits use first (for tests and debugging)."""
        return [self._first[key], *self._dups.get(key, ())] if key in self._first else []

    def cached_prefix(self, keys: list[int], n: int) -> list[int]:
        """Blocks of the longest cached run of one request's chained ``keys[:n]`` (``get_cached_block``s)."""
        return list(map(self._first.__getitem__, keys[:self.cached_prefix_len(keys, n)]))

    def cached_prefix_len(self, keys: list[int], n: int) -> int:
        """Length of the longest run of ``keys[:n]`` all cached, blocks, for one request's chained keys: found by
        bisection, since a chain's cached keys are always a prefix of it (module doc, "Prefix-closed")."""
        first = self._first
        if n <= 0 or keys[0] not in first:
            return 0
        lo, hi = 0, n  # keys[lo] cached; keys[hi] not (or hi = n)
        while hi - lo > 1:
            mid = (lo + hi) >> 1
            lo, hi = (mid, hi) if keys[mid] in first else (lo, mid)
        return hi

    def is_cached(self, block_id: int) -> bool:
        """True when the block is registered under a cache key."""
        return self._key_of[block_id] is not None

    def key_of(self, block_id: int) -> int | None:
        """The cache key of a registered block, else None."""
        return self._key_of[block_id]

    def ref_cnt(self, block_id: int) -> int:
        """Reference count of one block, count (O(1) for cached blocks; O(N) otherwise, for tests)."""
        if self._key_of[block_id] is not None:
            return self._ref[block_id]
        return 0 if block_id == NULL_BLOCK_ID or block_id in set(self.free_block_ids()) else 1

    def free_block_ids(self) -> list[int]:
        """The free queue, front (next allocated) to back, stale entries skipped; O(N), for tests and debugging."""
        self.materialize_fresh()
        skip, out = list(self._stale), []
        for b in self._queue[self._head:]:
            if skip[b] > 0:
                skip[b] -= 1
            else:
                out.append(b)
        return out

    def allocate(self, n: int) -> list[int]:
        """Pop ``n`` blocks from the front of the free queue, dropping any cached hash they carry: the block ids in pop
        order, each with ref count 1. Raises ``RuntimeError`` when fewer than ``n`` are free (callers check first)."""
        q, h = self._queue, self._head
        if n <= 0:
            return []
        if n > self.num_free_blocks:
            raise RuntimeError(f"block pool: asked for {n} blocks, {self.num_free_blocks} free")
        if n > len(q) - h and self._fresh < self.num_gpu_blocks:  # unwritten ids next (no stale entry: touch wrote all)
            self._refill(n)
        if self._num_stale == 0:
            ids = q[h: h + n]
            h += n
        else:  # skip stale entries; a block's live entry is behind its stale ones, maybe in the same chunk
            ids, stale = [], self._stale
            while len(ids) < n:
                chunk = q[h: h + n - len(ids)]
                skip = list(filter(stale.__getitem__, chunk))
                if len(set(skip)) < len(skip):  # a block twice in the chunk: one entry at a time
                    chunk, skip = chunk[:1], [b for b in chunk[:1] if stale[b]]
                h += len(chunk)  # each of ``skip`` is once in the chunk, so that entry is stale
                if skip:
                    ids += filterfalse(set(skip).__contains__, chunk)
                    deque(map(stale.__setitem__, skip, map((-1).__add__, map(stale.__getitem__, skip))), 0)
                else:
                    ids += chunk
                self._num_stale -= len(skip)
        self._head = h
        if self._num_cached:  # each block's key (None: not cached)
            keys = list(map(self._key_of.__getitem__, ids))
            if None not in keys:
                self._evict(ids, keys)
            elif keys.count(None) < n:
                live = list(map(is_not, keys, repeat(None)))
                self._evict(list(compress(ids, live)), list(compress(keys, live)))
        if self._num_stale == 0 and h > 4096 and h * 2 > len(q):  # drop the used front, HEAD_ROOM kept for prepends
            del q[:h - HEAD_ROOM]
            self._head = HEAD_ROOM
        return ids

    def _evict(self, blocks: list[int], keys: list[int]) -> None:
        """Drop the cache ``keys`` of registered ``blocks`` (being reallocated; vLLM ``_maybe_evict_cached_block``)."""
        deque(map(self._key_of.__setitem__, blocks, repeat(None)), 0)
        self._num_cached -= len(blocks)
        first, dups = self._first, self._dups
        if dups.keys().isdisjoint(keys):
            deque(map(first.pop, keys), 0)
        else:
            for b, key in zip(blocks, keys):
                later = dups.get(key)
                if first[key] != b:
                    later.remove(b)
                elif later:
                    first[key] = later.pop(0)
                else:
                    del first[key]
                if later is not None and not later:
                    del dups[key]
        self.num_evictions += len(blocks)

    def register(self, block_id: int, key: int) -> None:
        """``block_id`` (full, held by one request) holds ``key``; later ones with it are duplicates (hits: first)."""
        self.register_run([block_id], [key])

    def register_run(self, block_ids: list[int], keys: list[int]) -> None:
        """``register(b, k)`` for each pair in order; ``keys`` distinct (one request's chained block keys)."""
        key_of, first = self._key_of, self._first
        if any(map(is_not, map(key_of.__getitem__, block_ids), repeat(None))):
            raise RuntimeError(f"block {next(b for b in block_ids if key_of[b] is not None)} is already cached")
        deque(map(key_of.__setitem__, block_ids, keys), 0)
        deque(map(self._ref.__setitem__, block_ids, repeat(1)), 0)
        self._num_cached += len(block_ids)
        if first.keys().isdisjoint(keys):
            first.update(zip(keys, block_ids))
            return
        for b, key in zip(block_ids, keys):
            if key in first:
                self._dups.setdefault(key, []).append(b)
            else:
                first[key] = b

    def touch(self, block_ids: list[int], refs: list[int] | None = None) -> None:
        """Take a reference on cached blocks hit by a request (distinct); a block with ref count 0 leaves the free
        queue. ``refs``: their ref counts now (``refs_of``), if already looked up."""
        ref = self._ref
        refs = list(map(ref.__getitem__, block_ids)) if refs is None else refs
        if 0 in refs:
            self.materialize_fresh()
            zero = list(compress(block_ids, map((0).__eq__, refs)))
            stale = self._stale
            deque(map(stale.__setitem__, zero, map((1).__add__, map(stale.__getitem__, zero))), 0)
            self._num_stale += len(zero)
        deque(map(ref.__setitem__, block_ids, map((1).__add__, refs)), 0)

    def free(self, block_ids: list[int], num_registered: int, num_hashed: int) -> None:
        """Release one request's ``block_ids`` (block-table order) last to first; with caching on, the unhashed tail
        goes to the head of the queue and hashed blocks whose ref count reaches 0 to the tail. ``num_registered``: the
        leading registered cache blocks (may be shared); ``num_hashed``: the leading full blocks (a hash in vLLM; ≥
        ``num_registered``; ignored with caching off), counts."""
        q = self._queue if self._fresh == self.num_gpu_blocks else self._tail  # appends go behind never-used ids
        if not self.enable_caching:
            q.extend(reversed(block_ids))
            return
        # the unregistered blocks: unhashed tail to the head, hashed ones to the tail (free_unregistered's rule)
        self.free_unregistered([(block_ids[num_registered:] if num_registered else block_ids,
                                 num_hashed - num_registered)])
        if num_registered:
            ref, regs = self._ref, block_ids[num_registered - 1::-1]
            refs = list(map(ref.__getitem__, regs))
            if 0 in refs:
                raise RuntimeError(f"block {regs[refs.index(0)]}: ref count below 0")
            deque(map(ref.__setitem__, regs, map((-1).__add__, refs)), 0)
            q += compress(regs, map((1).__eq__, refs))

    def free_unregistered(self, batch: list[tuple[list[int], int]]) -> None:
        """``free(block_ids, 0, num_hashed)`` for each ``(block_ids, num_hashed)`` of ``batch``, in order, done at once:
        each free sends its full blocks to the tail of the queue (last first) and its unhashed tail to the head; tails
        and heads do not interact, so the heads of later frees end up first and the tails follow in order."""
        q = self._queue if self._fresh == self.num_gpu_blocks else self._tail  # appends go behind never-used ids
        if not self.enable_caching:
            for ids, _ in batch:
                q.extend(reversed(ids))
            return
        tails = []  # each free's unhashed blocks, frees in order; reversed: later frees' first, each last block first
        for ids, nh in batch:
            if len(ids) > nh:  # usually one partial block
                tails += ids[nh:]
            if nh:
                q += ids[nh - 1::-1]
        if tails:
            self._prepend(tails[::-1])

    def _prepend(self, ids: list[int]) -> None:
        """Put ``ids`` at the front of the free queue, ``ids[0]`` first (vLLM ``prepend_n``)."""
        m, h = len(ids), self._head
        if m <= h:
            self._queue[h - m: h] = ids
            self._head = h - m
        else:
            self._queue[:h] = ids
            self._head = 0
