"""``block_ids.free_queue``: the kept ids give what ``list(range(1, n))`` gave, a new list every time."""

from __future__ import annotations

from kvledger.dynamics.engine.block_ids import free_queue
from kvledger.dynamics.engine.block_pool import BlockPool


def test_free_queue_is_a_fresh_range_each_time():
    for n in (2, 3, 1000, 1000, 70_001, 1000):
        q = free_queue(n)
        assert q == list(range(1, n))
        q.append(-1)
        del q[:1]  # a pool mutates its queue: the next one must not see it
        assert free_queue(n) == list(range(1, n))


def test_a_pool_after_another_of_the_same_size_starts_afresh():
    a = BlockPool(64, enable_caching=True)
    taken = a.allocate(10)
    a.free(taken, 0, 9)
    b = BlockPool(64, enable_caching=True)
    assert b.free_block_ids() == list(range(1, 64)) and b.allocate(3) == [1, 2, 3]
    assert a.free_block_ids() != b.free_block_ids()
