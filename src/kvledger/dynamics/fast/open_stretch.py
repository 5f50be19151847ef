"""Arrival stretches: many arrivals and the decode steps between them, by vLLM v1's rule, with the bookkeeping once.

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
``PagedStretches._commit_bulk``. Admission is decided as ``Scheduler.admit_waiting`` would, with the free
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
from array import array
from bisect import bisect_left

from kvledger.accounting.stepcost import step_pricer
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.request_state import RUNNING, SimRequest, accept
from kvledger.dynamics.fast import native, open_native
from kvledger.dynamics.fast.open_settle import settle, settle_decoded
from kvledger.dynamics.fast.stretch_times import CHUNK_MIN_STEPS as MIN_STEPS
from kvledger.dynamics.fast.stretch_times import (
    CHUNK_SPARE_STEPS,
    CHUNK_UNPRICED_STEPS,
    extend_decode_chunk,
    join_finish_group,
    plain_decode_terms,
)

__all__ = ["eligible", "run_arrivals", "MAX_ARRIVAL_STRETCH_STEPS"]

MAX_ARRIVAL_STRETCH_STEPS = 4096  # steps settled at a time
_INF = math.inf


def eligible(rep) -> bool:
    """The replica's rules are ones this module follows: vLLM v1 continuous batching, FCFS, a plain paged KV manager,
    no long-prefill cap."""
    kv, cfg = rep.kv, rep.cfg
    return (rep.rules.mixed and rep.fast_forward and rep.steplog is None and not rep.rules.padded
            and type(kv) is PagedKVManager and not kv.custom_bft and kv.step_blocks is None and not kv.contiguous
            and cfg.scheduling_policy == "fcfs" and not cfg.long_prefill_token_threshold)  # no chunk cap in C


def run_arrivals(rep, specs, arrivals, i: int, out: list) -> tuple[int, bool]:
    """Run steps from arrival index ``i`` until something unusual (module doc); returns the next index and whether any
    step ran.

    Precondition (as ``run_open``): ``eligible(rep)``; ``rep`` steady and ready with requests running, none
    waiting and no free pending. ``arrivals[i]`` is ``specs[i].arrival_s``. Rejected arrivals' records and
    (without the replica's ``sink``) finished requests' ``(uid, record)`` pairs are appended to ``out``.
    Phases, repeated: the decode steps up to the next arrival (``decode_until``), the arrivals visible then
    and their mixed step (``arrive``); then ``settle`` once.
    """
    if not rep.kv.pool.is_uncached or rep.has_deferred:
        return i, False
    run = _ArrivalStretch(rep)
    total = len(specs)
    spec_at = getattr(specs, "spec_at", None) or specs.__getitem__  # a columnar workload builds a spec when asked
    decode_until, arrive = run.decode_until, run.arrive
    if run.core is not None:  # the loop below in C with the compiled decode_until and arrive (open_native.py)
        i = open_native.run_loop(run, spec_at, arrivals, i, total, out)
    while run.core is None and run.n and run.K < MAX_ARRIVAL_STRETCH_STEPS:
        bound = arrivals[i] if i < total else math.inf
        if not (run.lag and run.sched_t >= bound):
            decode_until(bound)
            if not run.n or run.sched_t < bound or run.K >= MAX_ARRIVAL_STRETCH_STEPS:
                break  # everyone finished, or stopped short of the arrival (blocks, the step cap)
        i_next = arrive(spec_at, arrivals, i, total, out)
        if i_next < 0:
            break
        i = i_next
    rep.decode_step_hint_s = run.last
    if run.K == 0:
        return i, False
    rep.prefill_time.check()
    settle(rep, run.lives, run.K, run.ends, run.durs, run.stored, run.grants, out)
    return i, True


class _ArrivalStretch:
    """The steps of one arrival stretch, run on counts.

    A request decoding from step ``d0`` with ``c0`` computed tokens has ``c0 − d0 + K`` computed at step ``K`` and
    leaves after step ``d0 + m − 1`` (``m`` tokens left then), so ``groups`` maps each finish step to [requests,
    Σ (c0 − d0)] and ``S`` is Σ (c0 − d0) over the ``n`` running: step ``K``'s decodes read ``S + n·(K + 1)`` KV
    tokens, exactly ``Σ computed + n`` of the lists. ``lives`` keeps per request (request, d0, c0, blocks held then,
    m, admitted here) for ``settle``.
    """

    __slots__ = ("rep", "limits", "prices", "B", "lag", "lives", "groups", "keys", "n", "S", "blocks_left", "ends",
                 "durs", "stored", "grants", "split", "sched_t", "finishing", "last", "forms", "K", "core", "price",
                 "plain")

    def __init__(self, rep) -> None:
        cfg = rep.cfg
        self.rep, self.prices = rep, rep.prices
        # the frozen engine settings each arrival reads: token budget, seats, max_model_len, capped outputs, SGLang cap
        self.limits = (cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len, cfg.caps_output,
                       cfg.sglang_max_req_len)
        self.B, self.lag = rep.kv.block_size, 1 if rep.rules.async_scheduling else 0
        running = rep.sched.running  # each request's computed and remaining tokens, then its life and group
        cs = [r.num_computed_tokens for r in running]
        ms = [r.num_output_tokens - r.num_generated for r in running]
        lives = [(r, 0, c, len(r.blocks), m, False) for r, c, m in zip(running, cs, ms)]
        groups: dict[int, list[int]] = {}
        for m, c in zip(ms, cs):
            g = groups.get(m)
            if g is None:
                groups[m] = [1, c]
            else:
                g[0] += 1
                g[1] += c
        self.lives, self.groups, self.S = lives, groups, sum(cs)
        self.n, self.keys = len(lives), sorted(groups)  # keys: the finish steps, ascending
        self.blocks_left = rep.kv.num_free_blocks  # a lower bound on the free blocks: every take counted at its most
        self.ends, self.durs = [rep.now_s], []  # step end times (ends[0]: the first step's start), durations, s
        self.core = native.core  # the compiled decode_until and arrive (open_native.py), or None (the methods below)
        self.price = step_pricer(rep.cost, self.prices)  # a mixed step's price, s
        self.plain = self.core and open_native.plain_price(rep.cost, self.price)  # the roofline's form, for the core
        if self.core is not None:  # the core keeps the step times as float64 bytes: no float object per step
            self.ends, self.durs = bytearray(array("d", self.ends)), bytearray()
        self.stored, self.grants = [], []  # stored: [first step, steps, KV tokens, Δ per step, …]
        self.split = rep.prefill_time.mixed  # mixed steps' shapes and prices, split later (PrefillTime)
        self.sched_t = rep.sched_s  # when the next step is scheduled, s
        self.finishing = 0  # async: requests that finished in the last step (seats held until the next schedule)
        self.last = rep.decode_step_hint_s  # a recent decode step's price: sizes pricing chunks only
        self.forms: dict[int, tuple | None] = {}  # per batch size: the plain form of its decode price (or None)
        self.K = 0  # steps run

    def decode_until(self, bound: float) -> None:
        """Decode steps up to the first one scheduled at or after ``bound``, in pieces between finishes (as
        ``stretch_times.decode_times`` does, on the counts), as far as the blocks' lower bound and the step cap go.

        Chunks priced by ``stretch_times.extend_decode_chunk`` (one call per chunk, not per step). With the compiled
        core (native.py), its ``decode_until``: this loop in C, the same float operations in the same order."""
        if self.core is not None:
            return open_native.decode_until(self, bound)
        K, n, keys, groups, lag, ends, durs = self.K, self.n, self.keys, self.groups, self.lag, self.ends, self.durs
        q = self.blocks_left // n  # blocks each running request may take: at most q·B − 1 steps
        stop = K + q * self.B - 1 if q > 0 else K
        if stop > MAX_ARRIVAL_STRETCH_STEPS:
            stop = MAX_ARRIVAL_STRETCH_STEPS
        alive, s_alive, a, si, nk = n, self.S, K, 0, len(keys)
        forms, prices, stored, last, finite = self.forms, self.prices, self.stored, self.last, bound < _INF
        spare = CHUNK_SPARE_STEPS + lag
        while True:
            b = keys[si]
            if b > stop:
                b = stop
            terms = forms.get(alive, 0)
            if terms == 0:
                terms = plain_decode_terms(forms, prices, alive)
            j, cut = a, False
            while j < b:
                m = b - j  # a chunk never crosses the piece's end
                if finite:  # as chunk_steps: the steps likely to start before the bound at the last price, a few spare
                    est = int((bound - ends[j]) / last) + spare if last > 0 else CHUNK_UNPRICED_STEPS
                    if est < MIN_STEPS:
                        est = MIN_STEPS
                    if est < m:
                        m = est
                last = extend_decode_chunk(ends, durs, prices, terms, alive, s_alive + alive * (j + 1), m, ends[-1])
                j += m
                if j - 1 - lag >= K and ends[j - 1 - lag] >= bound:  # stopped at the first step at/after the bound
                    lo = a - lag if a - lag > K else K
                    j = bisect_left(ends, bound, lo, j - lag) + lag
                    cut = True
                    break
            if j < b:
                b = j
            if b > a:
                stored += (a, b - a, s_alive + alive * (a + 1), alive)
            if cut or b >= stop or n == 1:
                break
            cnt, tok = groups[b]  # the requests finishing in step b − 1 leave
            alive, s_alive, a = alive - cnt, s_alive - tok, b
            si += 1
            if si == nk:  # everyone finished
                break
        settle_decoded(self, b, last)

    def arrive(self, spec_at, arrivals, i: int, total: int, out: list) -> int:
        """The arrivals visible when the next step is scheduled and their mixed step: the running requests decode and
        the new ones are admitted with their whole prompts, as ``Scheduler.admit_waiting`` would (rejected ones' records
        appended to ``out``). Returns the next index, or −1 (nothing done) when the step cannot take them all (module
        doc: budget, seats, a one-token output, shareable segments, the blocks' lower bound)."""
        if self.core is not None:  # this and _mixed_step compiled: the same steps, the same float operations
            return open_native.arrive(self, spec_at, arrivals, i, total, out)
        n, B, left = self.n, self.B, self.blocks_left
        budget, seats, max_len, caps, max_req = self.limits
        room = budget - n
        if room <= 0 or left < n:
            return -1
        new, rejected, take, pf, pairs = [], [], n, 0, 0.0
        seats -= self.finishing + n
        t = self.sched_t
        while i < total and arrivals[i] <= t:
            req = accept(i, spec_at(i), max_len, caps, max_req)
            if req.__class__ is SimRequest:
                p = req.num_prompt_tokens
                need = -(-p // B)
                if (p > room or len(new) >= seats or req.num_output_tokens < 2 or req.spec.prefix_segments
                        or take + need > left):
                    return -1
                room -= p
                take += need
                pf += p
                pairs += p * (p + 1) / 2  # Replica.apply_plan's c·n + n(n+1)/2 with nothing computed (c = 0)
                new.append((req, need))
            else:
                rejected.append((i, req))
            i += 1
        if rejected:
            out.extend(rejected)
        if new:  # only rejections: nobody to admit, the step stays a pure decode step
            self._mixed_step(new, pf, pairs, take)
        return i

    def _mixed_step(self, new: list[tuple[SimRequest, int]], pf: int, pairs: float, take: int) -> None:
        """The step admitting ``new`` (request, prompt blocks; ``pf`` prompt tokens, ``pairs`` attention pairs in all)
        while the running requests decode (``take``: blocks at most); they start decoding at the next step and join the
        counts."""
        rep, n, K, groups, keys, ends = self.rep, self.n, self.K, self.groups, self.keys, self.ends
        self.blocks_left -= take
        dec_kv = self.S + n * (K + 1)  # Σ computed + n
        a = len(new)
        dur = self.price(pf, a, pf, pairs, n, dec_kv)
        self.split += (pf, a, pf, pairs, n, dec_kv, dur)  # the step's prefill part, priced later
        self.stored += (K, 1, pf + dec_kv, 0)
        ends.append(ends[K] + dur)
        self.durs.append(dur)
        K += 1
        g = groups.pop(K, None)  # finished in this step
        S = self.S
        if g is not None:
            del keys[0]
            n -= g[0]
            S -= g[1]
        stats = rep.kv.prefix_stats
        stats.requests += a  # one lookup each, no hit: PrefixCacheStats.record(p, 0, False) per request
        stats.queries += pf
        grants, lives, run_start = self.grants, self.lives, rep.num_steps + K - 1
        for r, h in new:
            p, o = r.num_prompt_tokens, r.num_output_tokens
            grants += (K - 1, h)
            lives.append((r, K, p, h, o - 1, True))
            r.status = RUNNING
            r.run_start = run_start
            r.num_cached_tokens = 0
            f = K + o - 1  # its finish: after step K + o − 2
            join_finish_group(groups, keys, f, p - K)
            S += p - K
        self.S, self.K, self.n = S, K, n + a
        self.finishing = g[0] if self.lag and g is not None else 0
        self.sched_t = ends[K - 1] if self.lag else ends[K]
