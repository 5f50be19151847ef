"""A host-memory KV tier under the simulated engines: vLLM's OffloadingConnector rule and SGLang HiCache's.

vLLM (``distributed/kv_transfer/kv_connector/v1/offloading_connector.py``, 0.11.0–0.33.0; ``kv_offload`` LRU):

* Store, write-through: after each schedule, every block that the scheduled tokens complete is offered to the CPU
  tier (``_get_reqs_to_store``); ``prepare_store`` skips blocks already there and evicts least-recently-used CPU
  blocks to make room (a run at once, or not at all). Stores are asynchronous, off the step's critical path.
  (Here: prompt blocks when they are scheduled; blocks a pure-decode stretch fills are offered when the request
  frees them.)
* Load: when a request is considered, every full block of it is touched in the CPU tier, which is then looked up
  from the end of its GPU prefix hit (``get_num_new_matched_tokens``: consecutive hits; connector_caches.py); the
  request waits (WAITING_FOR_REMOTE_KVS) while the blocks are copied into GPU blocks, then is scheduled with them as
  cached blocks. The load is on the request's TTFT, not on any step. (Here: decided when the request reaches its
  replica, the loaded blocks enter the GPU cache as cached blocks, and the request reaches the scheduler ``load_s``
  later.) The request holds its GPU hit and loaded blocks until it is admitted: load_hold.py.

SGLang HiCache (``mem_cache/unified_radix_cache.py``, 0.5.23): ``write_through`` backs a node up to host as it enters
the tree (hit count ≥ 1), ``write_through_selective`` once it is matched again (≥ 2); at admission ``init_load_back``
loads the host-resident continuation of the device prefix (skipped under ``load_back_threshold`` = 10 tokens) into
device slots, layer by layer beside the forward pass: the prefill step takes max(its compute, the load).
``write_back`` (backup on device eviction): hicache_write_back.py; tiers below the host: offload_tiers.py.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import filterfalse, islice

from kvledger.dynamics.engine.connector_caches import ConnectorLRU, HostARC, KeyLRU
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.load_hold import LoadHolds
from kvledger.dynamics.engine.radix_cache import RadixKVManager
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.errors import InputError

__all__ = ["HostTier", "HostLRU", "OffloadingPagedKVManager", "HiCacheRadixKVManager", "LOAD_BACK_THRESHOLD"]

LOAD_BACK_THRESHOLD = 10  # SGLang unified_radix_cache.py load_back_threshold, tokens


@dataclass(frozen=True)
class HostTier:
    """The host tier as the simulator needs it.

    Attributes:
        capacity_units: blocks (vLLM) or segments (SGLang) the host holds, count.
        bytes_per_token: KV bytes per token per GPU, B. read_bytes_per_s: host → HBM, B/s.
        write_bytes_per_s: HBM → host, B/s.
        write_policy: SGLang "write_through" or "write_through_selective"; vLLM "write_through".
        eviction: vLLM's host cache policy, "lru" or "arc" (connector_caches.py); SGLang's host tier is LRU.
        chunk_tokens: LMCache's chunk size (256 by default), tokens; 0: the native connector's blocks. With chunks the
            units are chunks: only whole chunks of the prompt are stored (LMCache's defaults save_unfull_chunk and
            save_decode_cache are False) and a lookup counts whole chunks from the prompt's start.
        store_threshold: vLLM 0.33's ``store_threshold`` (store_gate.py; < 2: off), offers.
        disk_capacity_units / disk_read_bytes_per_s, remote_*: LMCache's local-disk and remote tiers below the host's,
            or HiCache's one storage backend (offload_tiers.py, hicache_storage.py; 0: none), units and B/s.
    """

    capacity_units: int
    bytes_per_token: float
    read_bytes_per_s: float
    write_bytes_per_s: float
    write_policy: str = "write_through"
    eviction: str = "lru"
    chunk_tokens: int = 0
    store_threshold: int = 0
    disk_capacity_units: int = 0
    disk_read_bytes_per_s: float = 0.0
    remote_capacity_units: int = 0
    remote_read_bytes_per_s: float = 0.0

    def __post_init__(self) -> None:
        if self.eviction not in ("lru", "arc"):
            raise InputError(f"host tier eviction must be 'lru' or 'arc' (vLLM's OffloadingConnector policies), got "
                             f"{self.eviction!r}")
        for name in ("chunk_tokens", "store_threshold", "disk_capacity_units", "remote_capacity_units"):
            if isinstance(v := getattr(self, name), bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"host tier {name} must be an integer ≥ 0, got {v!r}")

    def load_s(self, tokens: int) -> float:
        return tokens * self.bytes_per_token / self.read_bytes_per_s


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


class OffloadingPagedKVManager(LoadHolds, PagedKVManager):
    """vLLM's paged KV manager with the OffloadingConnector's CPU tier (module doc)."""

    def __init__(self, *args, host: HostTier, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.host = host
        # the OffloadingConnector's caches (connector_caches.py); LMCache's chunks: its own LRU, touched on a hit
        cache = HostARC if host.eviction == "arc" else HostLRU if host.chunk_tokens else ConnectorLRU
        self.lru = cache(host.capacity_units)
        self.host_hit_tokens = 0  # tokens loaded from the CPU tier, tokens
        self.host_load_s = 0.0  # Σ load time, s
        self._stored: dict[int, int] = {}  # request uid → units (blocks or chunks) offered to the CPU tier
        self.occupancy: list[tuple[float, int]] = []  # (arrival s of a request, CPU units held)
        self._per = max(1, host.chunk_tokens // self.block_size)  # blocks per host unit
        if host.chunk_tokens % self.block_size:
            raise InputError(f"LMCache's chunk ({host.chunk_tokens} tokens) must be whole blocks of {self.block_size}")

    def _offer(self, req: SimRequest, upto_tokens: int) -> None:
        per = self._per  # a chunk's key: its last block's chained key (it names the whole prefix)
        if per > 1:
            upto_tokens = min(upto_tokens, req.spec.num_prompt_tokens)
        full = upto_tokens // (self.block_size * per)
        start = self._stored.get(req.uid, 0)
        if full > start:
            keys = self._keys_range(req, start * per, full * per)
            self.lru.store_run(keys[per - 1::per] if per > 1 else keys)
            self._stored[req.uid] = full

    def admit(self, req, hits, num_new_tokens, must_fit_tokens, reserve_tokens=0) -> bool:
        ok = super().admit(req, hits, num_new_tokens, must_fit_tokens, reserve_tokens)
        if ok:
            self._offer(req, req.num_computed_tokens + num_new_tokens)
        return ok

    def grow(self, req, num_new_tokens) -> bool:
        ok = super().grow(req, num_new_tokens)
        if ok:
            self._offer(req, req.num_computed_tokens + num_new_tokens)
        return ok

    def free(self, req, preempted) -> None:
        self._offer(req, req.num_computed_tokens)
        self._stored.pop(req.uid, None)
        super().free(req, preempted)

    def free_finished(self, reqs) -> None:
        for r in reqs:
            self._offer(r, r.num_computed_tokens)
            self._stored.pop(r.uid, None)
        super().free_finished(reqs)

    def begin_load(self, req: SimRequest, queued: bool = False) -> float:
        """Look the request up in the CPU tier beyond its GPU hit; copy the hits into GPU cache blocks. Returns the
        load time, s (0: nothing to load). ``queued``: requests wait ahead of it (then not held: load_hold.py)."""
        if not self.enable_caching:
            return 0.0
        self.occupancy.append((req.arrival_s, self.lru.num_held))
        keys = self._keys(req)
        B = self.block_size
        limit = min(len(keys), (req.num_tokens - 1) // B)
        gpu_tokens = self.pool.cached_prefix_len(keys, limit) * B  # match(req)'s hit; its blocks only for a load
        if self._per == 1:  # the connector touches every full block of the request before the lookup
            self.lru.touch(self._keys_range(req, 0, req.num_tokens // B))
        start = gpu_tokens // B
        if self._per > 1:  # LMCache: whole chunks from the prompt's start, beyond the GPU hit
            chunk_keys = keys[self._per - 1:limit:self._per]
            n = self.lru.lookup(chunk_keys, 0, len(chunk_keys)) * self._per - start
        else:
            n = self.lru.lookup(keys, start, limit) if start < limit else 0
        if n <= 0:
            return 0.0
        hits = self.pool.cached_prefix(keys, start)
        n = min(n, self.pool.num_free_blocks - self.pool.num_in_free_queue(hits))
        if n <= 0:
            if hits:  # vLLM's allocation references them; nothing to load: released
                self.pool.touch(hits)
                self.pool.free(hits, len(hits), len(hits))
            return 0.0
        return self.load_blocks(req, keys, hits, start, n, queued)  # held until admitted, if it would be in vLLM

    def account_load(self, req: SimRequest, start: int, n: int) -> float:
        """Count the load of blocks ``start … start + n − 1`` of ``req`` from the host tier; its time, s."""
        t = self.host.load_s(n * self.block_size)
        self.host_hit_tokens += n * self.block_size
        self.host_load_s += t
        return t


class HiCacheRadixKVManager(RadixKVManager):
    """SGLang's radix cache with HiCache's host tier (module doc); host units are prompt segments."""

    def __init__(self, capacity_tokens: int, block_size: int = 1, *, host: HostTier) -> None:
        super().__init__(capacity_tokens, block_size)
        self.host, self.lru = host, HostLRU(host.capacity_units)
        self.host_hit_tokens = 0
        self.host_load_s = 0.0
        self.pending_load_s = 0.0  # load time of this step's admissions (read by LoadAwareStepCost), s
        self._seen: dict[int, int] = {}  # write_through_selective: segment key → requests that held it
        self._backed: dict[int, int] = {}  # request uid → its segments already offered to the host
        self.occupancy: list[tuple[float, int]] = []  # (arrival s of an admitted request, host segments held)

    def _chain(self, req: SimRequest) -> list[int]:
        if req.keys is None:  # the paged manager's slot, unused by the radix cache: the segments' chained keys
            prev, out = 0, []
            for seg in self._segments(req):
                prev = hash((prev, seg))
                out.append(prev)
            req.keys = out
        return req.keys

    def _backup(self, req: SimRequest, upto_tokens: int) -> None:
        S = req.spec.segment_tokens
        keys = self._chain(req)
        selective = self.host.write_policy == "write_through_selective"
        start, stop = self._backed.get(req.uid, 0), min(len(keys), upto_tokens // S)
        if stop > start:
            self._backed[req.uid] = stop
        if not selective:
            self.lru.store_run(keys[start:stop])
            return
        for k in keys[start:stop]:
            c = self._seen.get(k, 0) + 1
            self._seen[k] = c
            if c >= 2:
                self.lru.store(k)

    def after_prefill_step(self, req: SimRequest) -> None:
        super().after_prefill_step(req)
        self._backup(req, req.num_computed_tokens)

    def free(self, req: SimRequest, preempted: bool) -> None:
        self._backup(req, req.num_computed_tokens)
        self._backed.pop(req.uid, None)
        super().free(req, preempted)

    def match(self, req: SimRequest):
        (node, matched), hit = super().match(req)
        S = req.spec.segment_tokens
        keys = self._chain(req)
        start, limit = matched // S, min(len(keys), (req.num_tokens - 1) // S)
        if matched % S or start >= limit or req.num_preemptions:
            return (node, matched, 0), hit
        n = self.lru.lookup(keys, start, limit) * S
        n = min(n, req.num_tokens - 1 - hit)
        if n < LOAD_BACK_THRESHOLD:
            n = 0
        return (node, matched, n), hit + n

    def admit(self, req, handle, num_new_tokens, must_fit_tokens, reserve_tokens=0) -> bool:
        node, matched, host = handle
        if not super().admit(req, (node, matched), host + num_new_tokens, must_fit_tokens, reserve_tokens):
            return False
        if req.num_preemptions == 0:
            self.occupancy.append((req.arrival_s, self.lru.num_held))
        if host:
            req.num_computed_tokens += host
            t = self.host.load_s(host)
            self.host_hit_tokens += host
            self.host_load_s += t
            self.pending_load_s += t  # this step's loads share the host link
        return True

    def take_pending_load_s(self) -> float:
        t, self.pending_load_s = self.pending_load_s, 0.0
        return t
