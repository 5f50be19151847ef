"""SGLang HiCache's storage tier (L3, ``--hicache-storage-backend file``) below its host tier, under the prefetch
policy ``wait_complete``.

Read from SGLang 0.5.23 (``mem_cache/unified_radix_cache.py``, ``managers/scheduler.py``,
``arg_groups/fields/memory.py``):

* Write: when a node's host backup completes (``_finish_write_through_ack``), it is written on to storage
  (``write_backup_storage``): storage receives every segment the host tier stores, under write_through,
  write_through_selective and write_back alike. The ``file`` backend keeps files until a ``max_size`` is given
  (then least recently used files go); here the storage holds the plan's NVMe tier and drops its least recently
  used segment when full (the file backend evicts down to 0.9 of its cap at once: not modelled).
* Prefetch: when a request arrives (``Scheduler._prefetch_kvcache``), the tokens beyond its device + host match are
  offered to ``prefetch_from_storage``; under ``prefetch_threshold`` (256 tokens) nothing is fetched, and a storage
  hit shorter than the threshold is revoked as well (``unified_radix_cache.py``, where the scheduler drains the
  prefetch hits). Otherwise the consecutive pages storage holds from there are read into host memory (host pages
  allocated, evicting host LRU entries), asynchronously. ``wait_complete`` keeps the request out of every batch
  until the read is done (``_can_terminate_prefetch`` is False until the ack): here the request reaches the scheduler
  ``tokens × bytes_per_token ÷ read bandwidth`` after it arrived, and is then admitted as any request whose prefix
  is on host: ``load_back`` to the device beside the forward pass (hicache_host.py). The read is on its TTFT only.
* One storage backend (``--hicache-storage-backend`` takes one name): ``file`` (the plan's NVMe tier) or a remote
  store such as ``mooncake`` (the plan's remote tier, read at the network's bandwidth capped by the host link). Both
  are written and prefetched by the same HiCacheController code; only the capacity and the read rate differ here
  (the store's own eviction is taken as LRU, an assumption). The figures are kept as ``disk_*`` either way; the tier
  stats name the row after the backend (``offload_sim.py``).
* ``timeout`` (0.5.23's default) and ``best_effort`` stop the prefetch at or after the first scheduling attempt that
  finds it unfinished; the simulated KV managers do not see that time, so they are refused (docs/offload.md).
"""

from __future__ import annotations

from kvledger.dynamics.engine.hicache_host import HiCacheRadixKVManager
from kvledger.dynamics.engine.hicache_write_back import WriteBackHiCacheKVManager
from kvledger.dynamics.engine.offload_tiers import DiskLRU
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.errors import InputError

__all__ = ["HostWithStorage", "StorageHiCacheKVManager", "StorageWriteBackKVManager", "PREFETCH_THRESHOLD_TOKENS",
           "hicache_manager_class"]

PREFETCH_THRESHOLD_TOKENS = 256  # SGLang 0.5.23 parse_storage_backend_extra_config prefetch_threshold default, tokens


class HostWithStorage:
    """The HiCache host LRU whose stores are written on to storage (module doc); lookups are the host's own."""

    def __init__(self, host, storage: DiskLRU) -> None:
        self.host, self.storage = host, storage

    def store(self, key: int) -> None:
        self.store_run([key])

    def store_run(self, keys: list[int]) -> None:
        self.host.store_run(keys)
        if self.host.capacity > 0:
            self.storage.store_run(keys)

    def lookup(self, keys: list[int], start: int, stop: int) -> int:
        return self.host.lookup(keys, start, stop)

    @property
    def keys(self):
        return self.host.keys

    @property
    def capacity(self) -> int:
        return self.host.capacity

    @property
    def num_held(self) -> int:
        return self.host.num_held

    @property
    def stored(self) -> int:
        return self.host.stored

    @property
    def evicted(self) -> int:
        return self.host.evicted

    @property
    def evicted_wanted(self) -> int:
        return self.host.evicted_wanted


class _Storage:
    """The storage tier and its prefetch for a HiCache radix cache (module doc); mixed into the two managers below."""

    def _attach_storage(self, host) -> None:
        if host.disk_capacity_units > 0 and host.remote_capacity_units > 0:
            raise InputError("SGLang HiCache takes one storage backend (--hicache-storage-backend file or mooncake), "
                             "not a disk and a remote store at once")
        remote = host.remote_capacity_units > 0
        self._storage_bytes_per_s = host.remote_read_bytes_per_s if remote else host.disk_read_bytes_per_s
        if not self._storage_bytes_per_s > 0:
            raise InputError(f"the storage tier needs a read bandwidth above 0 B/s, got {self._storage_bytes_per_s!r}")
        self.disk = DiskLRU(host.remote_capacity_units if remote else host.disk_capacity_units)
        self.lru = HostWithStorage(self.lru, self.disk)
        self.disk_hit_tokens = 0  # tokens prefetched from storage into host memory, tokens
        self.disk_served_tokens = 0  # of those, tokens loaded back to the device at the request's admission, tokens
        self.disk_load_s = 0.0  # Σ prefetch time (on TTFT), s
        self._prefetched: dict[int, tuple[int, int]] = {}  # request uid → the token span it prefetched

    def begin_load(self, req: SimRequest, queued: bool = False) -> float:
        """Prefetch from storage what lies beyond the request's device + host match; the time it waits, s.
        ``queued``: unused (vLLM's hold rule, load_hold.py)."""
        node, matched = self._match(req)
        S = req.spec.segment_tokens
        keys = self._chain(req)
        limit = min(len(keys), (req.num_tokens - 1) // S)
        if matched % S or req.num_preemptions:
            return 0.0
        i, held = matched // S, self.lru.keys
        while i < limit and keys[i] in held:
            i += 1
        if req.num_tokens - i * S < PREFETCH_THRESHOLD_TOKENS:
            return 0.0
        n = self.disk.lookup(keys, i, limit)
        if n * S < PREFETCH_THRESHOLD_TOKENS:  # 0.5.23 revokes a prefetch whose storage hit is below the threshold
            return 0.0
        fetched = keys[i:i + n]
        self.disk.touch(fetched)
        self.lru.host.store_run(fetched)
        t = n * S * self.host.bytes_per_token / self._storage_bytes_per_s
        self.disk_hit_tokens += n * S
        self.disk_load_s += t
        self._prefetched[req.uid] = (i * S, (i + n) * S)
        return t

    def admit(self, req, handle, num_new_tokens, must_fit_tokens, reserve_tokens=0) -> bool:
        """HiCache's admission; the part of its host load that the request's own prefetch brought counts as served
        from storage (the rest was on host already; a prefetched segment evicted from host before is recomputed)."""
        if not super().admit(req, handle, num_new_tokens, must_fit_tokens, reserve_tokens):
            return False
        span = self._prefetched.pop(req.uid, None)
        if span is not None:
            _, matched, host = handle
            self.disk_served_tokens += max(0, min(span[1], matched + host) - max(span[0], matched))
        return True


class StorageHiCacheKVManager(_Storage, HiCacheRadixKVManager):
    """HiCache (write_through or write_through_selective) with the storage tier."""

    def __init__(self, capacity_tokens: int, block_size: int = 1, *, host) -> None:
        super().__init__(capacity_tokens, block_size, host=host)
        self._attach_storage(host)


class StorageWriteBackKVManager(_Storage, WriteBackHiCacheKVManager):
    """HiCache under write_back with the storage tier."""

    def __init__(self, capacity_tokens: int, block_size: int = 1, *, host) -> None:
        super().__init__(capacity_tokens, block_size, host=host)
        self._attach_storage(host)


def hicache_manager_class(host) -> type:
    """The HiCache radix-cache class for ``host``: write_back or not, with a storage tier or not."""
    wb = host.write_policy == "write_back"
    if host.disk_capacity_units > 0 or host.remote_capacity_units > 0:
        return StorageWriteBackKVManager if wb else StorageHiCacheKVManager
    return WriteBackHiCacheKVManager if wb else HiCacheRadixKVManager
