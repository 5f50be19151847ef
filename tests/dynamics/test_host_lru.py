"""HostLRU (offload.py): a run of stores at once equals storing its keys one by one (vLLM's LRU prepare_store order)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.dynamics.engine.offload import HostLRU


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
