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
* Save after a load (``vllm_v1_adapter.py``: ``num_saved_tokens`` starts at the request's LMCache hit): chunks the
  request loaded are not put again, so a chunk read from remote is not written back to the disk (kept only with a
  remote tier, where it changes what the disk holds; below CPU or disk alone a re-put only touches held chunks).
* Remote (``remote_url`` / ``remote_storage_plugins``): ``RemoteBackend`` is created after LocalDiskBackend, so it is
  the last level: ``batched_put`` hands it every stored chunk too (``submit_put_task``, asynchronous, off the critical
  path), ``batched_contains`` reaches it where the CPU and disk hits end, and chunks read from it are written into
  the local CPU backend (``batched_get``). With no disk it sits under the CPU chunks. Its capacity and eviction are
  the remote server's: here an LRU of the plan's remote tier (an assumption, stated in docs/offload.md), read at the
  plan's remote read rate (the network's bandwidth, capped by the host link).
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
    return host.store_threshold >= 2 or host.disk_capacity_units > 0 or host.remote_capacity_units > 0


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

    def touch(self, keys: list[int]) -> None:
        held = self.keys
        for k in keys:
            if k in held:
                held.move_to_end(k)


class ChunkTiers:
    """LMCache's CPU chunks (``HostLRU``) with the disk and the remote store below them (either may be None), as the
    manager's host cache: stores go to every level, a lookup continues on the next where the hits end
    (``host_chunks`` / ``disk_chunks`` keep where the CPU's and the disk's hits ended)."""

    def __init__(self, cpu, disk: DiskLRU | None, remote: DiskLRU | None = None) -> None:
        self.cpu, self.disk, self.remote = cpu, disk, remote
        self.host_chunks = 0  # chunks the last lookup found in the CPU tier, from the prompt's start
        self.disk_chunks = 0  # … and in the CPU tier then the disk, from the prompt's start

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        i = self.host_chunks = start + self.cpu.lookup(keys, start, stop)
        if self.disk is not None:
            i += self.disk.lookup(keys, i, stop)
        self.disk_chunks = i
        if self.remote is not None:
            i += self.remote.lookup(keys, i, stop)
        return i - start

    def store_run(self, keys: list[int]) -> None:
        self.cpu.store_run(keys)
        for level in (self.disk, self.remote):
            if level is not None:
                level.store_run(keys)

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

    @property
    def evicted_wanted(self) -> int:
        return self.cpu.evicted_wanted


class TieredPagedKVManager(OffloadingPagedKVManager):
    """``OffloadingPagedKVManager`` with a store gate (vLLM's native blocks) or a disk tier (LMCache's chunks).

    Raises:
        InputError: a gate on LMCache's chunks (``store_threshold`` is the native CPU spec's option), a disk or remote
            tier under the native connector's blocks, or one without a read bandwidth.
    """

    def __init__(self, *args, host: HostTier, **kwargs) -> None:
        super().__init__(*args, host=host, **kwargs)
        self.gate: StoreThreshold | None = None
        self.disk: DiskLRU | None = None
        self.disk_hit_tokens = 0  # tokens loaded from the disk tier, tokens
        self.disk_load_s = 0.0  # Σ disk load time, s
        self.remote: DiskLRU | None = None
        self.remote_hit_tokens = 0  # tokens loaded from the remote tier, tokens
        self.remote_load_s = 0.0  # Σ remote load time, s
        if host.store_threshold >= 2:
            if host.chunk_tokens:
                raise InputError("store_threshold is an option of vLLM's native CPU offloading (CPUOffloadingSpec, "
                                 "0.33.0); LMCache's chunks have no such gate. Drop it, or use the native backend.")
            self.gate = StoreThreshold(host.store_threshold)
            self.lru = GatedCache(self.lru, self.gate)
        for name, what in (("disk", "local_disk"), ("remote", "remote")):
            if getattr(host, f"{name}_capacity_units") <= 0:
                continue
            if not host.chunk_tokens:
                raise InputError(f"a {name} tier below host memory is simulated for LMCache's {what} backend "
                                 "(--kv-offloading-backend lmcache); vLLM's native connector has none here.")
            if not (bw := getattr(host, f"{name}_read_bytes_per_s")) > 0:
                raise InputError(f"the {name} tier needs a read bandwidth above 0 B/s, got {bw!r}")
            setattr(self, name, DiskLRU(getattr(host, f"{name}_capacity_units")))
        if self.disk is not None or self.remote is not None:
            self.lru = ChunkTiers(self.lru, self.disk, self.remote)

    def account_load(self, req: SimRequest, start: int, n: int) -> float:
        """Host blocks at the host link's rate, then disk blocks at the disk's, then remote blocks at the network's,
        one after the other; with a gate, the request then offers only the blocks after its cached ones
        (store_gate.py)."""
        if self.disk is None and self.remote is None:
            t = super().account_load(req, start, n)
            self._stored[req.uid] = start + n  # vLLM 0.33 CHUNK_LEVEL: next_stored_chunk_idx after a load
            return t
        per, tiers = self._per, self.lru
        host_blocks = max(0, min(start + n, tiers.host_chunks * per) - start)
        t = super().account_load(req, start, host_blocks) if host_blocks else 0.0
        last, alone = -(-(start + n) // per), self.remote is None
        disk_end = last if alone else tiers.disk_chunks  # the chunk where the disk's hits end
        disk_blocks = n - host_blocks if alone else max(0, min(start + n, disk_end * per) - start - host_blocks)
        keys = self._keys(req)[per - 1::per]
        for name, blocks, first, stop in (("disk", disk_blocks, tiers.host_chunks, disk_end),
                                          ("remote", n - host_blocks - disk_blocks, tiers.disk_chunks, last)):
            tokens = blocks * self.block_size
            if tokens <= 0:
                continue
            td = tokens * self.host.bytes_per_token / getattr(self.host, f"{name}_read_bytes_per_s")
            setattr(self, f"{name}_hit_tokens", getattr(self, f"{name}_hit_tokens") + tokens)
            setattr(self, f"{name}_load_s", getattr(self, f"{name}_load_s") + td)
            read = keys[max(first, start // per):min(stop, last)]
            getattr(self, name).touch(read)  # batched_get_blocking: update_on_hit (the remote server's LRU: assumed)
            tiers.cpu.store_run(read)  # StorageManager.batched_get: written into the local CPU backend
            t += td
        if self.remote is not None:  # the connector saves from its LMCache hit on (num_saved_tokens), not below it
            self._stored[req.uid] = max(self._stored.get(req.uid, 0), last)
        return t
