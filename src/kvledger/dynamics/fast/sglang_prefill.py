"""SGLang's prefill step after an arrival, with less Python than the general step (``Replica._step``), same result.

Taken only when the step is sure to be a prefill step (so the scheduler neither decodes nor retracts): no chunked
request pending, requests running (their decode ready), and the first waiting request admissible by
``SGLangScheduler``'s rule under bounds that can only make admission harder —

* the reservation ``offset`` bounded above by Σ over running requests of ``min(max_new − out, 4096)`` (SGLang's
  ``new_token_ratio`` is at most 1, and rounding each product and the float sum is monotone), so
  ``extend + min(max_new, 4096) + page < allocatable − that sum`` implies the scheduler's check;
* its first chunk ``n`` plus all its matched tokens within the allocatable slots (what the radix cache's ``admit``
  asks: ``n`` ≤ free + evictable − the evictable part of its matched path);
* a seat under ``max_num_seqs``.

The scheduler's own ``schedule`` then plans the step (admitting as many as its exact rule does). The bookkeeping is
the general step's for a prefill-only plan: every running request is paused (its token run breaks here), the step is
priced as ``fast_path``'s mixed step prices one, the KV usage sample counts the paused requests' computed tokens.
"""

from __future__ import annotations

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.engine.request_state import FINISHED
from kvledger.dynamics.engine.sglang_scheduler import CLIP_MAX_NEW_TOKENS

__all__ = ["prefill_step"]


def _surely_prefill(rep) -> bool:
    """The next step is a prefill step admitting at least the first waiting request (module doc)."""
    sched, kv, cfg = rep.sched, rep.kv, rep.cfg
    running = sched.running
    if sched.chunked is not None or not running or len(running) >= cfg.max_num_seqs - sched.num_finishing:
        return False
    req = sched.waiting[0]
    handle, hit = kv.match(req)
    extend = req.num_tokens - hit
    budget = cfg.max_num_batched_tokens
    if extend > budget and not cfg.enable_chunked_prefill:
        return False
    clip = CLIP_MAX_NEW_TOKENS
    bound = sum([min(r.num_output_tokens - r.num_generated, clip) for r in running])
    avail = kv.allocatable_tokens
    total = extend + min(req.num_output_tokens - req.num_generated, clip) + kv.block_size
    return total < avail - bound and min(extend, budget) + handle[1] <= avail


def prefill_step(rep) -> list | None:
    """Run the arrival's prefill step (module doc) and return what finished in it; None → run the general step."""
    if (rep.steplog is not None or rep.rules.async_scheduling or rep.cfg.step_blocks is not None
            or rep.cfg.scheduling_policy != "fcfs" or not _surely_prefill(rep)):
        return None
    sched, kv = rep.sched, rep.kv
    paused = len(sched.running)
    so = sched.schedule()
    plan, admitted = so.scheduled, so.num_admitted
    step = rep.num_steps
    finished: list = []
    (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv), stored, all_emitted = rep.apply_plan(plan, step, finished)
    price = rep.prices.step_price
    if price is not None:
        dur = price(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)
    else:
        dur = rep.cost.step_time_s(StepShape(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv))
    if pf_seqs:
        rep.prefill_time.add(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv, dur)
    start = rep.now_s
    rep.now_s = start + dur
    rep.push_times(rep.now_s)
    running = sched.running
    for r in running[:paused]:  # left out of the step: their token runs break (Replica._skipped)
        stored += r.num_computed_tokens
        if r.run_start >= 0:
            r.runs.append((r.run_start, step))
            r.run_start = -1
    rep.usage.add(start, dur, kv.num_used_blocks, kv.capacity_blocks, stored, kv.held_slots)
    out = rep.settle_finished(finished, start)
    if finished:
        sched.running = [r for r in running if r.status != FINISHED]
    # the paused requests were one token behind; the admitted ones are when their prompts are done (all_emitted)
    rep.ready = all_emitted
    rep.steady = rep.next_is_steady([], admitted, finished, all_emitted, dec == len(plan))
    return out
