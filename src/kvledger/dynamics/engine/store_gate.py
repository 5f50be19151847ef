"""vLLM 0.33.0's reuse-frequency gate on CPU offloading stores (``store_threshold``, opt-in), for the simulated host
tier's vLLM caches (connector_caches.py).

Read from vLLM 0.33.0 ``v1/kv_offload/cpu/spec.py`` (``CPUOffloadingSpec.get_manager``) and ``cpu/manager.py``
(``CPUOffloadingManager._record_accesses``, ``prepare_store``):

* ``store_threshold`` (``kv_connector_extra_config``, default 0): "how many times a chunk must be offered for storage
  before it is eligible for CPU offloading"; values below 2 turn the gate off (no tracker at all).
* Every ``prepare_store`` records an access for each key it is offered, held or not: a tracked key moves to the end
  of an LRU table and its count goes up by one; an untracked key enters with count 1, first dropping the least
  recently offered entry when the table holds ``max_tracker_size`` (64,000) keys — never one this offer just counted;
  when every tracked key was counted by this offer, the new key is not tracked.
* Then, of the keys the cache does not hold, only those counted ``≥ store_threshold`` times are stored; the others
  are "stores skipped because the reuse threshold was not reached" (vLLM's ``STORES_SKIPPED`` counter). Counts are
  never reset by a store or an eviction: a block evicted from the CPU tier is stored again on its next offer.
* With a gate, a request that loaded from the CPU tier offers only the chunks after its cached ones
  (``update_state_after_alloc``: ``next_stored_chunk_idx = cdiv(num_cached_tokens, tokens_per_chunk)`` under the
  CPU tier's ``CHUNK_LEVEL`` policy); one that did not load offers every chunk from its first, its HBM hits too.

So a prefix block is offered once per request that computes or hits it: with ``store_threshold = 2`` a block seen by
one request is not stored, and is stored when a second request offers it.
"""

from __future__ import annotations

from collections import OrderedDict

from kvledger.dynamics.engine.connector_caches import KeyLRU

__all__ = ["StoreThreshold", "GatedCache", "MAX_TRACKER_SIZE"]

MAX_TRACKER_SIZE = 64_000  # vLLM 0.33.0 CPUOffloadingSpec: extra_config max_tracker_size default, keys


class StoreThreshold:
    """The offer counts and the gate (module doc).

    Args:
        threshold: vLLM's ``store_threshold`` (≥ 2 here), offers.
        max_tracker_size: entries in the count table, keys.
    """

    def __init__(self, threshold: int, max_tracker_size: int = MAX_TRACKER_SIZE) -> None:
        self.threshold = threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[int, int] = OrderedDict()
        self.skipped = 0  # offered keys not held and under the threshold, count (vLLM STORES_SKIPPED)

    def record(self, keys: list[int]) -> None:
        """``_record_accesses``: count one offer of each of ``keys``."""
        counts = self.counts
        counted = 0
        for k in keys:
            if k in counts:
                counts.move_to_end(k)
                counts[k] += 1
                counted += 1
        unprotected = len(counts) - counted
        for k in keys:
            if k in counts:
                continue
            if len(counts) >= self.max_tracker_size:
                if unprotected == 0:
                    continue
                counts.popitem(last=False)
                unprotected -= 1
            counts[k] = 1

    def admit(self, keys: list[int], held) -> list[int]:
        """Record the offer; the keys of ``keys`` not in ``held`` that reach the threshold, in order."""
        self.record(keys)
        counts, t = self.counts, self.threshold
        new = [k for k in keys if k not in held]
        out = [k for k in new if counts.get(k, 0) >= t]
        self.skipped += len(new) - len(out)
        return out


class GatedCache:
    """A vLLM host cache (``ConnectorLRU`` or ``HostARC``) whose stores pass the gate first; everything else is the
    cache's own."""

    def __init__(self, cache, gate: StoreThreshold) -> None:
        self.cache, self.gate = cache, gate
        self._held = cache.keys if isinstance(cache, KeyLRU) else cache  # a dict of keys, or ARC's __contains__

    def store_run(self, keys: list[int]) -> None:
        admitted = self.gate.admit(keys, self._held)
        if admitted:
            self.cache.store_run(admitted)

    def store(self, key: int) -> None:
        self.store_run([key])

    def touch(self, keys: list[int]) -> None:
        self.cache.touch(keys)

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        return self.cache.lookup(keys, start, stop)

    @property
    def num_held(self) -> int:
        return self.cache.num_held

    @property
    def stored(self) -> int:
        return self.cache.stored

    @property
    def evicted(self) -> int:
        return self.cache.evicted

    @property
    def evicted_wanted(self) -> int:
        return self.cache.evicted_wanted

    @property
    def keys(self):
        return self.cache.keys
