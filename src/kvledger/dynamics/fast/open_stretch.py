"""Arrival stretches: many arrivals and the decode steps between them run by vLLM v1's rule with the bookkeeping done once.

``fast_path.run_open`` alternates a decode stretch (up to the next arrival) and the arrival's mixed step,
settling blocks, KV-usage samples, token times and records after each. Here the same steps are
priced the same way (the decode steps in pieces between finishes, as ``stretch_times.decode_times``
does, each step by the step-cost model's pure-decode price — its plain form computed in place when
the model has one, ``decode_plain_terms`` —, and each mixed step by the step-cost model) while the
running requests are kept only as counts: per finish step, how many leave then and their Σ (computed
tokens − first decode step), so one step's decode KV tokens are ``S + n·(K + 1)`` without a list
walk. Blocks, usage, token times and records are settled once per arrival stretch, from each
request's first decode step, computed tokens, blocks and remaining tokens (a running request decodes
one token in every step until it finishes, so those four numbers fix every block it takes and the
step it leaves); the finished are freed together (``PagedKVManager.free_finished``) and, without
token times, written to the record columns together.

That is exact when nothing can depend on *which* block a request holds: no block is registered in
the prefix cache and no arriving request has shareable segments (so nobody registers one), as in
``PagedStretches._commit_bulk``. Admission is decided as ``Scheduler._admit`` would, with the free
blocks bounded from below: blocks taken since the start of the arrival stretch are counted at their
most (every running request ``⌊k / block_size⌋ + 1`` blocks in ``k`` steps, frees ignored), so an
admission allowed here is one vLLM allows. Anything else — a prompt over the step's token budget,
``max_num_seqs`` reached, a prefix hit possible, a one-token output, that lower bound too small —
ends the arrival stretch before that step, with the state step-by-step execution has there (the
general step or ``run_open`` then takes over). Under async scheduling (replica.py) a step is
scheduled when the step before it starts, finishers free after the next step's allocations and
their seats count against ``max_num_seqs`` until then, as there.

Used by cluster.py for one replica on a known trace; tests/dynamics/test_fast_path_exact.py compares
every reported figure with step-by-step execution.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from itertools import accumulate

import numpy as np

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.request_state import RUNNING, SimRequest, accept

__all__ = ["eligible", "run_arrivals", "MAX_ARRIVAL_STRETCH_STEPS"]

MAX_ARRIVAL_STRETCH_STEPS = 4096  # steps settled at a time


def eligible(rep) -> bool:
    """The replica's rules are ones this module follows: vLLM v1 continuous batching, FCFS, a plain paged KV manager."""
    kv, cfg = rep.kv, rep.cfg
    return (rep._mixed and rep.fast_forward and rep.steplog is None and not rep._padded and type(kv) is PagedKVManager
            and not kv.custom_bft and kv.step_blocks is None and not kv.contiguous and cfg.scheduling_policy == "fcfs")


def run_arrivals(rep, specs, arrivals, i: int, out: list) -> tuple[int, bool]:
    """Run steps from arrival index ``i`` until something unusual (module doc); returns the next index and whether any step ran.

    Precondition (as ``run_open``): ``eligible(rep)``; ``rep`` steady and ready with requests running, none
    waiting and no free pending. ``arrivals[i]`` is ``specs[i].arrival_s``. Rejected arrivals' records and
    (without the replica's ``sink``) finished requests' ``(uid, record)`` pairs are appended to ``out``.

    The running requests are kept as counts, not lists: a request decoding from step ``d0`` with ``c0`` computed
    tokens then has ``c0 − d0 + K`` computed at step ``K`` and leaves after step ``d0 + m − 1`` (``m`` tokens left
    then), so ``groups`` maps each finish step to [requests, Σ (c0 − d0)] and ``S`` is Σ (c0 − d0) over the ``n``
    running: step ``K``'s decodes read ``S + n·(K + 1)`` KV tokens, exactly ``Σ computed + n`` of the lists.
    """
    kv, cfg, pool = rep.kv, rep.cfg, rep.kv.pool
    if pool._key_of or pool._num_stale or rep._deferred:
        return i, False
    B, lag, total = kv.block_size, 1 if rep._async else 0, len(specs)
    budget_tokens, max_seqs, max_len, caps = cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len, cfg.caps_output
    price, split, dprice, plain = rep._step_price, rep.prefill_time.mixed, rep._decode_list, rep._decode_plain
    spec_at = getattr(specs, "spec_at", None) or specs.__getitem__
    # per request: (request, first decode step, computed tokens then, blocks held then, tokens left then, admitted here)
    lives, groups, S = [], {}, 0
    for r in rep.sched.running:
        m, c = r.num_output_tokens - r.num_generated, r.num_computed_tokens
        lives.append((r, 0, c, len(r.blocks), m, False))
        g = groups.get(m)
        if g is None:
            groups[m] = [1, c]
        else:
            g[0] += 1
            g[1] += c
        S += c
    n, keys = len(lives), sorted(groups)  # keys: the finish steps, ascending
    blocks_left = pool.num_free_blocks  # a lower bound on the free blocks, kept by counting every take at its most
    ends, durs, stored, grants = [rep.now_s], [], [], []  # stored: [first step, steps, KV tokens, Δ per step, …]
    sched_t = rep.sched_s  # when the next step is scheduled
    finishing = 0  # async: requests that finished in the last step (their seats are held until the next schedule)
    last = rep.decode_step_hint_s  # a recent decode step's price: sizes pricing chunks only (any chunking, same prices)
    forms: dict[int, tuple | None] = {}  # per batch size: the plain form of its decode price (or None)
    inf, top = math.inf, MAX_ARRIVAL_STRETCH_STEPS
    K = 0  # steps run
    while n and K < top:
        bound = arrivals[i] if i < total else inf
        if not (lag and sched_t >= bound):
            # decode steps up to the bound, in pieces between finishes (stretch_times.decode_times, on the counts)
            q = blocks_left // n  # blocks each running request may take: at most q·B − 1 steps
            E = K + q * B - 1 if q > 0 else K
            if E > top:
                E = top
            alive, s_alive, a, si, cut, go = n, S, K, 0, False, n > 1
            finite = bound < inf
            while True:
                b = keys[si]
                if b > E:
                    b = E
                j = a
                terms = forms.get(alive, 0)
                if terms == 0:  # the price in its plain form, computed here (None: ask dprice)
                    terms = forms[alive] = plain(alive) if plain is not None else None
                while j < b:
                    m = b - j  # a chunk never crosses the piece's end: past it the batch differs
                    if finite:  # steps likely to fit before the bound, from the last price (a few spare)
                        est = int((bound - ends[j]) / last) + 3 + lag if last > 0 else 16
                        if est < 8:
                            est = 8
                        if est < m:
                            m = est
                    kv0 = s_alive + alive * (j + 1)
                    if terms is not None and m <= 96:
                        gemm, g, bw = terms
                        d = [gemm + g * x / bw for x in range(kv0, kv0 + alive * m, alive)]
                    else:
                        d = dprice(alive, kv0, m)
                    durs += d
                    last = d[-1]
                    it = accumulate(d, initial=ends[j])
                    next(it)
                    ends.extend(it)
                    j += m
                    if j - 1 - lag >= K and ends[j - 1 - lag] >= bound:
                        j = bisect_left(ends, bound, max(a - lag, K), j - lag) + lag
                        cut = True
                        break
                if j < b:
                    b = j
                if b > a:
                    stored += (a, b - a, s_alive + alive * (a + 1), alive)
                if cut or b >= E or not go:
                    break
                cnt, tok = groups[b]  # the requests finishing in step b − 1 leave
                alive, s_alive, a = alive - cnt, s_alive - tok, b
                si += 1
                if si == len(keys):  # everyone finished
                    break
            k = b - K
            if k:
                del ends[b + 1:], durs[b:]
                blocks_left -= n * (k // B + 1)
                if lag:
                    g = groups.get(b)
                    finishing = g[0] if g is not None else 0  # async: finished in the segment's last step
                K = b
                while keys and keys[0] <= K:
                    cnt, tok = groups.pop(keys.pop(0))
                    n -= cnt
                    S -= tok
                sched_t = ends[K - 1] if lag else ends[K]
            else:
                del ends[K + 1:], durs[K:]
            if not n or sched_t < bound or K >= top:
                break  # everyone finished, or stopped short of the arrival (blocks, the step cap)
        # the arrivals visible when the next step is scheduled: admitted together in one mixed step, or none of them
        room = budget_tokens - n
        if room <= 0 or blocks_left < n:
            break
        j, new, rejected, take = i, [], [], n
        while j < total and arrivals[j] <= sched_t:
            req = accept(j, spec_at(j), max_len, caps)
            if req.__class__ is SimRequest:
                p = req.num_prompt_tokens
                need = -(-p // B)
                if (p > room or n + len(new) >= max_seqs - finishing or req.num_output_tokens < 2
                        or req.spec.prefix_segments or take + need > blocks_left):
                    new = None
                    break
                room -= p
                take += need
                new.append((req, need))
            else:
                rejected.append((j, req))
            j += 1
        if new is None:
            break
        out.extend(rejected)
        i = j
        if not new:  # only rejections: nobody to admit, the step stays a pure decode step
            continue
        blocks_left -= take
        pf, pairs = 0, 0.0
        for r, _ in new:
            p = r.num_prompt_tokens
            pf += p
            pairs += p * 0 + p * (p + 1) / 2  # Replica._apply_plan's sum: c·n + n(n+1)/2 with nothing computed
        dec_kv = S + n * (K + 1)  # Σ computed + n
        dur = (price(pf, len(new), pf, pairs, n, dec_kv) if price is not None else
               rep.cost.step_time_s(StepShape(pf, len(new), pf, pairs, n, dec_kv)))
        split += (pf, len(new), pf, pairs, n, dec_kv, dur)  # the step's prefill part, priced later (PrefillTime)
        stored += (K, 1, pf + dec_kv, 0)
        ends.append(ends[K] + dur)
        durs.append(dur)
        g = groups.get(K + 1)
        fin = g[0] if g is not None else 0  # finished in this step
        grants_at = K
        K += 1
        if fin:
            del groups[K]
            keys.pop(0)
            n -= fin
            S -= g[1]
        for r, h in new:
            p, o = r.num_prompt_tokens, r.num_output_tokens
            grants += (grants_at, h)
            lives.append((r, K, p, h, o - 1, True))
            r.status = RUNNING
            r.run_start = rep.num_steps + grants_at
            r.num_cached_tokens = 0
            kv.query_tokens += p
            f = K + o - 1  # its finish: after step K + o − 2
            g = groups.get(f)
            if g is None:
                groups[f] = [1, p - K]
                insort(keys, f)
            else:
                g[0] += 1
                g[1] += p - K
            S += p - K
        n += len(new)
        finishing = fin if lag else 0
        sched_t = ends[K - 1] if lag else ends[K]
    rep.decode_step_hint_s = last
    if K == 0:
        return i, False
    rep.prefill_time.check()
    _settle(rep, lives, K, ends, durs, stored, grants, out)
    return i, True


def _settle(rep, lives: list, K: int, ends: list[float], durs: list[float], stored: list, grants: list[int],
            out: list) -> None:
    """Blocks, frees, KV usage, token times, counters and records of the ``K`` steps run (see ``run_arrivals``)."""
    kv, sched = rep.kv, rep.sched
    pool, B, lag = kv.pool, kv.block_size, 1 if rep._async else 0
    used0, held0 = kv.num_used_blocks, kv._req_blocks * B
    q, h0 = pool._queue, pool._head
    h = h0
    runs: list[int] = []  # [first step, blocks, …]: one block every B steps from the first
    frees: list[int] = []  # [step, blocks, …]: a finished request's blocks, off the samples from that step on
    running, finished, freed, deferred = [], [], [], []
    step0 = rep.num_steps
    for r, d0, c0, held, m, admitted in lives:
        if admitted:  # its prompt's blocks
            r.blocks = q[h: h + held]
            h += held
        end = m if d0 + m <= K else K - d0  # decode steps it ran here
        j = held * B - c0  # its first block-filling step, from d0
        cnt = 0
        if j < end:
            cnt = (end - j - 1) // B + 1
            runs += (d0 + j, cnt)
            r.blocks += q[h: h + cnt]
            h += cnt
        if d0 + m <= K:  # finished here, in step f
            f = d0 + m - 1
            r.num_computed_tokens = c0 + m
            r.num_generated = r.num_output_tokens
            r.num_tokens = r.num_prompt_tokens + r.num_output_tokens
            finished.append((r, step0 + f))
            if f + 1 + lag <= K:  # missing from the samples from step f + 1 on (at K: past the stretch, ignored)
                if f + 1 < K:
                    frees += (f + 1, held + cnt)
                freed.append(r)
            else:  # async, finished in the last step: freed after the next schedule
                deferred.append(r)
        else:
            r.num_computed_tokens = c0 + K - d0
            r.num_generated = g = r.num_output_tokens - (d0 + m - K)
            r.num_tokens = r.num_prompt_tokens + g
            running.append(r)
    if h - h0 > pool.num_free_blocks:
        raise RuntimeError(f"block pool: asked for {h - h0} blocks, {pool.num_free_blocks} free")
    pool.advance(h - h0)
    kv._req_blocks += h - h0
    times = np.fromiter(ends, np.float64, K + 1)  # step end times (times[0]: the start of the first), as one array
    rep._push_times(times[1:])  # sched.running still lists the requests whose token times the buffer must keep
    rep.now_s = ends[K]
    if freed:  # after the blocks were taken: frees put blocks back at the queue's head
        kv.free_finished(freed)
    sched.running = running
    rep.usage.add_stretch(times[:K], np.fromiter(durs, np.float64, K), kv.capacity_blocks, used0, held0, (), (), runs,
                          (), grants, frees, stored)
    if lag:
        rep._deferred = deferred
        sched.num_finishing = len(deferred)
        rep.last_start_s = ends[K - 1]
    recs = rep._finish(finished, freed=True) if finished else []
    if rep.sink is None:
        out.extend((r.uid, rec) for r, rec in recs)
