"""SGLang HiCache's host tier under the simulated radix cache.

SGLang HiCache (``mem_cache/unified_radix_cache.py``, 0.5.23): ``write_through`` backs a node up to host as it enters
the tree (hit count ≥ 1), ``write_through_selective`` once it is matched again (≥ 2); at admission ``init_load_back``
loads the host-resident continuation of the device prefix (skipped under ``load_back_threshold`` = 10 tokens) into
device slots, layer by layer beside the forward pass: the prefill step takes max(its compute, the load).
``write_back`` (backup on device eviction): hicache_write_back.py; a storage tier below the host: hicache_storage.py.

Retraction and resume (0.5.23 ``managers/schedule_batch.py : release_req``, ``Req.init_next_round_input``): a
retracted request's KV is released without a checkpoint (``release_kv_cache(checkpoint=False)``), so the tree (and
the host, which backs up tree nodes) keeps what its prefill checkpointed, not what it decoded since
(``RadixKVManager.kept_tokens``); back in the waiting queue it is matched as any request, over prompt + output
(``match_prefix``, then ``init_load_back`` for the host-resident continuation). Its load-back counts apart from the
first-arrival hits (``host_resume_hit_tokens``, dynamics/resume_stats.py).
"""

from __future__ import annotations

from kvledger.dynamics.engine.connector_caches import HostLRU
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.engine.radix_cache import RadixKVManager
from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["HiCacheRadixKVManager", "LOAD_BACK_THRESHOLD"]

LOAD_BACK_THRESHOLD = 10  # SGLang unified_radix_cache.py load_back_threshold, tokens


class HiCacheRadixKVManager(RadixKVManager):
    """SGLang's radix cache with HiCache's host tier (module doc); host units are prompt segments."""

    reloads_in_hits = False  # its load-backs are not in prefix_stats' hits (the device's alone): resume_stats.py

    def __init__(self, capacity_tokens: int, block_size: int = 1, *, host: HostTier) -> None:
        super().__init__(capacity_tokens, block_size)
        self.host, self.lru = host, HostLRU(host.capacity_units)
        self.host_hit_tokens = 0  # loaded back at first admission, tokens
        self.host_resume_hit_tokens = 0  # loaded back for retracted requests' resumes, tokens
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
        self._backup(req, self.kept_tokens(req, preempted))
        self._backed.pop(req.uid, None)
        super().free(req, preempted)

    def match(self, req: SimRequest):
        (node, matched), hit = super().match(req)
        S = req.spec.segment_tokens
        keys = self._chain(req)
        start, limit = matched // S, min(len(keys), (req.num_tokens - 1) // S)
        if matched % S or start >= limit:
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
            if req.num_preemptions:
                self.host_resume_hit_tokens += host
            else:
                self.host_hit_tokens += host
            self.host_load_s += t
            self.pending_load_s += t  # this step's loads share the host link
        return True

    def take_pending_load_s(self) -> float:
        t, self.pending_load_s = self.pending_load_s, 0.0
        return t
