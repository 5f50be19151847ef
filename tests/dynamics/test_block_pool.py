"""BlockPool: exact block ids, vLLM's free-queue order, lazy eviction, ref counts; a Hypothesis state machine for the
invariants."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvledger.dynamics.engine.block_pool import BlockPool


def test_null_block_is_never_free_and_allocation_pops_the_front():
    pool = BlockPool(6, enable_caching=True)
    # vLLM BlockPool: block 0 is the null block; the free queue starts 1..5
    assert pool.free_block_ids() == [1, 2, 3, 4, 5]
    assert pool.num_free_blocks == 5 and pool.num_used_blocks == 0
    assert pool.allocate(2) == [1, 2]
    assert pool.free_block_ids() == [3, 4, 5]
    assert pool.ref_cnt(1) == 1 and pool.ref_cnt(3) == 0


def test_free_with_caching_prepends_the_partial_block_and_appends_full_ones_tail_first():
    pool = BlockPool(6, enable_caching=True)
    blocks = pool.allocate(3)  # [1, 2, 3]: blocks 1, 2 full (hashed), 3 partial
    pool.free(blocks, num_registered=0, num_hashed=2)
    # released in reverse order 3, 2, 1: unhashed [3] → head (prepend_n); hashed [2, 1] → tail (append_n)
    assert pool.free_block_ids() == [3, 4, 5, 2, 1]


def test_free_without_caching_appends_everything_in_reverse():
    pool = BlockPool(6, enable_caching=False)
    blocks = pool.allocate(3)
    pool.free(blocks, num_registered=0, num_hashed=2)  # num_hashed ignored with caching off (vLLM PR #48017)
    assert pool.free_block_ids() == [4, 5, 3, 2, 1]


def test_two_partial_blocks_keep_their_order_at_the_head():
    pool = BlockPool(8, enable_caching=True)
    blocks = pool.allocate(4)  # [1, 2, 3, 4], only block 1 hashed
    pool.free(blocks, num_registered=0, num_hashed=1)
    # reversed: 4, 3, 2 unhashed → prepend_n([4, 3, 2]) keeps that order at the head; 1 hashed → tail
    assert pool.free_block_ids() == [4, 3, 2, 5, 6, 7, 1]


def test_cached_block_keeps_its_hash_until_reallocated_then_is_evicted_lazily():
    pool = BlockPool(4, enable_caching=True)  # free: 1, 2, 3
    a = pool.allocate(1)
    pool.register(a[0], key=111)
    pool.free(a, num_registered=1, num_hashed=1)  # queue: 2, 3, 1 — block 1 still cached
    assert pool.get_cached_block(111) == 1 and pool.free_block_ids() == [2, 3, 1]
    assert pool.allocate(2) == [2, 3]
    assert pool.get_cached_block(111) == 1 and pool.num_evictions == 0
    assert pool.allocate(1) == [1]  # popping block 1 drops its hash (_maybe_evict_cached_block)
    assert pool.get_cached_block(111) is None and pool.num_evictions == 1


def test_touch_takes_a_free_cached_block_out_of_the_queue():
    pool = BlockPool(5, enable_caching=True)  # free: 1..4
    a = pool.allocate(2)  # [1, 2]
    pool.register(1, key=7)
    pool.free(a, num_registered=1, num_hashed=2)  # reversed: 2 (hashed, unregistered) then 1 → queue 3, 4, 2, 1
    assert pool.free_block_ids() == [3, 4, 2, 1]
    pool.touch([1])  # a prefix hit on block 1 (ref 0 → 1) removes it from the free queue
    assert pool.free_block_ids() == [3, 4, 2] and pool.num_free_blocks == 3 and pool.ref_cnt(1) == 1
    assert pool.allocate(3) == [3, 4, 2]  # the stale queue entry of block 1 is never handed out
    pool.free([1], num_registered=1, num_hashed=1)
    assert pool.free_block_ids() == [1] and pool.get_cached_block(7) == 1


def test_shared_block_returns_to_the_queue_only_when_its_last_holder_frees_it():
    pool = BlockPool(4, enable_caching=True)
    a = pool.allocate(1)
    pool.register(a[0], key=5)
    pool.touch(a)  # a second request hits it: ref 2
    pool.free(a, num_registered=1, num_hashed=1)
    assert pool.ref_cnt(1) == 1 and 1 not in pool.free_block_ids()
    pool.free(a, num_registered=1, num_hashed=1)
    assert pool.ref_cnt(1) == 0 and pool.free_block_ids()[-1] == 1


def test_allocating_more_than_free_is_a_bug_not_a_silent_partial_allocation():
    pool = BlockPool(3, enable_caching=False)
    with pytest.raises(RuntimeError):
        pool.allocate(3)
    with pytest.raises(ValueError):
        BlockPool(1, enable_caching=False)


class PoolMachine(RuleBasedStateMachine):
    """Requests take blocks, register full ones, hit cached ones and free them; the pool must stay consistent."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = BlockPool(12, enable_caching=True)
        self.tables: list[list[int]] = []  # per live request: its blocks; the first `reg` are registered
        self.reg: list[int] = []
        self.next_key = 0
        self.holders: dict[int, list[int]] = {}  # the model: key -> its registered blocks, in registration order

    @rule(n=st.integers(1, 4))
    def allocate(self, n):
        if n <= self.pool.num_free_blocks:
            ids = self.pool.allocate(n)
            self.tables.append(ids)
            self.reg.append(0)
            for key in self.holders:  # a reallocated block loses its key (vLLM evicts it lazily)
                self.holders[key] = [b for b in self.holders[key] if b not in ids]

    @precondition(lambda self: self.tables)
    @rule(i=st.integers(0, 50), m=st.integers(1, 3), dup=st.integers(-1, 20))
    def register_next(self, i, m, dup):
        """Register the next ``m`` blocks of a request as one run; with ``dup`` ≥ 0 the first reuses an earlier key
        (a duplicate, as when two requests compute the same block)."""
        i %= len(self.tables)
        t, r = self.tables[i], self.reg[i]
        run = t[r: r + m]
        if not run or any(self.pool.is_cached(b) for b in run):
            return
        keys = [1000 + self.next_key + j for j in range(len(run))]
        if dup >= 0 and self.next_key:
            keys[0] = 1000 + dup % self.next_key
        self.next_key += len(run)
        if len(run) == 1:
            self.pool.register(run[0], keys[0])
        else:
            self.pool.register_run(run, keys)
        for b, key in zip(run, keys):
            self.holders.setdefault(key, []).append(b)
        self.reg[i] = r + len(run)

    @rule(k=st.integers(0, 200))
    def hit(self, k):
        b = self.pool.get_cached_block(1000 + k % max(1, self.next_key))
        if b is not None:
            self.pool.touch([b])
            self.tables.append([b])
            self.reg.append(1)

    @precondition(lambda self: self.tables)
    @rule(i=st.integers(0, 50), extra=st.integers(0, 3))
    def free(self, i, extra):
        i %= len(self.tables)
        t, r = self.tables.pop(i), self.reg.pop(i)
        self.pool.free(t, r, min(len(t), r + extra))

    @invariant()
    def counts_add_up(self):
        free = self.pool.free_block_ids()
        held = [b for t in self.tables for b in t]
        assert len(free) == self.pool.num_free_blocks
        assert len(free) + len(set(held)) == self.pool.num_usable_blocks  # free + used = total
        assert not set(free) & set(held)  # no block both free and referenced
        assert 0 not in free and len(set(free)) == len(free)

    @invariant()
    def ref_counts_match_holders(self):
        held = [b for t in self.tables for b in t]
        for b in range(1, self.pool.num_gpu_blocks):
            assert self.pool.ref_cnt(b) == held.count(b) >= 0

    @invariant()
    def cached_hashes_point_at_blocks_holding_them(self):
        for b in range(1, self.pool.num_gpu_blocks):
            key = self.pool.key_of(b)
            if key is not None:
                assert b in self.pool.blocks_with_key(key)
        for key, blocks in self.holders.items():  # hits use the earliest registered block still holding the key
            assert self.pool.blocks_with_key(key) == blocks
            assert self.pool.get_cached_block(key) == (blocks[0] if blocks else None)


PoolMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestPoolMachine = PoolMachine.TestCase


@pytest.mark.parametrize("caching", [True, False])
def test_freeing_many_requests_at_once_leaves_the_queue_of_freeing_them_one_by_one(caching):
    # Three requests' blocks with 2, 0 and 3 full (hashed) blocks: one by one, each puts its partial tail at the
    # head and its full blocks at the tail; at once (free_unregistered), the later tails must still come first.
    # With caching: request 1 [1, 2, 3] (2 full) → head [3], tail [2, 1]; request 2 [4, 5] (0 full) → head
    # [5, 4]; request 3 [6, 7, 8] (3 full) → tail [8, 7, 6]. Queue: 5, 4, 3, 9, 10, 2, 1, 8, 7, 6.
    one, many = BlockPool(11, enable_caching=caching), BlockPool(11, enable_caching=caching)
    batch = []
    for pool in (one, many):
        batch = [(pool.allocate(3), 2), (pool.allocate(2), 0), (pool.allocate(3), 3)]
    for ids, nh in batch:
        one.free(ids, 0, nh)
    many.free_unregistered(batch)
    assert many.free_block_ids() == one.free_block_ids()
    expected = [5, 4, 3, 9, 10, 2, 1, 8, 7, 6] if caching else [9, 10, 3, 2, 1, 5, 4, 8, 7, 6]
    assert many.free_block_ids() == expected


def test_allocation_skips_stale_entries_of_a_block_queued_three_times():
    pool = BlockPool(4, enable_caching=True)
    assert pool.allocate(3) == [1, 2, 3]
    pool.register(1, key=9)
    pool.free([1], 1, 1)  # queue: 1
    for _ in range(2):  # a hit takes 1 out of the queue (its entry goes stale), the free puts it back at the tail
        pool.touch([1])
        pool.free([1], 1, 1)
    pool.free([2, 3], 0, 2)  # two hashed, unregistered blocks go to the tail, last first
    # queue entries: 1 (stale), 1 (stale), 1, 3, 2 → free blocks 1, 3, 2
    assert pool.free_block_ids() == [1, 3, 2] and pool.num_free_blocks == 3
    assert pool.allocate(2) == [1, 3]  # both stale entries skipped; 1 loses its key on reuse
    assert pool.get_cached_block(9) is None and pool.num_evictions == 1 and pool.free_block_ids() == [2]
