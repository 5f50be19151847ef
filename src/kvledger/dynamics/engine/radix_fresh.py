"""Admissions and frees of unshared requests in the radix cache, with the effect of ``RadixKVManager.admit`` and
``free`` in fewer operations (SGLang's arrival stretches settle many at once: fast/sglang_settle.py).

An unshared request (no prefix segments, its path the root, no leaf of its own in the tree) is admitted with no hit:
the root's path is locked (the clock moves once), its prompt's slots are taken (evicting least-recently-used leaves
where the free slots fall short) and the lookup is counted. Freed, its computed tokens become a new leaf under the
root, unlocked, stamped with the clock after three ticks (``_insert``, ``_child``'s, ``_unlock_path``'s), and pushed
on the eviction heap. ``add_slots`` takes decode slots without eviction and ``settle_overdraft`` evicts once for all
of them; which leaves go is the same as step by step (fast/sglang_settle.py argues it; tests compare the trees).
"""

from __future__ import annotations

import heapq

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["RadixFresh"]

_OWN = -1


class RadixFresh:
    """Mixed into RadixKVManager (radix_cache.py)."""

    def admit_fresh(self, reqs: list[SimRequest]) -> None:
        """Admit unshared requests with their whole prompts and no hit, in order (as ``admit(req, (root, 0), p, p)``
        each; their computed tokens set to the prompt, as after their prefill step)."""
        root, stats = self.root, self.prefix_stats
        for r in reqs:
            p = r.num_prompt_tokens
            self._tick += 1  # _lock_path(root)
            if p > self.num_free_tokens + self.evictable_tokens:
                raise RuntimeError("radix cache: an admission checked on counts did not fit")
            stats.requests += 1  # count_admission: PrefixCacheStats.record(p, 0, False)
            stats.queries += p
            r.num_cached_tokens = 0
            r.num_computed_tokens = p
            r.node, r.tree_tokens, r.private_tokens, r.covered_tokens = root, 0, p, p
            self.held_slots += p
            if p > self.num_free_tokens:
                self._evict(p)
            self.private_tokens += p

    def free_fresh(self, req: SimRequest) -> None:
        """``free(req, preempted=False)`` for an unshared request (its counters final)."""
        root, key = self.root, (_OWN, req.uid)
        tail = req.num_computed_tokens
        if tail <= 0 or key in root.children or req.node is not root or req.tree_tokens:
            self.free(req, preempted=False)
            return
        node = root.__class__(key, tail, root)
        root.children[key] = node
        self._tick += 3
        node.last_access = self._tick
        self.tree_tokens += tail
        self.evictable_tokens += tail
        self.private_tokens -= req.private_tokens
        self._seq += 1
        heapq.heappush(self._heap, (node.last_access, self._seq, node))
        self.held_slots -= req.covered_tokens
        req.node, req.tree_tokens, req.private_tokens, req.covered_tokens = None, 0, 0, 0

    def add_slots(self, req: SimRequest, num_slots: int) -> None:
        """A request's decode slots taken without eviction: the free slots may go below 0 until ``settle_overdraft``."""
        req.private_tokens += num_slots
        req.covered_tokens += num_slots
        self.private_tokens += num_slots
        self.held_slots += num_slots

    def settle_overdraft(self) -> None:
        """Evict least-recently-used leaves until no slot is overdrawn (after ``add_slots``)."""
        if self.num_free_tokens < 0:
            self._evict(0)
