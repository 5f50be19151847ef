"""``block_ids.UnwrittenIds``: a pool whose queue list holds only the ids reached so far hands out the same blocks, in
the same order, with the same counts, as one whose queue was written in full at the start (``materialize_fresh``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.dynamics.engine import block_ids
from kvledger.dynamics.engine.block_pool import BlockPool

OPS = st.lists(st.tuples(st.sampled_from(["alloc", "free", "register", "hit"]), st.integers(1, 9),
                         st.integers(0, 3)), max_size=60)


def _apply(pool: BlockPool, ops, log: list) -> None:
    """Requests take blocks, register their first one, hit a registered block, free (some full blocks hashed)."""
    tables: list[tuple[list[int], int]] = []  # per live request: (blocks, registered leading blocks)
    key = 0
    for op, n, x in ops:
        if op == "alloc" and n <= pool.num_free_blocks:
            ids = pool.allocate(n)
            tables.append((ids, 0))
            log.append(ids)
        elif op == "free" and tables:
            ids, reg = tables.pop(n % len(tables))
            pool.free(ids, reg, min(len(ids), reg + x))
        elif op == "register" and tables and tables[-1][1] == 0 and not pool.is_cached(tables[-1][0][0]):
            key += 1
            pool.register(tables[-1][0][0], key)
            tables[-1] = (tables[-1][0], 1)
        elif op == "hit" and key:
            b = pool.get_cached_block(1 + n % key)
            if b is not None:
                pool.touch([b])
                tables.append(([b], 1))
        log.append((pool.num_free_blocks, pool.num_used_blocks, pool.is_uncached))


@pytest.mark.parametrize("chunk", [1, 3, 4096])
@pytest.mark.parametrize("caching", [True, False])
@given(ops=OPS, size=st.integers(2, 40))
@settings(max_examples=60, deadline=None)
def test_unwritten_ids_hand_out_what_a_written_queue_does(chunk, caching, ops, size):
    eager, lazy = BlockPool(size, caching), BlockPool(size, caching)
    eager.materialize_fresh()
    a, b = [], []
    _apply(eager, ops, a)
    kept, block_ids.FRESH_CHUNK = block_ids.FRESH_CHUNK, chunk
    try:
        _apply(lazy, ops, b)
    finally:
        block_ids.FRESH_CHUNK = kept
    assert a == b
    assert lazy.free_block_ids() == eager.free_block_ids()


def test_a_new_pool_writes_no_id_until_asked():
    pool = BlockPool(1_000_000, enable_caching=True)
    assert pool.num_free_blocks == 999_999 and pool.num_used_blocks == 0
    assert pool.allocate(3) == [1, 2, 3]
    pool.free([1, 2, 3], 0, 2)  # 3 (partial) to the head; 2, 1 behind every id not yet handed out
    assert pool.allocate(2) == [3, 4]
    assert pool.free_block_ids()[:2] == [5, 6] and pool.free_block_ids()[-2:] == [2, 1]
