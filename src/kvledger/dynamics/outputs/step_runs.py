"""Step arithmetic of the KV usage series: the steps of block-allocation runs and per-step values since a set step."""

from __future__ import annotations

from array import array

import numpy as np

from kvledger.dynamics.fast import native

__all__ = ["changed_sets", "per_step_floats", "stored_quads", "run_steps", "since_set", "fold_totals",
           "usage_samples"]


def run_steps(runs: list[int], block_size: int, offsets: list[int] | None = None) -> np.ndarray:
    """The steps of allocation runs ``[first step, count, …]`` (one block every ``block_size`` steps from the first),
    each run's first step shifted by its entry in ``offsets`` when given."""
    if not runs:
        return np.zeros(0, dtype=np.int64)
    r = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    first, count = r[:, 0], r[:, 1]
    if offsets is not None:
        first = first + np.asarray(offsets, dtype=np.int64)
    start = count.cumsum() - count
    return first.repeat(count) + block_size * (np.arange(int(count.sum())) - start.repeat(count))


def since_set(values: np.ndarray, at: np.ndarray, last: np.ndarray, change: np.ndarray) -> np.ndarray:
    """Per step: the value last set (``values[last]``, set at step ``at[last]``) plus the whole changes from that step
    on.

    The changes are integers summed in int64, so a sample equals the count it stands for exactly."""
    run = change.cumsum()
    before = run[at] - change[at]  # changes before each set step
    return values[last] + (run - before[last]).astype(np.float64)


def changed_sets(sets: list, used: list, held: list, j: int, e: int, i: int, u0: float, h0: float) -> tuple:
    """Append ``(buffered step, used, held)`` for steps ``j .. e − 1`` (buffered from step ``i``) where either value
    changes from the step before (``u0``, ``h0`` before step ``j``), and at a buffer's first step (``i`` 0), as
    ``KvUsageTracker.add`` does step by step; returns the last values set."""
    for t in range(j, e):
        u, h = used[t], held[t]
        if u != u0 or h != h0 or (t == j and not i):
            sets += (i + t - j, u, h)
            u0, h0 = u, h
    return u0, h0


def stored_quads(quads: list, stored: list | None, pieces: list | None, j: int, e: int, i: int) -> None:
    """Append the stored-token quadruples ``(buffered step, steps, tokens, Δ per step)`` of steps ``j .. e − 1``: one
    per step from ``stored``, or the parts of ``pieces`` ``(first step, end step, requests, tokens at the first)``
    in that range (their values are whole numbers: the same per-step figures, exactly)."""
    if pieces is None:
        for t in range(j, e):
            quads += (i + t - j, 1, stored[t], 0)
        return
    for a, b, alive, kv_a in pieces:
        a2, b2 = max(a, j), min(b, e)
        if b2 > a2:
            quads += (i + a2 - j, b2 - a2, kv_a + alive * (a2 - a), alive)


def per_step_floats(x, k: int) -> list[float]:
    """``k`` per-step values as Python floats: an array or list as it is, one number repeated."""
    return [float(x)] * k if np.ndim(x) == 0 else np.asarray(x, np.float64).tolist()


def fold_totals(totals: tuple, durs: np.ndarray, ud: np.ndarray, stored: np.ndarray, held: np.ndarray) -> list:
    """``totals`` (busy s, ∫ usage dt, ∫ stored tokens dt, ∫ held slots dt) plus the steps' ``durs``, ``ud`` (usage ×
    duration), ``stored``·``durs`` and ``held``·``durs``, each added left to right (as a step-at-a-time loop does; the
    compiled core's ``fold_totals`` makes the same additions, native.py)."""
    if native.core is not None:
        return native.core.fold_totals(durs, ud, stored, held, totals)
    rows = np.empty((4, len(durs) + 1))  # each total plus its steps, summed left to right along the row by one cumsum
    rows[:, 0] = totals
    rows[0, 1:] = durs
    rows[1, 1:] = ud
    np.multiply(stored, durs, out=rows[2, 1:])
    np.multiply(held, durs, out=rows[3, 1:])
    return rows.cumsum(axis=1)[:, -1].tolist()


def usage_samples(n: int, B: int, allocs: list, alloc_at: list, runs: list, run_at: list, grants: list,
                  grant_at: list, frees: list, free_at: list, drops: list, sets: list, stored_quads: list,
                  stored_shift: list) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(used blocks, stored tokens, held slots) per buffered step, float64 arrays of ``n``, from ``KvUsageTracker``'s
    buffer (kv_usage.py: its lists of the same names); each sample is the value last set plus the whole-block changes
    since, exactly. The compiled core's ``usage_samples`` computes the same numbers (native.py)."""
    if native.core is not None:
        u, s, h = native.core.usage_samples(n, B, allocs, alloc_at, runs, run_at, grants, grant_at, frees, free_at,
                                            drops, sets, stored_quads, stored_shift)
        return np.frombuffer(u), np.frombuffer(s), np.frombuffer(h)
    step = np.zeros(n + 1, dtype=np.int64)  # whole-block changes per step: blocks, then slots
    slot = np.zeros(n + 1, dtype=np.int64)
    if allocs or runs:
        steps = np.array(allocs, dtype=np.int64) + np.array(alloc_at, dtype=np.int64)
        if runs:
            steps = np.concatenate((steps, run_steps(runs, B, run_at)))
        a = np.bincount(steps, minlength=n + 1)
        step += a
        slot += a * B
    for flat, at, sign in ((grants, grant_at, np.add), (frees, free_at, np.subtract)):
        if flat:
            g = np.array(flat, dtype=np.int64).reshape(-1, 2)
            where = g[:, 0] + np.array(at, dtype=np.int64)
            sign.at(step, where, g[:, 1])
            sign.at(slot, where, g[:, 1] * B)
    if drops:
        d = np.array(drops, dtype=np.int64).reshape(-1, 3)
        np.subtract.at(step, d[:, 0], d[:, 1])
        np.subtract.at(slot, d[:, 0], d[:, 2])
    s3 = np.array(sets, dtype=np.float64).reshape(-1, 3)  # a value is set at step 0 of every buffer
    at = s3[:, 0].astype(np.int64)
    last = np.zeros(n, dtype=np.int64)  # index into sets of the last value set at or before each step
    last[at] = np.arange(len(at))
    last = np.maximum.accumulate(last)
    used = since_set(s3[:, 1], at, last, step[:n])
    held = since_set(s3[:, 2], at, last, slot[:n])
    s = np.frombuffer(array("d", stored_quads)).reshape(-1, 4)
    for j in range(0, len(stored_shift), 3):
        s[stored_shift[j]: stored_shift[j + 1], 0] += stored_shift[j + 2]
    count = s[:, 1].astype(np.int64)
    stored = s[:, 2].repeat(count) + s[:, 3].repeat(count) * (np.arange(n) - s[:, 0].repeat(count))
    return used, stored, held
