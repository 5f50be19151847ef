"""ARC eviction for the simulated host KV tier: vLLM's ``ARCOffloadingManager`` (``v1/kv_offload/arc_manager.py``), an
option beside the LRU of ``offload.py``.

Rules as vLLM writes them (the simulator's stores complete at once and nothing it holds is being loaded, so every
block is ready and unreferenced when eviction looks at it):

* Two lists of held keys, least recent first: T1 (stored, not touched since) and T2 (touched again), and two ghost
  lists B1 / B2 of keys evicted from T1 / T2 (each bounded by the capacity), plus an adaptive target size for T1.
* ``touch(keys)`` (the connector touches every full block of a request it is asked about, before the lookup): for
  each key, last first, a T1 key moves to T2's end, a T2 key to T2's end; a B1 key raises the target by
  ``max(1, |B2| // |B1|)`` (capped at the capacity), a B2 key lowers it by ``max(1, |B1| // |B2|)`` (floored at 0).
* ``lookup`` counts consecutive held keys and changes nothing.
* ``store_run(keys)`` (``prepare_store``): the keys not held are stored at once; ``new − free`` keys are evicted
  first, each from T1's front when ``|T1| ≥ target`` (and T1 is not empty), else from T2's front, into the matching
  ghost list; then the ghost lists are cut to the capacity and the new keys go to T1's end (leaving the ghost
  lists). A run larger than the whole capacity is not stored (vLLM: "cannot evict enough blocks").
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["HostARC"]


class HostARC:
    """Content keys in host memory under vLLM's ARC policy (module doc); the interface of ``offload.HostLRU``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target_t1 = 0  # adaptive target size of T1, keys
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()
        self.stored = self.evicted = 0

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
                self.b1[t1.popitem(last=False)[0]] = None
            elif t2:
                self.b2[t2.popitem(last=False)[0]] = None
            else:  # vLLM: "cannot evict enough blocks" — nothing of the run is stored (the evictions stand)
                return
            self.evicted += 1
        for ghost in (self.b1, self.b2):
            for _ in range(len(ghost) - self.capacity):
                ghost.popitem(last=False)
        for k in new:
            t1[k] = None
            self.b1.pop(k, None)
            self.b2.pop(k, None)
        self.stored += len(new)
