"""Arrival stretches under SGLang's rule: many arrivals, each one prefill step, and the decode steps between them, with
the bookkeeping once (the counterpart of open_stretch.py for ``batching='sglang'``).

Step by step, an arrival costs a decode stretch (``fast_path.run_open``) and a general prefill step
(``SGLangScheduler._prefill``), each settling the radix cache, KV-usage samples, token runs and records. Here the same
steps are priced the same way while the running requests are kept as counts: per finish (in decode steps: a prefill
step leaves every running request out, ``BatchRules.pauses_decodes``), how many leave then and their Σ (computed
tokens − first decode step), so the ``n`` running hold ``S + n·D`` computed tokens after ``D`` decode steps.

Why counts suffice (page size 1, no prefix shared, nothing retracted — the conditions below): a running request
covers exactly its computed tokens in token slots (a decode step takes one slot per running request, an admission
its prompt) and a finished one gives exactly those back to ``allocatable_tokens`` (its tokens become an unlocked tree
leaf: evictable, and evicting it changes neither ``allocatable_tokens`` nor any sampled figure). So the allocatable
slots are ``A₀ + C₀ − (S + n·D)`` exactly (``A₀``, ``C₀``: allocatable and running computed tokens at the start): a
decode step of ``n`` requests fits iff ``n`` ≤ that (else ``check_decode_mem`` would retract: the stretch stops
before it). With ``ignore_eos`` the reservation ``Σ min(max_new − out, 4096)`` over the running requests is a sum of
whole numbers, so the scheduler's float sum is the integer ``Σ f − n·D`` (``f``: each request's finish in decode
steps) while every request has at most 4,096 tokens left (else summed per finish), and an admission is decided on
integers as ``_prefill`` decides it on floats (exact below 2^53).

Conditions, checked before each step; where one fails the stretch ends before that step with the state step-by-step
execution has there (the general path then takes over): radix cache with page size 1, FCFS, ``ignore_eos``, synchronous
scheduling, no step log, no early-stop rule (cluster.py checks one between general steps); at the start nothing waiting
or being chunked, the batch not marked full (``batch_is_full``), and every running request unshared (its radix path the
root, no prefix segments) and covering exactly its computed tokens; each arrival batch (the arrivals visible when a step
is scheduled) all admitted in one prefill step with their whole prompts (budget, seats, the reservation) and room left
after them (else SGLang marks the batch full), none with prefix segments or a one-token output; every decode step's
slots allocatable. The radix tree, usage samples, token runs and records are settled once (sglang_settle.py). Tests:
tests/dynamics/test_sglang_fast_exact.py compares every reported figure with step-by-step execution.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.engine.radix_cache import RadixKVManager
from kvledger.dynamics.engine.request_state import SimRequest, accept
from kvledger.dynamics.engine.sglang_scheduler import CLIP_MAX_NEW_TOKENS
from kvledger.dynamics.fast import native, sglang_native
from kvledger.dynamics.fast.sglang_settle import settle
from kvledger.dynamics.fast.stretch_times import (
    chunk_steps,
    extend_decode_chunk,
    join_finish_group,
    plain_decode_terms,
)

__all__ = ["eligible", "run_arrivals", "MAX_SGLANG_STRETCH_STEPS"]

MAX_SGLANG_STRETCH_STEPS = 4096  # steps settled at a time


def eligible(rep) -> bool:
    """The replica's rules are ones this module follows (module doc)."""
    kv, cfg = rep.kv, rep.cfg
    return (rep.rules.pauses_decodes and rep.fast_forward and rep.steplog is None and type(kv) is RadixKVManager
            and kv.block_size == 1 and cfg.ignore_eos and cfg.scheduling_policy == "fcfs"
            and not rep.rules.async_scheduling)


def _unshared(rep) -> bool:
    """Every running request holds only private slots, exactly its computed tokens; nothing waits or is chunked."""
    sched, root = rep.sched, rep.kv.root
    if (sched.waiting or sched.chunked is not None or sched.batch_is_full
            or len(sched.running) > rep.cfg.max_num_batched_tokens):
        return False
    for r in sched.running:
        if (r.node is not root or r.spec.prefix_segments or r.covered_tokens != r.num_computed_tokens
                or r.private_tokens != r.covered_tokens):
            return False
    return True


def run_arrivals(rep, specs, arrivals, i: int, out: list) -> tuple[int, bool]:
    """Run steps from arrival index ``i`` until a condition fails (module doc); returns the next index and whether any
    step ran. Precondition: ``eligible(rep)``; ``rep`` steady and ready with requests running. Rejected arrivals'
    records and (without the replica's ``sink``) finished requests' ``(uid, record)`` pairs are appended to ``out``."""
    if not _unshared(rep):
        return i, False
    run = _SGLangStretch(rep)
    total = len(specs)
    spec_at = getattr(specs, "spec_at", None) or specs.__getitem__
    if run.core is not None:  # the loop below in C, decode_until and arrive by their cores (sglang_native.py)
        i = sglang_native.run_loop(run, rep, spec_at, arrivals, i, total, out)
    while run.core is None and run.n and run.K < MAX_SGLANG_STRETCH_STEPS:
        bound = arrivals[i] if i < total else math.inf
        if run.ends[run.K] < bound:
            run.decode_until(bound)
            if not run.n or run.ends[run.K] < bound or run.K >= MAX_SGLANG_STRETCH_STEPS:
                break  # everyone finished, or stopped short of the arrival (slots, the step cap)
        i_next = run.arrive(spec_at, arrivals, i, total, out)
        if i_next < 0:
            rep.steady = False  # the arrivals' step is a general step
            break
        i = i_next
    rep.decode_step_hint_s = run.last
    if run.K == 0:
        return i, False
    settle(rep, run, out)
    return i, True


class _SGLangStretch:
    """The steps of one SGLang arrival stretch, on counts (module doc).

    ``D``: decode steps run, ``K``: steps run (prefill steps included); ``groups`` maps each finish (in decode steps)
    to [requests, Σ (c0 − d0)]; ``F``: Σ finish over the ``n`` running. ``lives`` keeps per request [request, first
    decode step d0 (decode steps), computed tokens c0 then, tokens left m then, prefill step admitted in or −1];
    ``dsteps[d]``: the step of decode step ``d``; ``prefills``: the prefill steps; ``admits``: (step, requests).
    """

    __slots__ = ("rep", "cfg", "prices", "lives", "groups", "keys", "n", "S", "F", "room", "ends", "durs", "stored",
                 "grants", "dsteps", "prefills", "admits", "last", "forms", "K", "D", "core", "terms_of", "price",
                 "plain", "limits")

    def __init__(self, rep) -> None:
        self.rep, self.cfg, self.prices = rep, rep.cfg, rep.prices
        lives, groups, S = [], {}, 0
        for r in rep.sched.running:
            m, c = r.num_output_tokens - r.num_generated, r.num_computed_tokens
            lives.append([r, 0, c, m, -1])
            g = groups.get(m)
            if g is None:
                groups[m] = [1, c]
            else:
                g[0] += 1
                g[1] += c
            S += c
        self.lives, self.groups, self.S, self.n = lives, groups, S, len(lives)
        self.F = sum(x[3] for x in lives)
        self.keys = sorted(groups)
        self.room = rep.kv.allocatable_tokens + S  # A0 + C0: allocatable = room − Σ running computed
        self.ends, self.durs = [rep.now_s], []  # ends[k]: the start of step k (the end of step k − 1), s
        self.stored, self.grants = [], []  # add_stretch's token-state quadruples; the prefill steps' slot grants
        self.dsteps: list[int] = []
        self.prefills: list[int] = []
        self.admits: list[tuple[int, list]] = []
        self.last = rep.decode_step_hint_s
        self.forms: dict[int, tuple | None] = {}
        self.K = self.D = 0
        self.core = native.core  # the compiled decode loop, or None (the Python one below)
        self.terms_of = sglang_native.decode_terms_of(rep.cost, self.prices)  # the decode price's form, for the core
        if self.core is not None:  # step times as float64 bytes (no float object per step), the prefill step's price
            self.ends, self.durs = bytearray(array("d", self.ends)), bytearray()
            self.price, self.plain = sglang_native.prefill_price(rep.cost, self.prices)
            cfg = self.cfg  # the frozen engine settings each arrival reads (gather_arrivals)
            self.limits = (cfg.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len, cfg.caps_output,
                           cfg.sglang_max_req_len)

    def decode_until(self, bound: float) -> None:
        """Decode steps up to the first one starting at or after ``bound``, in pieces between finishes, as far as the
        slots and the step cap go. With the compiled core (native.py), its ``sglang_decode_until``: this loop and
        ``_price_piece`` in C, the same float operations in the same order."""
        if self.core is not None:  # with _advance_to
            self.last, self.K, self.D, self.n, self.S, self.F = self.core.sglang_decode_until(
                self.ends, self.durs, self.stored, self.keys, self.groups, self.forms, self.prices, self.terms_of,
                self.D, self.K, self.n, self.S, self.room, self.last, bound, self.F, self.dsteps)
            return
        D, keys, groups = self.D, self.keys, self.groups
        off = self.K - D  # step of decode step d: d + off
        cap = D + MAX_SGLANG_STRETCH_STEPS - self.K
        alive, s_alive, a, si, room = self.n, self.S, D, 0, self.room
        stored = self.stored
        b = a
        while True:
            fits = (room - s_alive) // alive  # decode step d fits while alive·(d + 1) + s_alive ≤ room
            stop = min(cap, fits)
            b = min(keys[si], stop)
            if b <= a:
                b = a
                break
            j, cut = self._price_piece(a, b, alive, s_alive, bound, off)
            if j > a:  # its slots, one per request a step, are granted from these pieces at the settling
                stored += (a + off, j - a, s_alive + alive * (a + 1), alive)
            b = j
            if cut or b >= stop:
                break
            cnt, tok = groups[b]  # the requests whose last decode step was b − 1 leave
            alive, s_alive, a = alive - cnt, s_alive - tok, b
            si += 1
            if si == len(keys):
                break
        self._advance_to(b, off)

    def _price_piece(self, a: int, b: int, alive: int, s_alive: int, bound: float, off: int) -> tuple[int, bool]:
        """Price decode steps ``a .. b − 1`` of ``alive`` requests in chunks (appending end times and durations);
        returns (the end, whether it stopped at the first step starting at or after ``bound``)."""
        ends, durs = self.ends, self.durs
        prices = self.prices
        terms = plain_decode_terms(self.forms, prices, alive)
        last, finite = self.last, bound < math.inf
        j = a
        while j < b:
            m = b - j
            if finite:
                m = chunk_steps(m, bound, ends[j + off], last, 0)
            last = extend_decode_chunk(ends, durs, prices, terms, alive, s_alive + alive * (j + 1), m, ends[j + off])
            j += m
            if ends[j - 1 + off] >= bound:
                self.last = last
                return bisect_left(ends, bound, a + off, j + off) - off, True
        self.last = last
        return j, False

    def _advance_to(self, b: int, off: int) -> None:
        """Decode steps ``D .. b − 1`` ran: drop the priced steps past them and the requests that finished in them."""
        K = b + off
        del self.ends[K + 1:], self.durs[K:]
        if b == self.D:
            return
        self.dsteps.extend(range(self.D + off, K))
        self.K, self.D = K, b
        keys, groups = self.keys, self.groups
        while keys and keys[0] <= b:
            f = keys.pop(0)
            cnt, tok = groups.pop(f)
            self.n -= cnt
            self.S -= tok
            self.F -= f * cnt

    def arrive(self, spec_at, arrivals, i: int, total: int, out) -> int:
        """The arrivals visible when the next step is scheduled and their prefill step (``gather_arrivals``, then
        ``prefill_step`` for any admitted); rejected ones' records go to ``out``. Returns the next arrival index, or −1
        (nothing changed) when that step is a general step. With the compiled core, its ``sglang_arrive``: these two
        methods in C, the same operations in the same order."""
        if self.core is not None:
            res = self.core.sglang_arrive(self, spec_at, arrivals, i, total, out, accept, SimRequest, self.price,
                                          self.plain, self.rep.prefill_time, self.limits, CLIP_MAX_NEW_TOKENS)
            return -1 if res is None else res
        new, rejected, i_next = self.gather_arrivals(spec_at, arrivals, i, total)
        if new is None:
            return -1
        out.extend(rejected)
        if new:  # only rejections: nothing to prefill
            self.prefill_step(new)
        return i_next

    def gather_arrivals(self, spec_at, arrivals, i: int, total: int) -> tuple[list | None, list, int]:
        """The arrivals visible when the next step is scheduled: (those to admit, rejected ``(index, record)`` pairs,
        the next index); None for the first when one prefill step cannot admit them all as ``_prefill`` would."""
        cfg, n, D = self.cfg, self.n, self.D
        t = self.ends[self.K]
        if self.keys[-1] - D <= CLIP_MAX_NEW_TOKENS:
            offset = self.F - n * D
        else:
            offset = sum(c * min(f - D, CLIP_MAX_NEW_TOKENS) for f, (c, _) in self.groups.items())
        avail = self.room - (self.S + n * D)
        budget, seats, held = cfg.max_num_batched_tokens, cfg.max_num_seqs, n
        new, rejected, max_len, caps, max_req = [], [], cfg.max_model_len, cfg.caps_output, cfg.sglang_max_req_len
        while i < total and arrivals[i] <= t:
            req = accept(i, spec_at(i), max_len, caps, max_req)
            if req.__class__ is SimRequest:
                p, o = req.num_prompt_tokens, req.num_output_tokens
                clip = o if o < CLIP_MAX_NEW_TOKENS else CLIP_MAX_NEW_TOKENS
                if (budget <= 0 or held >= seats or not p + clip + 1 + offset < avail or p > budget or o < 2
                        or req.spec.prefix_segments):
                    return None, [], i
                budget -= p
                held += 1
                offset += p + 1 + clip
                new.append(req)
            else:
                rejected.append((i, req))
            i += 1
        if held > cfg.max_num_batched_tokens or (new and not offset < avail):  # the decode step after could not
            return None, [], i  # take everyone; no room left: the general step marks the batch full (batch_is_full)
        return new, rejected, i

    def prefill_step(self, new: list[SimRequest]) -> None:
        """One prefill step admitting ``new`` with their whole prompts; the running requests are left out."""
        rep, K, D, groups, keys = self.rep, self.K, self.D, self.groups, self.keys
        pf, pairs = 0, 0.0
        for r in new:
            p = r.num_prompt_tokens
            pf += p
            pairs += p * (p + 1) / 2  # Replica.apply_plan's n·c + n(n+1)/2 with nothing computed (c = 0)
        seqs = len(new)
        price = self.prices.step_price
        dur = (price(pf, seqs, pf, pairs, 0, 0) if price is not None else
               rep.cost.step_time_s(StepShape(pf, seqs, pf, pairs, 0, 0)))
        rep.prefill_time.add(pf, seqs, pf, pairs, 0, 0, dur)
        self.stored += (K, 1, pf + self.S + self.n * D, 0)
        self.grants += (K, pf)
        self.ends.append(self.ends[K] + dur)
        self.durs.append(dur)
        self.prefills.append(K)
        self.admits.append((K, new))
        S, F = self.S, self.F
        for r in new:
            p, o = r.num_prompt_tokens, r.num_output_tokens
            self.lives.append([r, D, p, o - 1, K])
            f = D + o - 1  # its last decode step: D + o − 2
            join_finish_group(groups, keys, f, p - D)
            S += p - D
            F += f
        self.S, self.F, self.n, self.K = S, F, self.n + len(new), K + 1

