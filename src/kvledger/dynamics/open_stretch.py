"""Arrival stretches: many arrivals and the decode steps between them run by vLLM v1's rule with the bookkeeping done once.

``fast_path.run_open`` alternates a decode stretch (up to the next arrival) and the arrival's mixed step,
settling blocks, KV-usage samples, token times and records after each. Here the same steps are
priced the same way (``stretch_times.decode_times`` for the decode steps, the step-cost model for
each mixed step) while only the running requests' counters are kept; blocks, usage, token times and
records are settled once per arrival stretch, from each request's first decode step, computed
tokens, blocks and remaining tokens (a running request decodes one token in every step until it
finishes, so those four numbers fix every block it takes and the step it leaves).

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

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.kv_manager import PagedKVManager
from kvledger.dynamics.request_state import FINISHED, RUNNING, SimRequest, accept
from kvledger.dynamics.fast_path import advance, write_counters
from kvledger.dynamics.stretch_times import decode_times

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
    """
    kv, cfg, pool = rep.kv, rep.cfg, rep.kv.pool
    if pool._key_of or pool._num_stale or rep._deferred:
        return i, False
    B, lag, total = kv.block_size, 1 if rep._async else 0, len(specs)
    budget_tokens, max_seqs, max_len, caps = cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len, cfg.caps_output
    price, split = rep._step_price, rep.prefill_time.mixed
    running = list(rep.sched.running)
    rems = [r.num_output_tokens - r.num_generated for r in running]
    comp = [r.num_computed_tokens for r in running]
    # per request: (request, first decode step, computed tokens then, blocks held then, tokens left then, admitted here)
    lives = [(r, 0, c, len(r.blocks), m, False) for r, c, m in zip(running, comp, rems)]
    blocks_left = pool.num_free_blocks  # a lower bound on the free blocks, kept by counting every take at its most
    ends, durs, pieces, grants = [rep.now_s], [], [], []  # grants: [step, prompt blocks, …]
    sched_t = rep.sched_s  # when the next step is scheduled
    finishing = 0  # async: requests that finished in the last step (their seats are held until the next schedule)
    K = 0  # steps run
    while running and K < MAX_ARRIVAL_STRETCH_STEPS:
        bound = arrivals[i] if i < total else math.inf
        k = 0
        if not (lag and sched_t >= bound):
            rep.now_s = ends[K]
            go = len(running) > 1
            k, seg_ends, seg_durs, seg_pieces = decode_times(rep, rems, comp, go, bound, lag)
            n = len(running)
            q = blocks_left // n  # blocks each running request may take
            if k > q * B - 1:
                k = q * B - 1 if q > 0 else 0
            if k:
                blocks_left -= n * (k // B + 1)
                ends += seg_ends[1: k + 1]
                durs += seg_durs[:k]
                for a, b, alive, kv_a in seg_pieces:
                    if b > k:
                        b = k
                    if b > a:
                        pieces.append((K + a, K + b, alive, kv_a))
                ended = min(rems) <= k
                finishing = rems.count(k) if lag else 0  # async: finished in the segment's last step
                running, rems, comp = advance(running, rems, comp, k, ended)
                K += k
                sched_t = ends[K - 1] if lag else ends[K]
            if not running or sched_t < bound or K >= MAX_ARRIVAL_STRETCH_STEPS:
                break  # everyone finished, or stopped short of the arrival (blocks, the step cap)
        # the arrivals visible when the next step is scheduled: admitted together in one mixed step, or none of them
        n = len(running)
        room = budget_tokens - n
        if room <= 0 or blocks_left < n:
            break
        j, new, rejected, take = i, [], [], n
        while j < total and arrivals[j] <= sched_t:
            req = accept(j, specs[j], max_len, caps)
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
        dec_kv = sum(comp) + n
        dur = (price(pf, len(new), pf, pairs, n, dec_kv) if price is not None else
               rep.cost.step_time_s(StepShape(pf, len(new), pf, pairs, n, dec_kv)))
        split += (pf, len(new), pf, pairs, n, dec_kv, dur)  # the step's prefill part, priced later (PrefillTime)
        pieces.append((K, K + 1, 0, pf + dec_kv))
        ends.append(ends[K] + dur)
        durs.append(dur)
        fin = rems.count(1)  # finished in this step
        running, rems, comp = advance(running, rems, comp, 1, fin > 0)
        for r, h in new:
            p = r.num_prompt_tokens
            grants += (K, h)
            lives.append((r, K + 1, p, h, r.num_output_tokens - 1, True))
            r.status = RUNNING
            r.run_start = rep.num_steps + K
            r.num_cached_tokens = 0
            kv.query_tokens += p
            running.append(r)
            rems.append(r.num_output_tokens - 1)
            comp.append(p)
        K += 1
        finishing = fin if lag else 0
        sched_t = ends[K - 1] if lag else ends[K]
    if K == 0:
        return i, False
    rep.prefill_time.check()
    _settle(rep, lives, K, ends, durs, pieces, grants, running, rems, comp, out)
    return i, True


def _settle(rep, lives: list, K: int, ends: list[float], durs: list[float], pieces: list, grants: list[int],
            running: list[SimRequest], rems: list[int], comp: list[int], out: list) -> None:
    """Blocks, frees, KV usage, token times, counters and records of the ``K`` steps run (see ``run_arrivals``)."""
    kv, sched = rep.kv, rep.sched
    pool, B, lag = kv.pool, kv.block_size, 1 if rep._async else 0
    used0, held0 = kv.num_used_blocks, kv._req_blocks * B
    q, h0 = pool._queue, pool._head
    h = h0
    runs: list[int] = []
    finished, drops, freed, deferred = [], [], [], []
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
                drops.append((f + 1, held + cnt, held + cnt))
                freed.append(r)
            else:  # async, finished in the last step: freed after the next schedule
                deferred.append(r)
    if h - h0 > pool.num_free_blocks:
        raise RuntimeError(f"block pool: asked for {h - h0} blocks, {pool.num_free_blocks} free")
    pool.advance(h - h0)
    kv._req_blocks += h - h0
    rep._push_times(ends[1: K + 1])  # sched.running still lists the requests whose token times the buffer must keep
    rep.now_s = ends[K]
    for r, _ in finished:
        r.status = FINISHED
    for r in freed:  # after the blocks were taken: frees put blocks back at the queue's head
        kv.free(r, preempted=False)
    write_counters(running, rems, comp)
    sched.running = running
    rep.usage.add_stretch(ends[:K], durs, kv.capacity_blocks, used0, held0, (), drops, runs, pieces, grants)
    if lag:
        rep._deferred = deferred
        sched.num_finishing = len(deferred)
        rep.last_start_s = ends[K - 1]
    recs = rep._finish(finished, freed=True) if finished else []
    if rep.sink is None:
        out.extend((r.uid, rec) for r, rec in recs)
