"""The blocks a request loaded from a lower KV tier, held for it until it is admitted (vLLM 0.33).

vLLM (``v1/core/sched/scheduler.py``, 0.33.0): a request whose KV a connector loads asynchronously is given its
blocks by ``allocate_slots`` (its GPU prefix hit and the blocks the load fills, ``delay_cache_blocks``) and waits
as WAITING_FOR_REMOTE_KVS; ``_update_waiting_for_remote_kv`` caches them when the load is done and the request,
still holding them in its block table, is scheduled later with ``num_computed_tokens`` already set. No other
admission can evict them meanwhile, and a scheduling attempt that fails leaves them with the request. Here: the
request takes a reference on those blocks at the load (``load_blocks``); its admission takes its own references and
drops the hold, as does its free.

vLLM starts a load when the scheduler reaches the request in its waiting queue (FCFS: every request ahead of it was
scheduled or is loading) and only if its whole sequence fits in the free blocks less those the in-flight loads still
need (``_inflight_prefill_reserved_blocks``, ``scheduler_reserve_full_isl``); otherwise the scheduler stops there and
tries again next step, loading nothing. The simulator does the same (offload.py: ``begin_load`` at arrival when nothing
waits ahead, else ``start_load`` when the scheduler reaches it), so every load is held and no loaded block is evicted
before its request uses it. Running requests' growth can still use the reserved blocks, so where holds would stall
the engine they give way: when an admission fails while no running request holds a block, or the lone running request
cannot grow, the other holds are released. A request admitted after its hold gave way counts as loaded only the loaded
blocks it still finds; those evicted meanwhile leave the tiers' hit counters (they are recomputed) and count as
loaded, unserved (``{tier}_unserved_tokens``): the load's time and bytes stay.
"""

from __future__ import annotations

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["LoadHolds"]


class LoadHolds:
    """Holds on loaded blocks for a paged KV manager (mixed in before ``PagedKVManager``; module doc)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # uid → (blocks held, first loaded, loaded, hit counts it added, blocks its admission will still allocate)
        self._held: dict[int, tuple[list[int], int, int, tuple, int]] = {}
        self._reserved = 0  # Σ of the holds' last field, blocks
        self._loose: dict[int, tuple[int, int, tuple]] = {}  # uid → (first loaded, loaded, counts): not held
        self.holds_given_way = 0  # holds released by the stall guard, count

    def load_fits(self, req: SimRequest, hits: list[int], n: int) -> bool:
        """Whether ``req``'s whole sequence fits, its GPU hit ``hits`` and ``n`` loaded blocks included, in the free
        blocks less those the in-flight loads still need (vLLM's ``allocate_slots`` with ``reserved_blocks`` and
        ``full_sequence_must_fit``): only then does vLLM start the load (module doc)."""
        pool = self.pool
        rest = -(-req.num_tokens // self.block_size) - len(hits) - n  # blocks its admission will still allocate
        return pool.num_in_free_queue(hits) + n + rest <= pool.num_free_blocks - self._reserved

    def load_blocks(self, req: SimRequest, keys: list[int], hits: list[int], start: int, n: int) -> float:
        """Copy blocks ``start … start + n − 1`` of ``req`` (keys ``keys``) from a lower tier into free GPU blocks
        beyond its GPU hit ``hits`` and count the load (``account_load``); the load time, s. Held for ``req`` (with
        the hit) until its admission; the caller checked ``load_fits``."""
        pool = self.pool
        rest = -(-req.num_tokens // self.block_size) - len(hits) - n  # blocks its admission will still allocate
        if hits:
            pool.touch(hits)
        ids = pool.allocate(n)
        pool.register_run(ids, keys[start:start + n])
        names = ("remote_hit_tokens", "disk_hit_tokens", "host_hit_tokens")  # taken back in this order: a run's
        # tail (remote, then disk) goes first
        before = [getattr(self, k, 0) for k in names]
        t = self.account_load(req, start, n)
        counts = tuple((k, getattr(self, k, 0) - b) for k, b in zip(names, before))
        if req.num_preemptions:  # a resumed request's reload: its own counters, so first-arrival hit shares hold
            counts = tuple(_to_resume(self, k, d) for k, d in counts)
        self._held[req.uid] = (hits + ids, start, n, counts, rest)
        self._reserved += rest
        return t

    @property
    def held_for_load_blocks(self) -> int:
        """Blocks held by requests that loaded and wait for admission, count."""
        return sum(len(h[0]) for h in self._held.values())

    def _release(self, uid: int) -> tuple | None:
        h = self._held.pop(uid, None)
        if h is not None:
            self.pool.free(h[0], len(h[0]), len(h[0]))
            self._reserved -= h[4]
        return h

    def _release_others(self, uid: int) -> bool:
        """Release every hold but ``uid``'s (the stall guard, module doc); whether any was released."""
        others = [u for u in self._held if u != uid]
        for u in others:
            _, start, n, counts, _ = self._release(u)
            self._loose[u] = (start, n, counts)
        self.holds_given_way += len(others)
        return bool(others)

    def _unserve(self, req: SimRequest) -> None:
        """A request whose loaded blocks were not held is admitted: those evicted since were not served by the tier
        (they are recomputed), so their tokens leave its hit counters for ``{tier}_unserved_tokens`` (the load's time
        and bytes stay)."""
        start, n, counts = self._loose.pop(req.uid)
        lost = (n - max(0, min(n, req.num_computed_tokens // self.block_size - start))) * self.block_size
        for name, tokens in counts:
            take = min(lost, tokens)
            if take:
                setattr(self, name, getattr(self, name) - take)
                unserved = name.replace("_hit_", "_unserved_")
                setattr(self, unserved, getattr(self, unserved, 0) + take)
                lost -= take

    def admit(self, req, hits, num_new_tokens, must_fit_tokens, reserve_tokens=0) -> bool:
        ok = super().admit(req, hits, num_new_tokens, must_fit_tokens, reserve_tokens)
        if not self._held and not self._loose:
            return ok
        if not ok and self._held and not self._req_blocks and self._release_others(req.uid):
            ok = super().admit(req, self.match(req)[0], num_new_tokens, must_fit_tokens, reserve_tokens)
        if ok:
            self._release(req.uid)  # its own allocation now references the blocks it held
            if req.uid in self._loose:
                self._unserve(req)
        return ok

    def grow(self, req, num_new_tokens) -> bool:
        ok = super().grow(req, num_new_tokens)
        if not ok and self._held and self._req_blocks == len(req.blocks) and self._release_others(req.uid):
            ok = super().grow(req, num_new_tokens)
        return ok

    def free(self, req, preempted) -> None:
        if self._held or self._loose:
            self._release(req.uid)
            self._loose.pop(req.uid, None)
        super().free(req, preempted)


def _to_resume(kv, name: str, tokens: int) -> tuple[str, int]:
    """Move ``tokens`` just counted in ``{tier}_hit_tokens`` to ``{tier}_resume_hit_tokens`` (a resumed request's
    reload; its admission counts in ``prefix_stats.preempted_hits``, not in ``hits``); the (counter, tokens) pair
    ``_unserve`` takes back from."""
    resume = name.replace("_hit_", "_resume_hit_")
    if tokens:
        setattr(kv, name, getattr(kv, name) - tokens)
        setattr(kv, resume, getattr(kv, resume, 0) + tokens)
    return resume, tokens
