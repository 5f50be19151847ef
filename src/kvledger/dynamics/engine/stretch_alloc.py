"""Pure-decode stretches in the KV managers: how many steps' blocks fit, and handing them out (and freeing finishers).

A stretch: request ``i`` (``comp[i]`` computed tokens at the start) decodes one token in each
of the first ``min(rems[i], k)`` steps; one with ``rems[i] <= k`` finishes after its step
``rems[i] − 1`` and is freed before the next step allocates, or with ``lag`` 1 (async
scheduling, replica.py) after the next step's allocations (a free that would fall past the
stretch is left to the caller). ``stretch_commit`` also returns what step-by-step execution
would sample in each step (held blocks and KV slots), so the KV-usage figures of a stretch
equal those of the steps it stands for. Either way a finisher of step ``m − 1`` is first
missing from step ``m``'s sample: the general step samples after its allocations and, under
async scheduling, after freeing the step before's finishers (``Replica.drain``).
"""

from __future__ import annotations

from bisect import bisect_left
from operator import itemgetter

import numpy as np

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["PagedStretches", "NoStretches", "most_steps"]


def most_steps(need, k: int, budget: int) -> int:
    """The most steps ``s ≤ k`` whose ``need(s)`` (non-decreasing in ``s``, 0 at 0) stays within ``budget`` (0 when
    none does), by bisection."""
    if need(k) <= budget:
        return k
    lo, hi = 0, k  # need(lo) <= budget < need(hi), or nothing fits (lo stays 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid)
    return lo


class NoStretches:
    """The fast path's methods of a KV manager that has none (``supports_stretches`` False: Replica turns its fast path
    off): no decode shortcut, no stretch."""

    supports_stretches = False

    def decode_step(self, running, comp, rems) -> bool:
        return False

    def stretch_limit(self, running, comp, rems, k: int, reserve: int = 0) -> int:
        return 0

    def stretch_commit(self, *args, **kwargs) -> None:
        raise RuntimeError(f"{type(self).__name__} has no vectorised stretches (stretch_limit is 0)")


class PagedStretches:
    """Stretch methods of PagedKVManager (kv_manager.py): blocks of ``block_size`` tokens from a BlockPool."""

    # A stretch: request i (computed ``comp[i]`` tokens at the start) decodes one token in each
    # of the first ``min(rems[i], k)`` steps; a request with ``rems[i] <= k`` finishes after its
    # step ``rems[i] − 1`` and its blocks are freed before the next step allocates.
    def stretch_limit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                      reserve: int = 0) -> int:
        """A ``k' ≤ k`` such that the first ``k'`` steps find their blocks and leave ``reserve`` free (frees mid-stretch
        ignored: conservative). vLLM V0 decodes only while a block is free, needed or not (``can_append_slot``): its
        stretches reserve 1 (scheduler.py); stopping short is exact, the general step takes over."""
        budget = self.pool.num_free_blocks - reserve
        B = self.block_size
        if self.custom_bft:
            if self.step_blocks is not None:  # a Mamba state page crossed takes a general step (swa_step.py)
                k = self.step_blocks.steps_before_crossing(comp, rems, k)
                if k == 0:
                    return 0
            return int(np.searchsorted(self._stretch_allocs(running, comp, rems, k)[1], budget, side="right"))
        if len(running) * (k // B + 1) <= budget:
            return k
        return most_steps(lambda steps: sum(max(0, (c + min(m, steps) + B - 1) // B - len(r.blocks))
                                            for r, c, m in zip(running, comp, rems)), k, budget)

    def decode_step(self, running: list[SimRequest], comp: list[int], rems: list[int]) -> bool:
        """One step's decodes (a mixed step's): each running request's block for its next token, in running order;
        ``stretch_limit`` then ``stretch_commit(k=1, free_finished=False)``, without their generality. False (nothing
        changed) when the blocks do not fit."""
        if self.custom_bft:
            if self.stretch_limit(running, comp, rems, 1) < 1:
                return False
            self.stretch_commit(running, comp, rems, 1, free_finished=False)
            return True
        B = self.block_size  # a request needs a block when its computed tokens fill its blocks
        need = [r for r, c in zip(running, comp) if len(r.blocks) * B == c]
        if need:
            pool = self.pool
            if len(need) > pool.num_free_blocks:
                return False
            for r, b in zip(need, pool.allocate(len(need))):
                r.blocks.append(b)
            self._req_blocks += len(need)
        return True

    def _stretch_allocs(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int):
        c = np.asarray(comp, dtype=np.int64)
        held = np.fromiter((len(r.blocks) for r in running), np.int64, len(running))
        steps = np.minimum(np.arange(1, k + 1, dtype=np.int64)[None, :], np.asarray(rems, dtype=np.int64)[:, None])
        need = np.maximum(self._bft_vec(c[:, None] + steps), held[:, None])
        need = np.maximum.accumulate(need, axis=1)
        new = np.diff(need, axis=1, prepend=held[:, None])
        return new, np.cumsum(new.sum(axis=0))

    def stretch_commit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                       free_finished: bool = True, lag: int = 0):
        """Allocate the stretch's blocks and free finishing requests, in step-by-step order.

        Within a step, blocks go in running order; a request that finishes in a step is freed
        after that step's allocations (unless ``free_finished`` is False: the caller frees
        them), or with ``lag`` 1 (async scheduling) after the next step's; one whose free would
        fall past the stretch is left to the caller. The requests' token counters must already
        be final when freeing here.
        Returns what step-by-step execution samples in each step, after its allocations and
        without the requests that finished in an earlier step, as changes (see
        ``KvUsageTracker.add_stretch``): ``(used blocks and held slots before the stretch, the step
        of each block allocated, [(step from which a free counts, used blocks, held blocks)],
        allocation runs [first step, blocks, …] one block every ``block_size`` steps)``; with
        ``free_finished`` False: None.

        With no block registered in the cache (and no stale queue entry), which block goes to whom
        cannot change any figure (unregistered blocks are interchangeable, and nothing registers
        during a stretch), so the blocks are handed out request by request (``_commit_bulk``);
        otherwise in step, then running order, as vLLM's allocator pops them.
        """
        if k > 1 and self.pool.is_uncached and not self.custom_bft:
            return self._commit_bulk(running, comp, rems, k, free_finished, lag)
        B, n = self.block_size, len(running)
        two_n = 2 * n
        used0, req0 = self.num_used_blocks, self._req_blocks
        # event keys: j·2n + i allocates a block for request i in step j; j·2n + n + i frees request i after step j
        ev = self._alloc_events(running, comp, rems, k, two_n)
        frees = [(m - 1 + lag) * two_n + n + i for i, m in enumerate(rems) if m + lag <= k] if free_finished else None
        if not frees:
            if not ev:
                return (used0, req0 * B, ev, (), ()) if free_finished else None
            if len(ev) > 1:
                ev.sort()
            steps = []
            for e, b in zip(ev, self.pool.allocate(len(ev))):
                j, i = divmod(e, two_n)
                running[i].blocks.append(b)
                steps.append(j)
            self._req_blocks += len(ev)
            return (used0, req0 * B, steps, (), ()) if free_finished else None
        ev.sort()
        frees.sort()
        return used0, req0 * B, [e // two_n for e in ev], self._interleave(running, ev, frees, two_n, lag), ()

    def _alloc_events(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                      two_n: int) -> list[int]:
        """The stretch's block allocations as event keys ``step·2n + request`` (``stretch_commit``), unsorted."""
        B, n = self.block_size, len(running)
        if self.custom_bft:
            new, _ = self._stretch_allocs(running, comp, rems, k)
            keys = (np.arange(k)[:, None] * two_n + np.arange(n)[None, :]).ravel()
            return np.repeat(keys, new.T.ravel()).tolist()
        if k == 1:  # one step: only requests whose blocks are exactly full need one
            return [idx for idx, (r, c) in enumerate(zip(running, comp)) if len(r.blocks) * B == c]
        ev = []
        for idx, (r, c, m) in enumerate(zip(running, comp, rems)):
            j = len(r.blocks) * B - c
            end = m if m < k else k
            if j < end:
                if j + B >= end:
                    ev.append(j * two_n + idx)
                else:
                    ev.extend(range(j * two_n + idx, end * two_n, B * two_n))
        return ev

    def _interleave(self, running: list[SimRequest], ev: list[int], frees: list[int], two_n: int,
                    lag: int) -> list[tuple[int, int, int]]:
        """Hand out the sorted allocations ``ev`` and free the finishers ``frees`` (keys ``step·2n + n + request``) in
        key order; the drops (first step not sampling a freed request — the step after the one whose allocations it
        follows, or with ``lag`` 1 that step itself —, blocks used it released, request blocks it released)."""
        n = two_n // 2
        drops = []
        pos = 0
        # allocations keyed before a free happen before it (keys are unique: step, then kind, then request)
        for f in frees:
            cut = bisect_left(ev, f, pos)
            if cut > pos:
                self._hand_out(running, [e % two_n for e in ev[pos: cut]])
                pos = cut
            j, i = divmod(f, two_n)
            r = running[i - n]
            held, free0 = len(r.blocks), self.pool.num_free_blocks  # blocks shared with another holder stay used
            self.free(r, preempted=False)
            drops.append((j + 1 - lag, self.pool.num_free_blocks - free0, held))
        if pos < len(ev):
            self._hand_out(running, [e % two_n for e in ev[pos:]])
        return drops

    def _commit_bulk(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int, free_finished: bool,
                     lag: int) -> tuple | None:
        """``stretch_commit`` when no block is registered: each request's blocks at once, then the finishers freed.

        Request i needs a block in the steps where its computed tokens fill its blocks:
        ``j = blocks·B − computed`` and every ``B`` steps after, while it decodes (``min(rems, k)``
        steps). All of them fit before any free (``stretch_limit`` counts no free), and a
        finisher's free counts from the step after its last (``lag`` 1: the general step frees it
        before sampling that step; past the stretch: left to the caller).
        """
        B, pool = self.block_size, self.pool
        used0, req0 = self.num_used_blocks, self._req_blocks
        runs: list[int] = []
        takes: list[tuple[SimRequest, int]] = []
        for r, c, m in zip(running, comp, rems):
            j = len(r.blocks) * B - c
            end = m if m < k else k
            if j < end:
                cnt = (end - j - 1) // B + 1
                runs += (j, cnt)
                takes.append((r, cnt))
        self.take_in_turn(takes)
        if not free_finished:
            return None
        drops = []
        for r, m in zip(running, rems):
            if m + lag <= k:  # last token in step m − 1: missing from the samples from step m on
                held, free0 = len(r.blocks), pool.num_free_blocks
                self.free(r, preempted=False)
                drops.append((m, pool.num_free_blocks - free0, held))
        return used0, req0 * B, (), drops, runs

    def take_in_turn(self, takes: list[tuple[SimRequest, int]]) -> None:
        """Give each request its count of blocks from the free queue's front, request by request, in one allocation.

        Exact only when the pool ``is_uncached``: unregistered blocks are interchangeable, so which block goes to whom
        changes no figure (``_commit_bulk``; open_stretch.py's settlement)."""
        ids = self.pool.allocate(sum(map(itemgetter(1), takes)))
        h = 0
        for r, n in takes:
            r.blocks += ids[h: h + n]
            h += n
        self._req_blocks += h

    def _hand_out(self, running: list[SimRequest], order: list[int]) -> None:
        for idx, b in zip(order, self.pool.allocate(len(order))):
            running[idx].blocks.append(b)
        self._req_blocks += len(order)
