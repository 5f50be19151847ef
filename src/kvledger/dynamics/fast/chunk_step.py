"""The step that continues a chunked prefill, without the general step's scheduling loop.

After a step that admitted a prompt longer than the token budget left, the running list is the decoding requests (each
one token behind) then that request, mid-prompt. vLLM v1's next step (``Scheduler.schedule``) gives every decoder one
token in running order (a block each whose computed tokens fill its blocks), then the chunked request ``min(tokens
left, budget left, max_model_len − 1 − computed)`` more (``kv.grow``), then admits waiting requests under what budget is
left (``admit_waiting``). ``chunk_step`` runs that step as the fast path's mixed step does (fast_path.py: the decoders'
blocks by ``decode_step``, the rest by ``mixed_tail``), with the same blocks in the same order, the same price and the
same records; it returns None (nothing changed) wherever the general step could do anything else: a decoder not one
token behind or not emitting, no budget left for the chunk, or fewer free blocks than every decoder's one more block
and the chunk's blocks (the general step would preempt). tests/dynamics/test_chunks_and_idle_gaps.py compares every
record and figure with step-by-step execution.
"""

from __future__ import annotations

from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.fast.fast_path import mixed_tail

__all__ = ["eligible", "chunk_step"]


def eligible(rep) -> bool:
    """The rules ``chunk_step`` follows: vLLM v1 mixed steps on a plain paged KV manager, no long-prefill cap or
    aligned chunks, no padded prompts."""
    kv, cfg = rep.kv, rep.cfg
    return (rep.fast_forward and rep.rules.mixed and not rep.rules.padded and type(kv) is PagedKVManager
            and not kv.custom_bft and kv.step_blocks is None and not kv.contiguous and cfg.step_blocks is None
            and not cfg.long_prefill_token_threshold)


def chunk_step(rep) -> list | None:
    """The step continuing the last running request's prefill (module doc); its finished requests, or None when the
    general step must run it."""
    sched, kv, cfg = rep.sched, rep.kv, rep.cfg
    running = sched.running
    last = running[-1]
    c = last.num_computed_tokens
    left = last.num_tokens - c
    if left < 2:
        return None
    dec = running[:-1]
    comp = [r.num_computed_tokens for r in dec]
    if not all(r.num_tokens - x == 1 and r.num_generated and r.run_start >= 0 for r, x in zip(dec, comp)):
        return None
    n = len(dec)
    budget = cfg.max_num_batched_tokens - n
    chunk = min(left, budget, cfg.max_model_len - 1 - c)  # the general step's cap (scheduler.py module doc)
    if chunk <= 0:
        return None
    B, held = kv.block_size, len(last.blocks)
    upto = c + chunk
    need = (upto + B - 1) // B - held  # kv.grow's blocks for the chunk
    if n + (need if need > 0 else 0) > kv.num_free_blocks:  # at most one block per decoder: the general step may
        return None  # have to preempt
    rems = [r.num_output_tokens - r.num_generated for r in dec]
    if not kv.decode_step(dec, comp, rems):
        return None
    # schedule's check: a chunk its blocks already cover (no prefix keys) skips kv.grow
    if not (kv.plain_block_table and (upto - 1) // B < held and not last.keys) and not kv.grow(last, chunk):
        raise RuntimeError("chunk_step: the chunk's blocks were counted free but did not fit")
    plan = [(last, chunk)]
    out, survivors = mixed_tail(rep, running, rems, comp, plan, sched.admit_waiting(plan, budget - chunk))
    for r, m in zip(dec, rems):
        if m > 1:
            r.num_computed_tokens += 1
            r.num_generated += 1
            r.num_tokens += 1
    sched.running = survivors
    return out
