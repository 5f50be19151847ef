"""Settling an SGLang arrival stretch (sglang_stretch.py): radix cache, KV usage, token times and runs, counters and
records at once.

The radix cache is replayed in step order: each prefill step's admissions (``RadixKVManager.admit``, at the root:
nothing shared) and each finished request's free (``free``: its tokens become a leaf), so the tree's clock, leaves
and LRU order are those of step-by-step execution; a request's decode slots are added just before its free, the
survivors' at the end, and the least-recently-used leaves are evicted once, where the free slots fall short
(``settle_overdraft``). The same leaves go as step by step: frees do not change the free slots (tokens move from a
request to the tree), so after any step the free slots are the slots free at the start, less those taken, plus those
evicted; eviction always takes the oldest unlocked leaf and every leaf freed later is newer, so step by step the
evicted leaves are the shortest prefix of the LRU order whose tokens cover, with the free slots at the start, the
slots taken by then, and at the end the shortest prefix covering all the slots taken — the prefix evicted here
(tests/dynamics/test_sglang_fast_exact.py compares the tree, leaf by leaf).

Token runs: a running request emits in every decode step; each prefill step while it runs closes its run (as
``Replica._skipped`` does) and the next decode step opens one.
"""

from __future__ import annotations

import heapq
from array import array
from bisect import bisect_left, bisect_right

import numpy as np

from kvledger.dynamics.engine.request_state import RUNNING
from kvledger.dynamics.fast import native

__all__ = ["settle"]


def settle(rep, run, out: list) -> None:
    """Radix cache, usage, token times, counters and records of the ``run.K`` steps of ``run`` (an
    ``_SGLangStretch``)."""
    kv, sched, K, D = rep.kv, rep.sched, run.K, run.D
    step0, dsteps, prefills = rep.num_steps, run.dsteps, run.prefills
    used0 = kv.tree_tokens - kv.evictable_tokens + kv.private_tokens
    held0 = kv.held_slots
    ends, durs = run.ends, run.durs  # float64 bytes with the compiled core, else lists of floats
    if ends.__class__ is list:
        ends, durs = array("d", ends), array("d", durs)
    _paused(rep, run, memoryview(durs).cast("B").cast("d"))
    times = np.frombuffer(ends)[: K + 1]
    rep.push_times(times[1:])  # sched.running still lists the requests whose token times the buffer must keep
    rep.now_s = float(times[K])
    is_prefill = bytearray(K + 1)
    for p in prefills:
        is_prefill[p] = 1
    counted = rep.counts_gaps
    gap_runs: list[int] = []
    singles: list[int] = []
    if native.core is not None:  # _lives compiled (native.py)
        frees, leaving, running = native.core.sglang_lives(run.lives, D, K, dsteps, prefills, is_prefill, step0,
                                                           counted, gap_runs, singles)
    else:
        frees, leaving, running = _lives(run, D, K, prefills, is_prefill, step0, counted, gap_runs, singles)
    leaving.sort()
    _replay(kv, run, leaving, D)
    sched.running = running
    rep.running_max_exact = False  # the stretch's batches are not kept: its end's, below, a lower bound on its peak
    rep.note_batch(len(running), (), rep.now_s)
    sched.advance_decode(D)
    rep.usage.add_stretch(times[:K], np.frombuffer(durs)[:K], kv.capacity_blocks, used0, held0, (), (),
                          (), (), run.grants + _decode_grants(run.stored), frees, run.stored)
    rep.ready = True
    if not leaving:
        return
    lives = run.lives
    if counted:
        rep.finish_counted([lives[i][0] for _, i, _ in leaving], [x for _, _, fl in leaving for x in fl], gap_runs,
                           singles)
        return
    recs = rep.finish([(lives[i][0], step0 + f) for f, i, _ in leaving], freed=True)
    if rep.sink is None:
        out.extend((r.uid, rec) for r, rec in recs)


def _paused(rep, run, durs) -> None:
    """Each prefill step of the stretch into ``rep.paused_request_s`` as ``Replica._skipped`` adds it, in step order:
    its duration × the requests running then, every one past its first token (prefill step ``j`` comes after
    ``K_j − j`` decode steps; a request with ``d0 + m`` at or below that had left, ``_SGLangStretch``'s lives)."""
    lives = run.lives
    running = sum(1 for x in lives if x[4] < 0)
    left = sorted(x[1] + x[3] for x in lives)
    for j, (k, new) in enumerate(run.admits):
        rep.paused_request_s += durs[k] * (running - bisect_right(left, k - j))
        running += len(new)


def _lives(run, D: int, K: int, prefills: list[int], is_prefill: bytearray, step0: int, counted: bool,
           gap_runs: list[int], singles: list[int]) -> tuple[list[int], list[tuple], list]:
    """Per request of the stretch: (add_stretch's frees [step, slots, …], the finished as (last step, index in lives,
    steps of its first and last tokens or None), the requests still running); the others' token runs set, the
    finished ones' gaps queued when the replica counts them. ``stretch_core.sglang_lives`` is this loop in C."""
    frees: list[int] = []
    leaving: list[tuple] = []
    running = []
    dsteps = run.dsteps
    for idx, life in enumerate(run.lives):
        r, d0, c0, m, adm = life
        if d0 + m <= D:  # finished in the stretch
            stop = dsteps[d0 + m - 1] + 1  # the step after its last
            if stop < K:
                frees += (stop, c0 + m)
            if counted:
                leaving.append((stop - 1, idx, _gaps(r, adm, stop, prefills, is_prefill, step0, gap_runs, singles)))
                continue
            leaving.append((stop - 1, idx, None))
        else:
            stop = K
            running.append(r)
        new, r.run_start = _runs(r, adm, stop, prefills, is_prefill, step0)
        r.runs += new
    return frees, leaving, running


def _decode_grants(stored: list) -> list[int]:
    """The decode steps' slot grants ``[step, slots, …]``: in each step of a decode piece (a token-state quadruple
    ``(first step, steps, tokens, requests)`` with requests > 0) one slot per request. The compiled core's
    ``sglang_decode_grants`` builds the same list."""
    if native.core is not None:
        return native.core.sglang_decode_grants(stored)
    q = np.array(stored, dtype=np.int64).reshape(-1, 4)
    q = q[q[:, 3] > 0]
    cnt = q[:, 1]
    g = np.empty(2 * int(cnt.sum()), dtype=np.int64)
    g[0::2] = q[:, 0].repeat(cnt) + (np.arange(len(g) // 2) - (cnt.cumsum() - cnt).repeat(cnt))
    g[1::2] = q[:, 3].repeat(cnt)
    return g.tolist()


def _gaps(r, adm: int, stop: int, prefills: list[int], is_prefill: bytearray, step0: int, gap_runs: list[int],
          singles: list[int]) -> tuple[int, int]:
    """A request finished in the stretch: its gaps as ``TokenTimes._count_gaps`` counts them from its runs (those
    before the stretch, then ``_runs``'s, then the last to ``stop``), queued on ``gap_runs`` and ``singles``; returns
    the steps of its first and last tokens."""
    prev = first = -1

    def close(a: int, b: int) -> None:  # a run of steps [a, b) ends: its gaps, and the single gap from the last run
        nonlocal prev, first
        if b - a > 1:
            gap_runs.extend((a + 1, b))
        if prev >= 0:
            singles.extend((a, prev))
        else:
            first = a
        prev = b - 1

    runs, s = _runs(r, adm, stop, prefills, is_prefill, step0)  # the stretch's runs, as an unfinished request's
    for a, b in r.runs:
        close(a, b)
    for a, b in runs:
        close(a, b)
    end = step0 + stop
    close(s, end)
    return first, end - 1


def _start(r, adm: int, is_prefill: bytearray, step0: int) -> int:
    """The step its open run started at the stretch's start (admitted in step ``adm``: that step), −1 if paused."""
    if adm >= 0:
        return step0 + adm
    s = r.run_start
    if s < 0 and not is_prefill[0]:
        s = step0  # paused by the prefill step before the stretch: emits again from its first step
    return s


def _runs(r, adm: int, stop: int, prefills: list[int], is_prefill: bytearray, step0: int) -> tuple[list, int]:
    """The request's token runs closed over the stretch's steps before ``stop`` (each prefill step after it entered
    breaks its run; admitted in step ``adm``, or running from the start: ``adm`` −1), and the start of its open run
    (−1: paused)."""
    s = _start(r, adm, is_prefill, step0)
    runs = []
    j = bisect_left(prefills, adm + 1)
    n = len(prefills)
    while j < n:
        p = prefills[j]
        if p >= stop:
            break
        if s >= 0:
            runs.append((s, step0 + p))
            s = -1
        if p + 1 < stop and not is_prefill[p + 1]:
            s = step0 + p + 1
        j += 1
    return runs, s


def _replay(kv, run, leaving: list[tuple], D: int) -> None:
    """The radix cache's admissions and frees in step order, decode slots added before each free and at the end, then
    one eviction (module doc); the requests' counters set. With the compiled core, its ``sglang_replay`` runs the
    loops (``RadixFresh``'s methods and ``RadixKVManager._evict`` translated with them: ``eligible`` admits only a
    ``RadixKVManager`` itself)."""
    lives, admits = run.lives, run.admits
    if native.core is not None:  # these loops, admit_fresh, free_fresh and add_slots compiled (eligible: a plain cache)
        native.core.sglang_replay(kv, lives, admits, leaving, D, RUNNING, heapq.heappush, heapq.heappop)
        kv.settle_overdraft()
        return
    ai, na = 0, len(admits)
    for f, idx, _ in leaving:
        while ai < na and admits[ai][0] < f:
            _admit(kv, admits[ai][1])
            ai += 1
        r, d0, c0, m, _ = lives[idx]
        kv.add_slots(r, m)
        r.num_computed_tokens = c0 + m
        r.num_generated = r.num_output_tokens
        r.num_tokens = r.num_prompt_tokens + r.num_output_tokens
        kv.free_fresh(r)
    while ai < na:
        _admit(kv, admits[ai][1])
        ai += 1
    for r, d0, c0, m, _ in lives:
        if d0 + m > D:
            t = D - d0
            if t:
                kv.add_slots(r, t)
            r.num_computed_tokens = c0 + t
            r.num_generated = g = r.num_output_tokens - (m - t)
            r.num_tokens = r.num_prompt_tokens + g
    kv.settle_overdraft()


def _admit(kv, reqs: list) -> None:
    """One prefill step's admissions (``SGLangScheduler._prefill`` then ``Replica.apply_plan``, no hit)."""
    kv.admit_fresh(reqs)
    for r in reqs:
        r.status = RUNNING
        r.num_generated = 1
        r.num_tokens = r.num_prompt_tokens + 1
