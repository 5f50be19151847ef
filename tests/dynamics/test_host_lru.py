"""The host tier's caches: HostLRU (a run of stores at once equals storing its keys one by one) and vLLM's ARC."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.dynamics.engine.connector_caches import ConnectorLRU, HostARC
from kvledger.dynamics.engine.offload import HostLRU, HostTier
from kvledger.errors import InputError


def test_a_held_key_evicted_before_its_turn_is_stored_anew():
    lru = HostLRU(3)
    lru.store_run([1, 2, 3])
    # the run [4, 1]: 4 evicts 1 (least recent), then 1 is no longer held and is stored again, evicting 2
    lru.store_run([4, 1])
    assert list(lru.keys) == [3, 4, 1] and (lru.stored, lru.evicted) == (5, 2)
    # a held key that survives keeps its place: [5, 4] evicts 3, 4 stays where it is
    lru.store_run([5, 4])
    assert list(lru.keys) == [4, 1, 5] and (lru.stored, lru.evicted) == (6, 3)
    lru.store_run([6, 7, 8, 9])  # longer than the capacity: the run's own first key goes too
    assert list(lru.keys) == [7, 8, 9] and (lru.stored, lru.evicted) == (10, 7)


@settings(max_examples=150, deadline=None)
@given(cap=st.integers(0, 6), runs=st.lists(st.lists(st.integers(0, 12), max_size=8, unique=True), max_size=10))
def test_store_run_equals_one_by_one(cap, runs):
    batch, single = HostLRU(cap), HostLRU(cap)
    for run in runs:
        batch.store_run(run)
        for k in run:
            single.store(k)
        assert list(batch.keys) == list(single.keys)
        assert (batch.stored, batch.evicted) == (single.stored, single.evicted)


def test_arc_keeps_a_key_touched_twice_where_lru_drops_it():
    # capacity 3. a is stored, then touched (a second use: T1 → T2); b, c are stored once (T1 = [b, c], T2 = [a]).
    arc, lru = HostARC(3), HostLRU(3)
    for cache in (arc, lru):
        cache.store_run([1])
        cache.touch([1])
        cache.lookup([1], 0, 1)  # the LRU's touch is its lookup hit
        cache.store_run([2])
        cache.store_run([3])
        cache.store_run([4])  # full: one eviction
    # ARC: |T1| = 2 ≥ target 0, so T1's least recent (2) goes to ghost list B1; T1 = [3, 4], T2 = [1]
    assert arc.keys == [3, 4, 1] and list(arc.b1) == [2] and arc.evicted == 1
    # LRU: 1 is the least recent (touched before 2 and 3 were stored) and goes
    assert list(lru.keys) == [2, 3, 4]
    # a touch of ghost 2 (in B1) raises T1's target by max(1, |B2| // |B1|) = max(1, 0 // 1) = 1
    arc.touch([2])
    assert arc.target_t1 == 1
    # storing 2 again: |T1| = 2 ≥ 1, T1's front (3) is evicted to B1; 2 leaves B1 and joins T1's end
    arc.store_run([2])
    assert arc.keys == [4, 2, 1] and list(arc.b1) == [3] and (arc.stored, arc.evicted) == (5, 2)
    # a touch of the run [4, 1], last first: 1 (T2) moves to T2's end, 4 leaves T1 for T2's end: T1 = [2], T2 = [1, 4]
    arc.touch([4, 1])
    assert arc.keys == [2, 1, 4]
    assert arc.lookup([2, 1, 3], 0, 3) == 2 and arc.keys == [2, 1, 4]  # lookup counts, moves nothing


def test_arc_stores_nothing_when_no_rule_finds_a_key_to_evict():
    arc = HostARC(2)
    arc.store_run([1])
    arc.target_t1 = 2  # T1 (1 key) under its target and T2 empty: vLLM's prepare_store gives up
    arc.store_run([2, 3])
    assert arc.keys == [1] and (arc.stored, arc.evicted) == (1, 0)


def test_host_tier_eviction_is_checked():
    with pytest.raises(InputError, match="'lru' or 'arc'"):
        HostTier(10, 1.0, 1.0, 1.0, eviction="lfu")


def test_connector_lru_touches_every_block_and_stores_a_run_at_once():
    lru = ConnectorLRU(4)
    lru.store_run([1, 2, 3])
    # the connector touches a request's blocks [1, 2] before its lookup, last first: 2 then 1 go to the end
    lru.touch([1, 2, 9])
    assert list(lru.keys) == [3, 2, 1]
    assert lru.lookup([1, 2, 5], 0, 3) == 2 and list(lru.keys) == [3, 2, 1]  # the lookup moves nothing
    # a run of 3 new keys with 1 free: 2 least recent (3, 2) evicted at once, then 4, 5, 6 at the end
    lru.store_run([1, 4, 5, 6])
    assert list(lru.keys) == [1, 4, 5, 6] and (lru.stored, lru.evicted) == (6, 2)
    # 5 new keys, capacity 4: vLLM cannot evict enough, so nothing is stored or evicted
    lru.store_run([7, 8, 9, 10, 11])
    assert list(lru.keys) == [1, 4, 5, 6] and (lru.stored, lru.evicted) == (6, 2)
