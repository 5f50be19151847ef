"""vLLM's paged KV manager with the host tier's opt-in rules: vLLM 0.33.0's ``store_threshold`` gate (store_gate.py)
and LMCache's local-disk tier below its local CPU chunks (HBM → host → disk).

LMCache 0.5.6 (``lmcache/v1/storage_backend/``), as the simulated LMCache host tier (offload.py, 256-token chunks):

* Store: ``StorageManager.batched_put`` hands every stored chunk to every backend, LocalCPUBackend then
  LocalDiskBackend (created in that order, ``storage_backend/__init__.py``, the disk only with ``local_disk`` set and
  ``max_local_disk_size`` > 0). The disk write is asynchronous (``LocalDiskBackend.submit_put_task``), off every
  critical path; a chunk already on disk is only touched (``update_on_hit``). The disk holds ``max_local_disk_size``
  GiB (× 1024^3) of chunk files per worker and evicts the least recently used file, one at a time, until the new one
  fits (``cache_policy`` "LRU", the default). So the disk holds a superset of what the CPU tier dropped.
* Lookup: ``StorageManager.batched_contains`` counts the prompt's chunks as one prefix across the backends in order:
  consecutive CPU hits from chunk 0, then consecutive disk hits from there; looking does not touch the disk's LRU.
* Load: chunks read from disk (``batched_get_blocking``) are touched there and written into the local CPU backend
  (``StorageManager.batched_get``). As for CPU chunks (offload.py), the load ends before the request is scheduled:
  its time is on the request's TTFT, host chunks at the host link's bandwidth and disk chunks at the disk tier's read
  bandwidth (the plan's NVMe tier: the drive's read rate, capped by the host link), one after the other.
"""

from __future__ import annotations

from kvledger.dynamics.engine.connector_caches import KeyLRU
from kvledger.dynamics.engine.offload import HostTier, OffloadingPagedKVManager
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.store_gate import GatedCache, StoreThreshold
from kvledger.errors import InputError

__all__ = ["DiskLRU", "ChunkTiers", "TieredPagedKVManager", "needs_tiered_manager"]


def needs_tiered_manager(host: HostTier) -> bool:
    """Whether ``host`` asks for a rule of this module (a store gate or a disk tier)."""
    return host.store_threshold >= 2 or host.disk_capacity_units > 0


class DiskLRU(KeyLRU):
    """LMCache's local-disk chunk files, least recently used first (module doc)."""

    def store_run(self, keys: list[int]) -> None:
        """``submit_put_task`` for each key in order: a held key is touched; a new one evicts the least recent when
        the disk is full."""
        held, cap = self.keys, self.capacity
        if cap <= 0:
            return
        for k in keys:
            if k in held:
                held.move_to_end(k)
                continue
            if len(held) >= cap:
                held.popitem(last=False)
                self.evicted += 1
            held[k] = None
            self.stored += 1

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        """Consecutive held keys from ``keys[start]`` (before ``stop``); no change (``batched_contains``)."""
        n, held = 0, self.keys
        for i in range(start, stop):
            if keys[i] not in held:
                break
            n += 1
        return n

    def touch(self, keys: list[int]) -> None:
        held = self.keys
        for k in keys:
            if k in held:
                held.move_to_end(k)


class ChunkTiers:
    """LMCache's CPU chunks (``HostLRU``) with the disk below them, as the manager's host cache: stores go to both, a
    lookup continues on disk where the CPU hits end (``host_chunks`` keeps where that was)."""

    def __init__(self, cpu, disk: DiskLRU) -> None:
        self.cpu, self.disk = cpu, disk
        self.host_chunks = 0  # chunks the last lookup found in the CPU tier, from the prompt's start

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        h = self.cpu.lookup(keys, start, stop)
        self.host_chunks = start + h
        return h + self.disk.lookup(keys, start + h, stop)

    def store_run(self, keys: list[int]) -> None:
        self.cpu.store_run(keys)
        self.disk.store_run(keys)

    def store(self, key: int) -> None:
        self.store_run([key])

    def touch(self, keys: list[int]) -> None:
        self.cpu.touch(keys)

    @property
    def num_held(self) -> int:
        return self.cpu.num_held

    @property
    def stored(self) -> int:
        return self.cpu.stored

    @property
    def evicted(self) -> int:
        return self.cpu.evicted


class TieredPagedKVManager(OffloadingPagedKVManager):
    """``OffloadingPagedKVManager`` with a store gate (vLLM's native blocks) or a disk tier (LMCache's chunks).

    Raises:
        InputError: a gate on LMCache's chunks (``store_threshold`` is the native CPU spec's option), a disk tier
            under the native connector's blocks, or a disk tier without a read bandwidth.
    """

    def __init__(self, *args, host: HostTier, **kwargs) -> None:
        super().__init__(*args, host=host, **kwargs)
        self.gate: StoreThreshold | None = None
        self.disk: DiskLRU | None = None
        self.disk_hit_tokens = 0  # tokens loaded from the disk tier, tokens
        self.disk_load_s = 0.0  # Σ disk load time, s
        if host.store_threshold >= 2:
            if host.chunk_tokens:
                raise InputError("store_threshold is an option of vLLM's native CPU offloading (CPUOffloadingSpec, "
                                 "0.33.0); LMCache's chunks have no such gate. Drop it, or use the native backend.")
            self.gate = StoreThreshold(host.store_threshold)
            self.lru = GatedCache(self.lru, self.gate)
        if host.disk_capacity_units > 0:
            if not host.chunk_tokens:
                raise InputError("a disk tier below host memory is simulated for LMCache's local_disk backend "
                                 "(--kv-offloading-backend lmcache); vLLM's native connector has none here.")
            if not host.disk_read_bytes_per_s > 0:
                raise InputError(f"the disk tier needs a read bandwidth above 0 B/s, got "
                                 f"{host.disk_read_bytes_per_s!r}")
            self.disk = DiskLRU(host.disk_capacity_units)
            self.lru = ChunkTiers(self.lru, self.disk)

    def account_load(self, req: SimRequest, start: int, n: int) -> float:
        """Host blocks at the host link's rate, disk blocks at the disk's, one after the other; with a gate, the
        request then offers only the blocks after its cached ones (store_gate.py)."""
        if self.disk is None:
            t = super().account_load(req, start, n)
            self._stored[req.uid] = start + n  # vLLM 0.33 CHUNK_LEVEL: next_stored_chunk_idx after a load
            return t
        per = self._per
        host_blocks = max(0, min(start + n, self.lru.host_chunks * per) - start)
        t = super().account_load(req, start, host_blocks) if host_blocks else 0.0
        disk_tokens = (n - host_blocks) * self.block_size
        if disk_tokens <= 0:
            return t
        td = disk_tokens * self.host.bytes_per_token / self.host.disk_read_bytes_per_s
        self.disk_hit_tokens += disk_tokens
        self.disk_load_s += td
        first, last = max(self.lru.host_chunks, start // per), -(-(start + n) // per)
        read = self._keys(req)[per - 1::per][first:last]
        self.disk.touch(read)  # batched_get_blocking: update_on_hit
        self.lru.cpu.store_run(read)  # StorageManager.batched_get: written into the local CPU backend
        return t + td
