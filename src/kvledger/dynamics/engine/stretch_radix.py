"""Pure-decode stretches in the radix KV manager (``radix_cache.RadixKVManager``): token slots, finished requests
cached in the tree; the same contract as the paged manager's (``stretch_alloc``: the stretch, ``lag``, the samples)."""

from __future__ import annotations

from itertools import accumulate

import numpy as np

from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.stretch_alloc import most_steps

__all__ = ["RadixStretches"]


class RadixStretches:
    """Stretch methods of RadixKVManager (radix_cache.py): token slots, finished requests cached in the tree."""

    def decode_step(self, running: list[SimRequest], comp: list[int], rems: list[int]) -> bool:
        """One step's decodes (see ``PagedStretches.decode_step``); False (nothing changed) when they do not fit."""
        if self.stretch_limit(running, comp, rems, 1) < 1:
            return False
        self.stretch_commit(running, comp, rems, 1, free_finished=False)
        return True

    # Same contract as PagedKVManager: request i (``comp[i]`` computed tokens at the start) decodes
    # in the first ``min(rems[i], k)`` steps; one with ``rems[i] <= k`` finishes after step ``rems[i] − 1``.
    def stretch_limit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                      reserve: int = 0) -> int:
        """A ``k' ≤ k`` such that the first ``k'`` steps find token slots and leave ``reserve`` (frees mid-stretch
        ignored: conservative)."""
        return most_steps(lambda steps: sum(max(0, c + min(m, steps) - r.covered_tokens)
                                            for r, c, m in zip(running, comp, rems)),
                          k, self.num_free_tokens + self.evictable_tokens - reserve)

    def stretch_commit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                       free_finished: bool = True, lag: int = 0):
        """Take slots piece by piece between finishes, freeing (caching) each finishing request after its last step
        (``lag`` 1, async scheduling: after the next step's slots; past the stretch, left to the caller).

        Returns what step-by-step execution samples in each step: with ``block_size`` 1 (slots are blocks) the paged
        manager's changes ``(used0, held0, (), drops, runs)`` (one slot a step per request: a run), else per-step
        ``(used_blocks, held_slots)`` arrays.
        """
        used0, held0 = self.tree_tokens - self.evictable_tokens + self.private_tokens, self.held_slots
        runs: list[int] = []  # (first step, steps): a request takes one new slot in each
        covered = []  # (request, slots it covers now, its computed tokens then, steps it decodes in this stretch)
        for r, c, m in zip(running, comp, rems):
            cov = r.covered_tokens
            first, end = max(0, cov - c), min(m, k)
            if first < end:
                runs += (first, end - first)
            covered.append([r, cov, c, m])
        finishers: dict[int, list] = {}
        for x in covered:
            stop = x[3] + lag
            if stop <= k:
                f = finishers.get(stop)
                if f is None:
                    finishers[stop] = [x]
                else:
                    f.append(x)
        alive, drops = covered, []
        for stop in sorted(finishers.keys() | {k}):
            # each request still decoding covers c + min(m, stop) slots by the piece's end (or what it covers)
            total = 0
            for x in alive:
                r, cov, c, m = x
                need = c + (m if m < stop else stop) - cov
                if need > 0:
                    x[1] = cov + need
                    r.private_tokens += need
                    r.covered_tokens += need
                    total += need
            if total > self.num_free_tokens:
                self._evict(total)
            self.private_tokens += total
            self.held_slots += total
            leaving = finishers.get(stop)
            if leaving is not None:
                for x in leaving:
                    if free_finished:  # finished in step m − 1: missing from step m's sample on
                        u, h = self.tree_tokens - self.evictable_tokens + self.private_tokens, self.held_slots
                        self.free(x[0], preempted=False)
                        drops.append((x[3], u - (self.tree_tokens - self.evictable_tokens + self.private_tokens),
                                      h - self.held_slots))
                alive = [x for x in alive if x[3] + lag > stop]
        if not free_finished:
            return None
        if self.block_size == 1:
            return used0, held0, (), drops, runs
        return self._per_step(used0, held0, runs, drops, k)

    def _per_step(self, used0: int, held0: int, runs: list[int], drops: list[tuple[int, int, int]], k: int):
        """(used blocks, held slots) in each of the ``k`` steps from the stretch's runs and drops (``block_size``
        above 1: slots are not blocks)."""
        got = [0] * (k + 1)  # new slots per step (as changes), then the frees' drops
        for j in range(0, len(runs), 2):
            got[runs[j]] += 1
            got[runs[j] + runs[j + 1]] -= 1
        got = list(accumulate(got))
        held = list(got)
        for m, du, dh in drops:
            got[m] -= du
            held[m] -= dh
        got, held = np.array(got, dtype=np.int64), np.array(held, dtype=np.int64)
        return (used0 + np.cumsum(got[:k])) / self.block_size, held0 + np.cumsum(held[:k])
