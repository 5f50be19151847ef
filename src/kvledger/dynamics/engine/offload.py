"""A host-memory KV tier under vLLM: the OffloadingConnector rule and LMCache's chunks (the host tier's settings,
``HostTier``, are shared with SGLang HiCache's: hicache_host.py).

vLLM (``distributed/kv_transfer/kv_connector/v1/offloading_connector.py``, 0.11.0–0.33.0; ``kv_offload`` LRU):

* Store, write-through: after each schedule, every block that the scheduled tokens complete is offered to the CPU
  tier (``_get_reqs_to_store``); ``prepare_store`` skips blocks already there and evicts least-recently-used CPU
  blocks to make room (a run at once, or not at all). Stores are asynchronous, off the step's critical path.
  0.19.0–0.22.0 offer every full block, prompt and generated (0.19.0 ``_get_reqs_to_store``, 0.22.0
  ``_build_store_jobs``: up to ``min(computed + scheduled, num_tokens)``); from 0.23.0 only the prompt's full blocks
  unless the user turns ``kv_connector_extra_config`` ``offload_prompt_only`` (default True, ``v1/kv_offload/base.py``
  OffloadingSpec) off: 0.23.0 ``_build_store_jobs`` and 0.33.0 ``_calc_num_offloadable_tokens`` cap the offloadable
  tokens at ``num_prompt_tokens``, so a session's next turn finds its previous turn's output only in HBM. (Here:
  prompt blocks when they are scheduled; blocks a pure-decode stretch fills are offered when the request frees them,
  none with ``prompt_only``.)
* Load (``offloading/scheduler.py : get_num_new_matched_tokens``, ``update_state_after_alloc`` and
  ``v1/core/sched/scheduler.py : schedule``, 0.33.0): when the scheduler reaches a request at the head of its waiting
  queue (FCFS), every full block of it is touched in the CPU tier, which is then looked up from the end of its GPU
  prefix hit (consecutive hits, in blocks: ``--kv-offloading-size`` sets no ``blocks_per_chunk``, so a chunk is one
  GPU block; connector_caches.py). ``allocate_slots`` then gives the request its hit and the loaded blocks only if
  its whole sequence fits beside the in-flight loads' reservations; if not, the scheduler stops and nothing is
  loaded (it tries again next step). ``schedule`` asks the connector at every attempt while the request has nothing
  computed (0.19.0 and 0.33.0: ``if request.num_computed_tokens == 0``), so a request whose lookup found nothing and
  that was not admitted is looked up again at its next attempt (native connector; another request may have stored
  its prefix meanwhile). A started load leaves the queue (WAITING_FOR_REMOTE_KVS, its blocks in its
  block table, so none is evicted before use) and the scheduler goes on to the next request; when the copy is done
  the request is scheduled first (``kv_holding_waiting``) with the blocks as cached blocks. The load is on the
  request's TTFT, not on any step. (Here: ``begin_load`` when the request reaches its replica with nothing waiting
  ahead, else ``start_load`` when the scheduler reaches it; the request re-enters the queue's front ``load_s``
  after the schedule that started it: load_hold.py.)
* Resume after preemption (``v1/core/sched/scheduler.py : _preempt_request`` and ``schedule``, 0.19.0 and 0.33.0):
  a preempted request is looked up again, in HBM and in the CPU tier, at each attempt to schedule it, over all its
  full blocks (0.19.0–0.22.0 stored generated blocks too; from 0.23.0 ``offload_prompt_only``, ``prompt_only`` here);
  its reloads count apart from first-arrival hits (``host_resume_hit_tokens``; resume_stats.py).
* LMCache 0.5.6 (``integration/vllm/vllm_v1_adapter.py`` for ``LMCacheConnectorV1``, ``lmcache_mp_connector.py``
  for ``LMCacheMPConnector``, which vLLM 0.33.0 imports from lmcache when installed): ``get_num_new_matched_tokens``
  looks ``request.all_token_ids`` up in whole chunks from token 0, a resumed request's afresh (``clear_lookup_status``
  at its first admission; MP drops a preempted request's tracker), and returns the chunks hit less the current HBM
  hit. The chunk count is kept (``lookup_cache``, ``_pending_lookups``; chunks pinned) until admission, the load
  recounted at each attempt: a request that found chunks is asked again (here looked up afresh); one that found none
  is not. Only whole prompt chunks are saved (``save_decode_cache`` off: ``ReqMeta.from_request_tracker``,
  ``GetStoreMetadata``), so a resume reloads at most its prompt's whole chunks beyond its HBM hit. On resume MP saves
  the prompt's chunks from its LMCache hit on; V1's tracker is still in decode phase if it had decoded: none.
* LMCache's load in the step (``HostTier.load_in_step``): vLLM before 0.33 runs ``--kv-offloading-backend lmcache``
  as ``LMCacheConnectorV1`` (``config/vllm.py``, read in 0.12.0 and 0.19.0), whose ``get_num_new_matched_tokens``
  returns load_async False (``lmcache_connector.py``; LMCache 0.5.6 ``vllm_v1_adapter.py``, ``enable_async_loading``
  off by default). The scheduler then schedules the request the step it reaches it, its LMCache hit counted as
  computed, and the worker loads the KV inside that step: ``start_load_kv`` before the forward, a blocking retrieve
  per request (LMCache's ``use_layerwise`` is off by default, so nothing overlaps the forward). Here: ``start_load``
  copies the hit into held blocks and returns 0 (the scheduler admits the request as usual, the loaded blocks its
  prefix hit); its admission adds the load time to ``pending_load_s``, which the step cost adds to the step's time
  (offload_sim.py ``InStepLoadStepCost``). vLLM 0.33.0 runs LMCache through ``LMCacheMPConnector``, whose loads are
  asynchronous (load_async True for a hit): the queue-leaving path above, as for the native connector.

SGLang HiCache's host tier: hicache_host.py; tiers below the host: offload_tiers.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.dynamics.engine.connector_caches import ConnectorLRU, HostARC, HostLRU
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.load_hold import LoadHolds
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.errors import InputError

__all__ = ["HostTier", "HostLRU", "OffloadingPagedKVManager"]


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
        load_in_step: LMCache through ``LMCacheConnectorV1`` (vLLM before 0.33): a hit is loaded in the step that
            schedules the request, its time added to that step's (module doc); False: the asynchronous,
            queue-leaving load. With chunks only (the native connector's loads are asynchronous).
        prompt_only: vLLM's native connector from 0.23.0 (``offload_prompt_only``, default True: v1/kv_offload/base.py;
            offloading/scheduler.py caps the offloadable tokens at the prompt): a resumed request's generated blocks
            are never stored (``_offer`` caps at the prompt, module doc), so a resume's reload stops at its prompt's
            last full block (``_lookup_range``) and a session's next turn finds none of its previous output there.
            The user's ``offload_prompt_only`` False (kvledger ``--no-offload-prompt-only``) gives 0.19.0's rule.
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
    load_in_step: bool = False
    prompt_only: bool = False

    def __post_init__(self) -> None:
        if self.eviction not in ("lru", "arc"):
            raise InputError(f"host tier eviction must be 'lru' or 'arc' (vLLM's OffloadingConnector policies), got "
                             f"{self.eviction!r}")
        for name in ("chunk_tokens", "store_threshold", "disk_capacity_units", "remote_capacity_units"):
            if isinstance(v := getattr(self, name), bool) or not isinstance(v, int) or v < 0:
                raise InputError(f"host tier {name} must be an integer ≥ 0, got {v!r}")
        if self.load_in_step is not False and (self.load_in_step is not True or not self.chunk_tokens):
            raise InputError(f"host tier load_in_step must be True or False, and True only with LMCache's chunks "
                             f"(vLLM's native connector loads asynchronously), got {self.load_in_step!r} with "
                             f"chunk_tokens {self.chunk_tokens}")
        if self.prompt_only is not False and (self.prompt_only is not True or self.chunk_tokens):
            raise InputError(f"host tier prompt_only must be True or False, and True only for vLLM's native "
                             f"connector's blocks (chunk_tokens 0), got {self.prompt_only!r} with chunk_tokens "
                             f"{self.chunk_tokens}")

    def load_s(self, tokens: int) -> float:
        return tokens * self.bytes_per_token / self.read_bytes_per_s


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
        self._deferred: set[int] = set()  # uids whose load waits for the scheduler to reach them (start_load)
        self._arrival_looked: set[int] = set()  # uids begin_load looked up, nothing found: its lookup is the first
        # attempt's; later attempts look up again (module doc)
        self._started: list[tuple[SimRequest, float]] = []  # loads start_load began: (request, load time s)
        self._in_step: dict[int, float] = {}  # load_in_step: uid → load time s its admission's step takes on
        self.pending_load_s = 0.0  # load_in_step: the load time of this step's admissions (InStepLoadStepCost), s
        self._per = max(1, host.chunk_tokens // self.block_size)  # blocks per host unit
        self._found = 0  # LMCache: chunks the last lookup found (one that found some is asked again)
        if host.chunk_tokens % self.block_size:
            raise InputError(f"LMCache's chunk ({host.chunk_tokens} tokens) must be whole blocks of {self.block_size}")

    def _offer(self, req: SimRequest, upto_tokens: int) -> None:
        per = self._per  # a chunk's key: its last block's chained key (it names the whole prefix)
        if per > 1 and self.host.load_in_step and req.num_preemptions and req.num_generated > 1:
            return  # LMCacheConnectorV1: a resumed request that had decoded keeps is_decode_phase, saving nothing
        if per > 1 or self.host.prompt_only:  # LMCache: save_decode_cache off; vLLM ≥ 0.23: offload_prompt_only
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
            self._deferred.discard(req.uid)  # kept for its next attempt's lookup (``start_load``)
            self._arrival_looked.discard(req.uid)
            self._offer(req, req.num_computed_tokens + num_new_tokens)
            if self._in_step:
                self.pending_load_s += self._in_step.pop(req.uid, 0.0)  # loaded in this step (module doc)
        return ok

    def grow(self, req, num_new_tokens) -> bool:
        ok = super().grow(req, num_new_tokens)
        if ok:
            self._offer(req, req.num_computed_tokens + num_new_tokens)
        return ok

    def free(self, req, preempted) -> None:
        self._offer(req, req.num_computed_tokens)
        self._stored.pop(req.uid, None)
        self._deferred.discard(req.uid)
        self._arrival_looked.discard(req.uid)
        self._in_step.pop(req.uid, None)
        super().free(req, preempted)
        if preempted and self.enable_caching:
            # vLLM asks the connector again when it reaches the resumed request: ``schedule`` looks up every waiting
            # request with num_computed_tokens 0 (v1/core/sched/scheduler.py, 0.19.0 and 0.33.0), a preempted one
            # too; its pending stores were flushed at the preemption (offloading connector ``build_connector_meta``:
            # preempted_req_ids), so its own stored blocks can load back (``_lookup_range``); LMCache's too
            self._deferred.add(req.uid)

    def free_finished(self, reqs) -> None:
        for r in reqs:
            self._offer(r, r.num_computed_tokens)
            self._stored.pop(r.uid, None)
        super().free_finished(reqs)

    def begin_load(self, req: SimRequest, queued: bool = False) -> float:
        """At arrival: with no request waiting ahead (``queued`` False) the scheduler reaches it at once, so look it
        up in the CPU tier beyond its GPU hit and load the hits into held GPU blocks (``_try_load``); else, or when
        its sequence does not fit beside the in-flight loads, the load waits for ``start_load``. Returns the load
        time, s (0: nothing loads now)."""
        if not self.enable_caching:
            return 0.0
        self.occupancy.append((req.arrival_s, self.lru.num_held))
        t = None if queued or self.host.load_in_step else self._try_load(req)  # an in-step load waits for a step
        if t is None or (t == 0.0 and (self._per == 1 or self._found)):  # asked again next attempt
            self._deferred.add(req.uid)
            if t is not None:
                self._arrival_looked.add(req.uid)
            return 0.0
        return t

    def start_load(self, req: SimRequest) -> float | None:
        """The scheduler reached ``req`` at the head of its waiting queue (vLLM 0.33 ``schedule``: the connector's
        ``get_num_new_matched_tokens`` then ``allocate_slots``): its deferred load, if any. Returns None when its
        sequence does not fit (the scheduler stops, and tries again next step), 0.0 when nothing loads (admit it as
        usual), else the load time, s: the request leaves the queue (WAITING_FOR_REMOTE_KVS) and the caller takes
        it back from ``take_started_loads``. With ``load_in_step`` a load returns 0.0 too: the request is admitted
        now, the loaded blocks its prefix hit, and its admission puts the load on the step (module doc)."""
        if req.uid not in self._deferred:
            return 0.0
        if req.uid in self._arrival_looked:  # the attempt ``begin_load`` looked it up for
            self._arrival_looked.discard(req.uid)
            return 0.0
        t = self._try_load(req)
        if t is None:
            return None
        if t > 0 or self._per > 1 and not self._found:  # one that loads nothing now is looked up again at its
            self._deferred.discard(req.uid)  # next attempt, as vLLM asks at each while nothing is computed (module
            # doc; its HBM hit may shrink, another request may store its prefix); LMCache's only if it found chunks
        if t > 0:
            if self.host.load_in_step:
                self._in_step[req.uid] = t
                return 0.0
            self._started.append((req, t))
        return t

    def take_pending_load_s(self) -> float:
        """The load time of the admissions since the last call (``load_in_step`` only; else 0), s."""
        t, self.pending_load_s = self.pending_load_s, 0.0
        return t

    def take_started_loads(self) -> list[tuple[SimRequest, float]]:
        """The (request, load time s) of the loads ``start_load`` started since the last call."""
        out, self._started = self._started, []
        return out

    def _try_load(self, req: SimRequest) -> float | None:
        """Look ``req`` up in the CPU tier beyond its GPU hit and copy the hits into GPU blocks held for it; the load
        time, s (0.0: nothing to load), or None when its sequence would not fit beside the in-flight loads."""
        keys, limit, start = self._lookup_range(req)
        B = self.block_size
        if self._per == 1:  # the connector touches every full block of the request before the lookup
            self.lru.touch(self._keys_range(req, 0, req.num_tokens // B))
        if self._per > 1:  # LMCache: whole chunks from the prompt's start, beyond the GPU hit
            chunk_keys = keys[self._per - 1:limit:self._per]
            self._found = self.lru.lookup(chunk_keys, 0, len(chunk_keys))
            n = self._found * self._per - start
        else:
            n = self.lru.lookup(keys, start, limit) if start < limit else 0
        if n <= 0:
            return 0.0
        hits = self.pool.cached_prefix(keys, start)
        n = min(n, self.pool.num_free_blocks - self.pool.num_in_free_queue(hits))
        if n <= 0 or not self.load_fits(req, hits, n):
            return None
        return self.load_blocks(req, keys, hits, start, n)

    def _lookup_range(self, req: SimRequest) -> tuple[list[int], int, int]:
        """(the keys the CPU tier is looked up on, how many of them, the GPU hit in blocks: ``match(req)``'s).

        At first arrival only shareable blocks can be anywhere (prefix_keys.py). A resumed request (preempted by
        recompute) looks up all its full blocks, its own prompt and generated ones too: vLLM hashes every full block
        of prompt and output (request.py ``append_output_token_ids`` → ``update_block_hashes``; ``allocate_slots``
        caches up to ``min(computed + new, num_tokens)``), 0.19.0's connector stores them all (offloading/scheduler.py
        ``_get_reqs_to_store``) and ``get_num_new_matched_tokens`` looks the request's ``block_hashes`` up from its GPU
        hit, ``match``'s: its freed, hashed blocks stay cached in the free queue until reused (``free_blocks``)."""
        B = self.block_size
        if req.num_preemptions:  # LMCache: only the prompt's chunks were saved (save_decode_cache off)
            limit = min(req.num_tokens - 1, req.num_prompt_tokens if self.host.prompt_only or self._per > 1 else
                        req.num_tokens) // B
            return self._keys_range(req, 0, limit), limit, len(self.match(req)[0])
        keys = self._keys(req)
        limit = min(len(keys), (req.num_tokens - 1) // B)
        return keys, limit, self.pool.cached_prefix_len(keys, limit)

    def account_load(self, req: SimRequest, start: int, n: int) -> float:
        """Count the load of blocks ``start … start + n − 1`` of ``req`` from the host tier; its time, s."""
        t = self.host.load_s(n * self.block_size)
        self.host_hit_tokens += n * self.block_size
        self.host_load_s += t
        return t
