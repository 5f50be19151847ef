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

    @rule(n=st.integers(1, 4))
    def allocate(self, n):
        if n <= self.pool.num_free_blocks:
            self.tables.append(self.pool.allocate(n))
            self.reg.append(0)

    @precondition(lambda self: self.tables)
    @rule(i=st.integers(0, 50))
    def register_next(self, i):
        i %= len(self.tables)
        t, r = self.tables[i], self.reg[i]
        if r < len(t) and not self.pool.is_cached(t[r]):
            self.pool.register(t[r], 1000 + self.next_key)
            self.next_key += 1
            self.reg[i] = r + 1

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
                assert b in self.pool._blocks_of[key]


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
