"""The host caches of vLLM's OffloadingConnector in the simulated host tier: ``LRUOffloadingManager``
(``v1/kv_offload/lru_manager.py``) and, as an option, ``ARCOffloadingManager`` (``arc_manager.py``).

The simulator's stores complete at once and nothing it holds is being loaded when eviction looks, so every block is
ready and unreferenced there. Both are driven as the connector drives them: when a request is considered, ``touch``
every full block of it, then ``lookup`` from the end of its GPU hit (``get_num_new_matched_tokens``); stores come in
runs (``prepare_store`` of the blocks a schedule completes), the keys already held skipped.

LRU (``ConnectorLRU``): ``touch`` moves each held key to the end, last first (so the request's first block ends up
most recent); ``lookup`` counts consecutive held keys and changes nothing; ``store_run`` evicts ``new − free`` least
recent keys at once, or, when fewer are held, stores nothing and evicts nothing; then the new keys go to the end.

ARC (``HostARC``), as vLLM writes it:

* Two lists of held keys, least recent first: T1 (stored, not touched since) and T2 (touched again), and two ghost
  lists B1 / B2 of keys evicted from T1 / T2 (each bounded by the capacity), plus an adaptive target size for T1.
* ``touch(keys)``: for each key, last first, a T1 key moves to T2's end, a T2 key to T2's end; a B1 key raises the
  target by ``max(1, |B2| // |B1|)`` (capped at the capacity), a B2 key lowers it by ``max(1, |B1| // |B2|)``
  (floored at 0). ``lookup`` counts consecutive held keys and changes nothing.
* ``store_run(keys)`` (``prepare_store``): the keys not held are stored at once; ``new − free`` keys are evicted
  first, each from T1's front when ``|T1| ≥ target`` (and T1 is not empty), else from T2's front, into the matching
  ghost list; then the ghost lists are cut to the capacity and the new keys go to T1's end (leaving the ghost
  lists). When neither rule finds a key to evict (T1 under its target and T2 empty), nothing of the run is
  stored (vLLM: "cannot evict enough blocks"; the evictions already made stand).

``HostLRU``: SGLang HiCache's host tier and LMCache's chunks, an LRU whose ``lookup`` hit moves a key to the end.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import filterfalse, islice

__all__ = ["KeyLRU", "ConnectorLRU", "HostARC", "HostLRU", "EvictionLog"]


class EvictionLog:
    """The keys a host cache evicted, and ``evicted_wanted``: how many of them a later lookup missed (wanted after
    the eviction), each counted once an eviction. Zero means the evictions cost no hit: a larger cache would have
    served nothing more."""

    def start_log(self) -> None:
        self.gone: set[int] = set()
        self.evicted_wanted = 0

    def log_evicted(self, keys) -> None:
        self.gone.update(keys)

    def log_miss(self, keys: list[int], i: int, stop: int) -> None:
        """A lookup missed ``keys[i]``: count the keys from there to ``stop`` that the cache had evicted."""
        gone = self.gone
        if gone and i < stop:
            wanted = [k for k in islice(keys, i, stop) if k in gone]
            self.evicted_wanted += len(wanted)
            gone.difference_update(wanted)


class KeyLRU(EvictionLog):
    """Content keys in host memory, least recently used first, with counts of keys stored and evicted: the state of
    every LRU host cache (vLLM's connector here, SGLang's HiCache and LMCache's in ``offload.HostLRU``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.keys: OrderedDict[int, None] = OrderedDict()
        self.stored = self.evicted = 0
        self.start_log()

    @property
    def num_held(self) -> int:
        return len(self.keys)

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        """Consecutive held keys from ``keys[start]`` (before ``stop``); no change."""
        n, held = 0, self.keys
        for i in range(start, stop):
            if keys[i] not in held:
                self.log_miss(keys, i, stop)
                break
            n += 1
        return n


class ConnectorLRU(KeyLRU):
    """Content keys in host memory under vLLM's LRU policy (module doc), least recently used first."""

    def touch(self, keys: list[int]) -> None:
        held = self.keys
        deque(map(held.move_to_end, list(filter(held.__contains__, reversed(keys)))), 0)

    def store(self, key: int) -> None:
        self.store_run([key])

    def store_run(self, keys: list[int]) -> None:
        held = self.keys
        new = list(filterfalse(held.__contains__, keys))
        over = len(held) + len(new) - self.capacity
        if not new or over > len(held):  # vLLM: "we could not evict enough blocks" — nothing stored or evicted
            return
        if over > 0:
            victims = list(islice(held, over))
            deque(map(held.__delitem__, victims), 0)
            self.log_evicted(victims)
            self.evicted += over
        held.update(dict.fromkeys(new))
        self.stored += len(new)


class HostARC(EvictionLog):
    """Content keys in host memory under vLLM's ARC policy (module doc); the interface of ``ConnectorLRU``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target_t1 = 0  # adaptive target size of T1, keys
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()
        self.stored = self.evicted = 0
        self.start_log()

    @property
    def keys(self) -> list[int]:
        """Held keys, T1 then T2 (for tests)."""
        return [*self.t1, *self.t2]

    @property
    def num_held(self) -> int:
        return len(self.t1) + len(self.t2)

    def __contains__(self, key: int) -> bool:
        return key in self.t1 or key in self.t2

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        """Consecutive held keys from ``keys[start]`` (before ``stop``); no change (ARC's lookup does not touch)."""
        n = 0
        for i in range(start, stop):
            if keys[i] not in self:
                self.log_miss(keys, i, stop)
                break
            n += 1
        return n

    def touch(self, keys: list[int]) -> None:
        t1, t2, b1, b2 = self.t1, self.t2, self.b1, self.b2
        for k in reversed(keys):
            if k in t1:
                del t1[k]
                t2[k] = None
            elif k in t2:
                t2.move_to_end(k)
            elif k in b1:
                self.target_t1 = min(self.target_t1 + max(1, len(b2) // len(b1)), self.capacity)
            elif k in b2:
                self.target_t1 = max(self.target_t1 - max(1, len(b1) // len(b2)), 0)

    def store(self, key: int) -> None:
        self.store_run([key])

    def store_run(self, keys: list[int]) -> None:
        new = [k for k in keys if k not in self]
        if not new:
            return
        t1, t2 = self.t1, self.t2
        for _ in range(len(t1) + len(t2) + len(new) - self.capacity):
            if t1 and len(t1) >= self.target_t1:
                k = t1.popitem(last=False)[0]
                self.b1[k] = None
            elif t2:
                k = t2.popitem(last=False)[0]
                self.b2[k] = None
            else:  # vLLM: "cannot evict enough blocks" — nothing of the run is stored (the evictions stand)
                return
            self.gone.add(k)
            self.evicted += 1
        for ghost in (self.b1, self.b2):
            for _ in range(len(ghost) - self.capacity):
                ghost.popitem(last=False)
        for k in new:
            t1[k] = None
            self.b1.pop(k, None)
            self.b2.pop(k, None)
        self.stored += len(new)


class HostLRU(KeyLRU):
    """Content keys in host memory, least recently used first, for SGLang HiCache's host tier and LMCache's chunks: a
    ``lookup`` hit moves to the end; a run is stored as its keys one by one (vLLM's connector: ConnectorLRU)."""

    def touch(self, keys: list[int]) -> None:
        """Nothing: this LRU moves a key to the end when ``lookup`` hits it (module doc)."""

    def store(self, key: int) -> None:
        held = self.keys
        if key in held or self.capacity <= 0:
            return
        if len(held) >= self.capacity:
            self.gone.add(held.popitem(last=False)[0])
            self.evicted += 1
        held[key] = None
        self.stored += 1

    def store_run(self, keys: list[int]) -> None:
        """``store(k)`` for each of ``keys`` (distinct) in order: a key already held stays where it is; a new one
        goes to the end, evicting the least recently used when full. At once unless a key of the run held now would
        be evicted before its turn (then it would be stored anew: one by one)."""
        held, cap = self.keys, self.capacity
        new = list(filterfalse(held.__contains__, keys))
        if not new or cap <= 0:
            return
        over = len(held) + len(new) - cap  # evictions: held keys (least recent first), then the run's own first ones
        if over > 0:
            victims = list(islice(held, over))
            if len(new) < len(keys) and not set(keys).isdisjoint(victims):
                for k in keys:
                    self.store(k)
                return
            deque(map(held.__delitem__, victims), 0)
            self.log_evicted(victims + new[:-cap] if len(new) > cap else victims)  # the run's own first ones too
        held.update(dict.fromkeys(new[-cap:]))
        self.stored += len(new)
        self.evicted += max(0, over)

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        """Consecutive hits from ``keys[start]`` (before ``stop``), each touched to the LRU's end."""
        n, held = 0, self.keys
        for i in range(start, stop):
            k = keys[i]
            if k not in held:
                self.log_miss(keys, i, stop)
                break
            held.move_to_end(k)
            n += 1
        return n
