"""Time-weighted KV usage of one replica in bounded memory: per-step samples buffered compactly and folded in exact
left-to-right sums.

Usage = blocks held by requests / usable blocks (vLLM's "GPU KV cache usage"; cached blocks
with no holder count as free). Token-state share = Σ computed tokens of running requests / Σ KV
slots allocated to them (each request's blocks × block_size, a shared block counted for each
holder): the quantity the PagedAttention paper's Fig. 2 calls "token states" (20.4–38.2 % for
Orca variants, 96.3 % for vLLM). Stored tokens are capped at the held slots each step: a sliding window or a
recurrent state holds fewer slots than the tokens computed, and all of what it holds is state. Both are sampled after
each step's allocations (before its
finished requests are freed) and weighted by the step's duration. The usage series keeps at most
``MAX_USAGE_BUCKETS`` time buckets, doubling their width as the run grows; a step counts in the
bucket where it starts (usage_buckets.py).

Buffering: step starts and durations go into two Python lists (or, from an arrival stretch, two
arrays kept as they are); the three sampled counts are kept as changes, not per step — used blocks and held slots as
values set at a step (a general step's
sample, a stretch's starting point) plus whole-block changes within stretches (the steps where a
block was allocated: +1 block, +``block_size`` slots; requests freed: −their blocks), stored
tokens as affine pieces (first step, steps, value, slope per step). A steady-decode stretch thus
costs a few list appends instead of per-step work. Every ``CHUNK_STEPS`` steps the buffer is
expanded into per-step arrays — each sample is the value last set plus the integer changes since,
so it equals the sampled number exactly — and folded in by ``np.cumsum``, which adds left to
right: every total is bit for bit the sum a step-at-a-time loop would reach.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from kvledger.dynamics.outputs import step_runs
from kvledger.dynamics.outputs.step_runs import changed_sets, per_step_floats, stored_quads
from kvledger.dynamics.outputs.usage_buckets import MAX_USAGE_BUCKETS, UsageBuckets

__all__ = ["KvUsageTracker", "MAX_USAGE_BUCKETS", "CHUNK_STEPS"]

CHUNK_STEPS = 4096  # steps buffered before they are folded into the totals


class KvUsageTracker:
    """Time-weighted KV usage and token-state share of one replica (see the module doc)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._busy_s = 0.0
        self._usage_s = 0.0  # ∫ usage dt, s
        self._max_usage = 0.0
        self._stored_token_s = 0.0  # ∫ stored tokens dt, token·s
        self._held_token_s = 0.0  # ∫ held slots dt, token·s
        self._buckets = UsageBuckets()  # the usage series: per time bucket ∫ usage dt, busy s and max usage
        self._cap = 1
        self._starts: list[float] = []  # buffered steps: start s
        self._durs: list[float] = []  # duration s
        # or earlier buffered steps as arrays: (starts, durations)
        self._parts: list[tuple[np.ndarray, np.ndarray]] = []
        self._n_parts = 0  # steps in _parts (they come before those in the two lists)
        # flat lists (numpy converts a flat list of numbers fast, a list of tuples slowly):
        self._sets: list[float] = []  # (buffered step, used blocks, held slots) set there, triples
        self._allocs: list[int] = []  # step in its stretch of each block a stretch allocates
        self._alloc_at: list[int] = []  # buffered step where that stretch starts
        # or runs of them: (first step in the stretch, blocks), one block every block_size steps
        self._runs: list[int] = []
        self._run_at: list[int] = []  # buffered step where the run's stretch starts
        self._grants: list[int] = []  # or (step in its stretch, blocks) allocated together there, pairs
        self._grant_at: list[int] = []  # buffered step where that grant's stretch starts
        self._drops: list[int] = []  # (buffered step, used blocks, held slots) freed from that step on, triples
        # (step in its stretch, blocks) freed from that step on (blocks and their slots), pairs
        self._frees: list[int] = []
        self._free_at: list[int] = []  # buffered step where that free's stretch starts
        self._stored: list[float] = []  # (first step, steps, stored tokens, Δ per step), quadruples
        self._stored_shift: list[int] = []  # (first quadruple, end quadruple, buffered step added to their first steps)
        self._used: float = 0  # used blocks and held slots of the last buffered step
        self._held: float = 0

    def add(self, start: float, dur: float, used_blocks: float, capacity_blocks: int, stored_tokens: float,
            held_slots: float) -> None:
        """One step of ``dur`` s: ``used_blocks`` blocks held, ``stored_tokens`` tokens of state in ``held_slots``
        slots."""
        i = self._n_parts + len(self._durs)
        if i >= CHUNK_STEPS:
            self._flush()
            i = 0
        self._cap = capacity_blocks
        self._starts.append(start)
        self._durs.append(dur)
        if used_blocks != self._used or held_slots != self._held or not i:
            self._sets += (i, used_blocks, held_slots)
            self._used, self._held = used_blocks, held_slots
        self._stored += (i, 1, stored_tokens, 0)

    def add_stretch(self, starts: list[float], durs: list[float], capacity_blocks: int, used0: int, held0: int,
                    allocs: list[int], drops: list[tuple[int, int, int]], runs: list[int],
                    pieces: list[tuple[int, int, int, int]], grants: list[int] = (), frees: list[int] = (),
                    stored: list[int] = ()) -> None:
        """A steady-decode stretch of ``len(durs)`` steps, described by its changes.

        ``starts``/``durs``: each step's start and duration, s, as lists of floats or as float64 arrays (kept, not
        copied: the caller must not change them);
        ``used0``/``held0``: used blocks and held slots before its first step's allocations;
        ``allocs``: the step (0-based) of each block it allocates, or ``runs``: ``[first step,
        blocks, …]``, one block every ``block_size`` steps from the first, or ``grants``: ``[step, blocks, …]``
        allocated together in that step (a prompt's blocks at admission); ``drops``: ``(step, Δ used
        blocks, Δ held blocks)`` taken off from that step on (steps past the stretch ignored), or
        ``frees``: ``[step, blocks, …]``, those blocks and their slots taken off from that step on (every
        step inside the stretch); ``pieces``: ``(first step, end step, requests, stored tokens at the first
        step)``, stored tokens growing by ``requests`` per step (ends past the stretch are cut), or
        ``stored``: the same as flat ``[first step, steps, stored tokens then, requests, …]`` quadruples,
        in step order, covering the stretch's steps once each.
        """
        k = len(durs)
        i = self._n_parts + len(self._durs)
        if i + k > CHUNK_STEPS:
            self._flush()
            i = 0
        self._cap = capacity_blocks
        if durs.__class__ is np.ndarray:  # arrays (starts too) are kept as they are, after any steps in the lists
            if self._durs:
                self._seal()
            self._parts.append((starts, durs))
            self._n_parts += k
        else:
            self._starts.extend(starts)
            self._durs.extend(durs)
        self._block_changes(i, k, used0, held0, (allocs, runs, grants, frees, drops))
        st = self._stored
        if stored:
            r0 = len(st) // 4
            st += stored
            self._stored_shift += (r0, len(st) // 4, i)
        for a, b, alive, kv_a in pieces:
            if b > k:
                b = k
            if b > a:
                st += (i + a, b - a, kv_a, alive)
        if i + k > CHUNK_STEPS:  # a stretch longer than the buffer: fold it now
            self._flush()

    def _block_changes(self, i: int, k: int, used0: int, held0: int, changes: tuple) -> None:
        """Record a stretch's block changes (``add_stretch``'s allocs, runs, grants, frees and drops, in that order)
        at buffered step ``i`` of its ``k`` steps; the used blocks and held slots after them become the current."""
        allocs, runs, grants, frees, drops = changes
        B = self.block_size
        used, held = used0, held0
        if used != self._used or held != self._held or not i:
            self._sets += (i, used, held)
        if allocs:  # steps relative to the stretch: the buffered step of its first is added at the fold
            self._allocs += allocs
            self._alloc_at += [i] * len(allocs)
            used += len(allocs)
            held += len(allocs) * B
        if runs:
            self._runs += runs
            self._run_at += [i] * (len(runs) // 2)
            cnt = sum(runs[1::2])
            used += cnt
            held += cnt * B
        if grants:  # whole lists, their steps shifted by ``i`` at the fold
            self._grants += grants
            self._grant_at += [i] * (len(grants) // 2)
            cnt = sum(grants[1::2])
            used += cnt
            held += cnt * B
        if frees:
            self._frees += frees
            self._free_at += [i] * (len(frees) // 2)
            cnt = sum(frees[1::2])
            used -= cnt
            held -= cnt * B
        for j, du, dr in drops:
            if j < k:
                self._drops += (i + j, du, dr * B)
                used -= du
                held -= dr * B
        self._used, self._held = used, held

    def add_steps(self, starts, durs, used_blocks, capacity_blocks: int, stored_tokens, held_slots,
                  pieces: list | None = None) -> None:
        """Many steps given per step (arrays or lists; ``used_blocks``/``held_slots`` may be one number), or the stored
        tokens as ``pieces`` (as ``add_stretch``'s): what ``add`` buffers for each step in turn, flushed alike."""
        k, j = len(durs), 0
        used, held, starts, durs, stored = (per_step_floats(x, k) for x in (
            used_blocks, held_slots, starts, durs, 0 if pieces is not None else stored_tokens))
        while j < k:
            i = self._n_parts + len(self._durs)
            if i >= CHUNK_STEPS:
                self._flush()
                i = 0
            e = min(k, j + CHUNK_STEPS - i)  # add would flush again at step e
            self._cap = capacity_blocks
            self._starts += starts[j:e]
            self._durs += durs[j:e]
            self._used, self._held = changed_sets(self._sets, used, held, j, e, i, self._used, self._held)
            stored_quads(self._stored, stored, pieces, j, e, i)
            j = e

    def _seal(self) -> None:
        """Move the steps buffered in the two lists into ``_parts``, as arrays."""
        n = len(self._durs)
        self._parts.append((np.frombuffer(array("d", self._starts)), np.frombuffer(array("d", self._durs))))
        self._n_parts += n
        self._starts, self._durs = [], []

    def _flush(self) -> None:
        n = self._n_parts + len(self._durs)
        if not n:
            return
        if self._parts:
            if self._durs:
                self._seal()
            starts = np.concatenate([p[0] for p in self._parts])
            durs = np.concatenate([p[1] for p in self._parts])
            self._parts, self._n_parts = [], 0
        else:
            starts, durs = np.frombuffer(array("d", self._starts)), np.frombuffer(array("d", self._durs))  # (fastest)
        used, stored, held = step_runs.usage_samples(  # each a float64 array of the n buffered steps
            n, self.block_size, self._allocs, self._alloc_at, self._runs, self._run_at, self._grants, self._grant_at,
            self._frees, self._free_at, self._drops, self._sets, self._stored, self._stored_shift)
        self._starts, self._durs, self._drops, self._sets, self._stored = [], [], [], [], []
        self._allocs, self._alloc_at, self._runs, self._run_at, self._grants = [], [], [], [], []
        self._grant_at, self._frees, self._free_at, self._stored_shift = [], [], [], []
        # a request's state never fills more than the slots it holds: with a sliding window (blocks outside it freed)
        # or a recurrent state (one fixed-size state however long the sequence), computed tokens exceed the slots, and
        # the share would pass 100 % (2,537.6 % for Mamba, 101.2 % for Phi-3-mini's 2,047-token window)
        np.minimum(stored, held, out=stored)
        self._fold(starts, durs, used, stored, held)

    def _fold(self, starts, durs, used, stored, held) -> None:
        """Add buffered steps to the totals and buckets, left to right."""
        u = used / self._cap
        ud = u * durs
        t = (self._busy_s, self._usage_s, self._stored_token_s, self._held_token_s)
        self._busy_s, self._usage_s, self._stored_token_s, self._held_token_s = step_runs.fold_totals(
            t, durs, ud, stored, held)  # left to right, as a step-at-a-time loop adds them
        self._max_usage = max(self._max_usage, float(u.max()))
        self._buckets.add(starts, durs, u, ud)

    @property
    def busy_s(self) -> float:
        """Σ step durations, s (the replica's busy time)."""
        self._flush()
        return self._busy_s

    @property
    def stored_token_s(self) -> float:
        """∫ stored tokens dt, token·s."""
        self._flush()
        return self._stored_token_s

    @property
    def held_token_s(self) -> float:
        """∫ held KV slots dt, token·s."""
        self._flush()
        return self._held_token_s

    def summary(self, duration_s: float) -> dict[str, Any]:
        """``mean`` (time-weighted over ``duration_s``, idle counts as 0), ``mean_busy``, ``max`` and the bucket
        ``series``."""
        self._flush()
        return {
            "mean": self._usage_s / duration_s if duration_s > 0 else 0.0,
            "mean_busy": self._usage_s / self._busy_s if self._busy_s > 0 else 0.0,
            "max": self._max_usage,
            "token_state_share": self._stored_token_s / self._held_token_s if self._held_token_s > 0 else 0.0,
            "bucket_width_s": self._buckets.width_s,
            "series": self._buckets.series(),
        }
