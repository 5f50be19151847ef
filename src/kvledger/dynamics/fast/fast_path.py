"""Shortcuts for a replica in steady decode: decode stretches at once, the common arrival step, a fused open loop.

All three apply vLLM's rule exactly as ``Replica._step`` would, step by step, only with less
Python per step (tests compare every token time bit for bit with ``fast_forward=False``):

* ``stretch``: while every running request is one token behind and nobody can be admitted,
  the next steps differ only in KV lengths. Pieces of them, each running to the next finish
  with its own batch, are priced by the step-cost model's ``decode_steps_list``
  (stretch_times.py); the stretch stops at the first step that would start at or after
  ``bound_s`` (the next arrival), at the first finish when requests wait, or where blocks run
  out. Blocks are handed out in step, then running, order (or request by request when no
  block is registered in the cache: engine/stretch_alloc.py), and finished requests freed after their
  step; the KV usage samples are kept as the stretch's changes (kv_usage.py).
* ``admit_step``: the step after an arrival while every running request is one token
  behind: each decodes one token (blocks first, in running order), then waiting requests
  are admitted under the budget left, as ``Scheduler.admit_waiting`` does (v1's mixed steps only;
  under ``vllm_v0`` an arrival's prompt-only step is a general step).
* ``run_open``: one replica with a known arrival list (``arrivals``: the arrival times in a
  plain sequence): alternates
  stretches and arrival steps without returning to the driver, keeping the running
  requests' token counters in two lists and writing them back when it hands over. The common
  CLI run (vLLM v1, paged KV, no block in the prefix cache) first tries open_stretch.py, which
  runs the same steps but settles blocks, usage, token times and records once per many
  arrivals; ``run_open`` takes what it hands over.

Every reported figure stays bit for bit that of step-by-step execution
(tests/dynamics/test_fast_path_exact.py, also under async scheduling and SGLang's scheduler):
token times; KV usage and the token-state share, sampled per step after its allocations and
without the requests that finished in an earlier step (the KV manager's ``stretch_commit``
returns those per-step samples), folded left to right; the step log.

Async scheduling (replica.py) shifts two things by one step: a step may run while the step
before it started before ``bound_s`` (it was scheduled then), and a finishing request is freed
after the next step's allocations (``stretch_commit(lag=1)``; the general step frees it before
sampling that step, so the samples are those of synchronous freeing). A stretch starts only
when no finisher's free is pending; the general step handles that one.

A new scheduling rule keeps the fast path exact if it (1) schedules a steady batch (everyone one
token behind, nobody admissible) as one decode token per running request in running order, or
else makes ``Replica.next_is_steady`` return False so the general step runs (SGLang's
scheduler does so whenever requests wait); (2) keeps allocation in step, then running, order
(``stretch_limit``/``stretch_commit``), or gives its KV manager its own pair with the same
contract (engine/stretch_alloc.py), or sets ``supports_stretches`` False (hybrid_kv.py); (3) prices a pure-decode
step as ``decode_steps_s`` does, one step at a time; (4) if it changes when an arrival joins,
gives ``run_open``/``admit_step`` the same timing (async scheduling: ``rep.sched_s`` and the
deferred frees), or sends them to the general step for it, as ``vllm_v0`` and SGLang do
(``rep.rules.mixed``).
"""

from __future__ import annotations

import math

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.engine.request_state import FINISHED, SimRequest, accept
from kvledger.dynamics.fast.kv_stretch import account_stretch
from kvledger.dynamics.fast.stretch_times import MAX_STRETCH_STEPS, decode_times

__all__ = ["stretch", "admit_step", "run_open", "advance", "write_counters", "mixed_tail", "MAX_STRETCH_STEPS"]

def stretch(rep, bound_s: float, through: bool) -> list | None:
    """Steady decode steps of ``rep`` (see module doc); None when not even one step's blocks fit."""
    running = rep.sched.running
    rems = [r.num_output_tokens - r.num_generated for r in running]
    comp = [r.num_computed_tokens for r in running]
    out, k = _decode_run(rep, running, rems, comp, bound_s, through)
    if k == 0:
        return None
    for r, m in zip(running, rems):
        if m > k:
            r.num_computed_tokens += k
            r.num_generated += k
            r.num_tokens += k
    if out:
        rep.sched.running = [r for r in running if r.status != FINISHED]
        if rep.sched.waiting and not rep.rules.static:
            rep.steady = False
    return out


def _decode_run(rep, running: list[SimRequest], rems: list[int], comp: list[int], bound_s: float,
                through: bool) -> tuple[list, int]:
    """Run ``k`` steady decode steps; finished requests get final counters, are freed and recorded.
    Returns (records, k).

    The other requests' counters are NOT updated (callers add ``k`` to them or to their lists).
    """
    kv = rep.kv
    go = through and len(running) > 1 and (rep.rules.static or not rep.sched.waiting)
    lag = 1 if rep.rules.async_scheduling else 0
    if lag and rep.sched_s >= bound_s:  # the first step would be scheduled at or after the bound
        return [], 0
    k, ends, durs, pieces = decode_times(rep, rems, comp, go, bound_s, lag)
    k = _block_limit(rep, running, comp, rems, k)
    if k == 0:
        return [], 0
    if rep.rules.pauses_decodes:  # requests an SGLang prefill step left out emit again from the stretch's first step
        step0 = rep.num_steps
        for r in running:
            if r.run_start < 0:
                r.run_start = step0
    finished = []
    step0 = rep.num_steps
    if min(rems) <= k:  # someone finishes inside the stretch: final counters now (the free below needs them)
        for r, m, c in zip(running, rems, comp):
            if m <= k:
                _set_final(r, c + m)
                finished.append((r, step0 + m - 1))
    samples = kv.stretch_commit(running, comp, rems, k, lag=lag)  # blocks in step-by-step order; frees the finished
    rep.sched.advance_decode(k)
    rep.push_times(ends[1: k + 1])
    rep.now_s = ends[k]
    account_stretch(rep, pieces, k, ends, durs, samples, running, rems)
    if lag:
        # finished in the last step (rems m = k): freed after the next schedule
        rep.defer([r for r, st in finished if st - step0 + 1 + lag > k])
        rep.last_start_s = ends[k - 1]
    return (rep.finish(finished, freed=True) if finished else []), k


def _block_limit(rep, running: list[SimRequest], comp: list[int], rems: list[int], k: int) -> int:
    """Steps (≤ ``k``) of a stretch sure to find their blocks without preemption (vllm_v0 also leaves a block free)."""
    return rep.kv.stretch_limit(running, comp, rems, k, reserve=1 if rep.rules.v0 else 0)


def _set_final(r: SimRequest, computed: int) -> None:
    """Counters of a request that has just sampled its last token."""
    r.num_computed_tokens = computed
    r.num_generated = r.num_output_tokens
    r.num_tokens = r.num_prompt_tokens + r.num_output_tokens


def admit_step(rep) -> list | None:
    """The step after an arrival while every running request is one token behind; None → use the general step."""
    running = rep.sched.running
    rems = [r.num_output_tokens - r.num_generated for r in running]
    comp = [r.num_computed_tokens for r in running]
    res = _mixed_step(rep, running, rems, comp)
    if res is None:
        return None
    out, survivors = res
    for r, m in zip(running, rems):
        if m > 1:
            r.num_computed_tokens += 1
            r.num_generated += 1
            r.num_tokens += 1
    rep.sched.running = survivors
    return out


def _mixed_step(rep, running: list[SimRequest], rems: list[int], comp: list[int]):
    """One step: every running request decodes one token, then waiting ones are admitted.

    Finishing decoders get final counters; the others' counters are left to the caller.
    Returns (records, the running list after the step: survivors then admitted) or None when
    the decodes' blocks do not fit or no budget is left (the general step then applies).
    """
    sched, kv, cfg = rep.sched, rep.kv, rep.cfg
    n = len(running)
    if n >= cfg.max_num_batched_tokens or not kv.decode_step(running, comp, rems):
        return None
    plan: list[tuple[SimRequest, int]] = []
    sched.running = running  # admission appends to it and checks its length against max_num_seqs
    return mixed_tail(rep, running, rems, comp, plan, sched.admit_waiting(plan, cfg.max_num_batched_tokens - n))


def mixed_tail(rep, running: list[SimRequest], rems: list[int], comp: list[int], plan: list, admitted: int):
    """``_mixed_step`` once the step is scheduled: the first ``len(rems)`` of ``running`` decode (their blocks taken),
    ``plan`` lists the prefill chunks (request, tokens) in order and ``admitted`` says how many joined."""
    sched, kv, n = rep.sched, rep.kv, len(rems)
    rep.note_batch(len(running), (), rep.now_s)  # the decoders and those admitted: the step's batch
    # async: the step in flight's finishers free after this schedule
    freed = rep.drain() if rep.rules.async_scheduling else False
    step = rep.num_steps
    finished = []
    if 1 in rems:
        for r, m, c in zip(running, rems, comp):
            if m == 1:
                _set_final(r, c + 1)
                finished.append((r, step))
    (pf_tok, pf_seqs, pf_kv, pairs, extra_dec, extra_dec_kv), stored, all_emitted = rep.apply_plan(plan, step, finished)
    dec_kv = sum(comp) + n
    price = rep.prices.step_price
    if price is not None and rep.steplog is None:
        dur = price(pf_tok, pf_seqs, pf_kv, pairs, n + extra_dec, dec_kv + extra_dec_kv)
    else:
        shape = StepShape(pf_tok, pf_seqs, pf_kv, pairs, n + extra_dec, dec_kv + extra_dec_kv)
        dur = rep.cost.step_time_s(shape)
    if pf_seqs:
        rep.prefill_time.add(pf_tok, pf_seqs, pf_kv, pairs, n + extra_dec, dec_kv + extra_dec_kv, dur)
    start = rep.now_s
    rep.now_s = start + dur
    rep.push_times(rep.now_s)
    used = kv.num_used_blocks
    rep.usage.add(start, dur, used, kv.capacity_blocks, stored + dec_kv, kv.held_slots)
    if rep.steplog is not None:
        rep.steplog.add(step, start, dur, shape, used / kv.capacity_blocks, len(running), len(sched.waiting),
                        [(r.spec.request_id, 1) for r in running[:n]] + [(r.spec.request_id, m) for r, m in plan])
    out = rep.settle_finished(finished, start)
    rep.ready = all_emitted and not rep.overheld()
    rep.steady = rep.next_is_steady([], admitted, finished or freed, rep.ready, not plan)
    return out, ([r for r in running if r.status != FINISHED] if finished else running)


def run_open(rep, specs, arrivals, i: int, out: list) -> tuple[int, bool]:
    """Fused loop for one replica on a known, time-sorted arrival list, from index ``i``.

    Precondition: ``rep`` is steady and ready with requests running and none waiting.
    Appends ``(uid, record)`` to ``out`` (unless the replica's ``sink`` takes them); returns the next arrival index and
    whether any step ran. Hands over to the general path (leaving the state exactly as step-by-step
    execution would) at anything unusual: blocks running out, a prompt that needs more
    than one step, an admission that fails, or nobody left. Several arrivals in one step are
    admitted together in one mixed step, as ``Scheduler.admit_waiting`` would.
    """
    sched = rep.sched
    total = len(specs)
    to_out = rep.sink is None  # with a sink, finished requests' records are already there
    running = sched.running
    rems = [r.num_output_tokens - r.num_generated for r in running]
    comp = [r.num_computed_tokens for r in running]
    progressed = False
    try:
        while True:
            if rep.has_deferred:  # async: a finisher's free is pending; the general step handles it
                return i, progressed
            bound = arrivals[i] if i < total else math.inf
            recs, k = _decode_run(rep, running, rems, comp, bound, True)
            if k:
                progressed = True
                if recs and to_out:
                    out.extend((r.uid, rec) for r, rec in recs)
                running, rems, comp = advance(running, rems, comp, k, bool(recs))
            if not k or not running or rep.sched_s < bound:
                return i, progressed
            i = _deliver(rep, specs, arrivals, i, out)
            if not sched.waiting:
                continue
            if not rep.rules.mixed:  # vllm_v0: the arrival's prompt step is a general step
                rep.steady = False
                return i, progressed
            res = _mixed_step(rep, running, rems, comp)
            if res is None:
                rep.steady = False
                return i, progressed
            progressed = True
            recs, _ = res
            if recs and to_out:
                out.extend((r.uid, rec) for r, rec in recs)
            running, rems, comp = _after_mixed_step(running, rems, comp, bool(recs))
            if not rep.steady or rep.sched.waiting or not running:  # nobody left: the general path idles to the next
                return i, progressed
    finally:
        write_counters(running, rems, comp)
        sched.running = running


def write_counters(running: list[SimRequest], rems: list[int], comp: list[int]) -> None:
    """Set each running request's token counters from its remaining (``rems``) and computed (``comp``) tokens."""
    for r, m, c in zip(running, rems, comp):
        r.num_computed_tokens = c
        r.num_generated = r.num_output_tokens - m
        r.num_tokens = r.num_prompt_tokens + r.num_generated


def advance(running: list[SimRequest], rems: list[int], comp: list[int], k: int, someone_finished: bool):
    """New (running, remaining tokens, computed tokens) lists after ``k`` decode steps: those with ``k`` or fewer
    tokens left dropped (only looked for when ``someone_finished``), the others ``k`` tokens on."""
    if someone_finished:
        keep = [j for j, m in enumerate(rems) if m > k]
        return [running[j] for j in keep], [rems[j] - k for j in keep], [comp[j] + k for j in keep]
    return running, [m - k for m in rems], [c + k for c in comp]


def _deliver(rep, specs, arrivals, i: int, out: list) -> int:
    """Move the arrivals visible at the next step's start into the waiting queue (or reject them); returns the next
    index. ``arrivals[i]`` is ``specs[i].arrival_s`` (a plain sequence: a columnar workload makes a spec per index)."""
    max_len, now, cap, total = rep.cfg.max_model_len, rep.sched_s, rep.cfg.caps_output, len(arrivals)
    max_req = rep.cfg.sglang_max_req_len
    while i < total and arrivals[i] <= now:
        req = accept(i, specs[i], max_len, cap, max_req)
        if req.__class__ is SimRequest:
            rep.sched.waiting.append(req)
        else:
            out.append((i, req))
        i += 1
    return i


def _after_mixed_step(running: list[SimRequest], rems: list[int], comp: list[int], someone_finished: bool):
    """The running list and counter lists after a mixed step: survivors one token on, then the newly admitted."""
    new = [r for r in running[len(rems):] if r.status != FINISHED]  # admitted this step, still running
    running, rems, comp = advance(running[: len(rems)], rems, comp, 1, someone_finished)
    running += new
    rems += [r.num_output_tokens - r.num_generated for r in new]
    comp += [r.num_computed_tokens for r in new]
    return running, rems, comp
