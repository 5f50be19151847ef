"""Settling an arrival stretch (open_stretch.py): blocks, frees, KV usage, token times, counters and records at once.

Each request's first decode step ``d0``, computed tokens ``c0``, blocks ``held`` and remaining tokens ``m`` then fix
every block it takes (one each time its computed tokens fill its blocks) and the step it leaves; with no block
registered in the prefix cache the blocks are handed out request by request (``PagedKVManager.take_in_turn``).
"""

from __future__ import annotations

from array import array

import numpy as np

from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.fast import native
from kvledger.dynamics.outputs.batch_peak import stretch_peak

__all__ = ["settle", "settle_decoded"]


def settle(rep, lives: list, K: int, ends: list[float] | bytearray, durs: list[float] | bytearray, stored: list,
           grants: list[int], out: list) -> None:
    """Blocks, frees, KV usage, token times, counters and records of the ``K`` steps run (see ``run_arrivals``).

    ``lives``: per request ``(request, first decode step, computed tokens then, blocks held then, tokens left then,
    admitted in the stretch)``; ``stored``, ``grants``: the token-state and admission records ``add_stretch`` takes.
    """
    kv, sched = rep.kv, rep.sched
    B, lag = kv.block_size, 1 if rep.rules.async_scheduling else 0
    used0, held0 = kv.num_used_blocks, kv.held_slots
    core = native.core
    if core is not None:  # the loop below, compiled (native.py); the step times already float64 bytes
        takes, runs, frees, running, finished, freed, deferred = core.settle_lives(lives, K, B, lag, rep.num_steps)
        ends_buf, durs_buf = ends, durs
    else:
        takes, runs, frees, running, finished, freed, deferred = settle_lives(lives, K, B, lag, rep.num_steps)
        ends_buf, durs_buf = array("d", ends), array("d", durs)
    kv.take_in_turn(takes)
    times = np.frombuffer(ends_buf)[: K + 1]  # step end times (times[0]: the first one's start), one array
    if len(lives) > rep.running_max:  # the stretch's peak is at most its requests: past the peak so far only then
        peak, at = stretch_peak(lives, times)
        if peak > rep.running_max:
            rep.running_max, rep.running_max_s = peak, at
    rep.push_times(times[1:])  # sched.running still lists the requests whose token times the buffer must keep
    rep.now_s = float(times[K])
    if freed:  # after the blocks were taken: frees put blocks back at the queue's head
        kv.free_finished(freed)
    sched.running = running
    rep.usage.add_stretch(times[:K], np.frombuffer(durs_buf)[:K], kv.capacity_blocks, used0, held0, (), (),
                          runs, (), grants, frees, stored)
    if lag:
        rep.defer(deferred)
        rep.last_start_s = float(times[K - 1])
    recs = rep.finish(finished, freed=True) if finished else []
    if rep.sink is None:
        out.extend((r.uid, rec) for r, rec in recs)


def settle_lives(lives: list, K: int, B: int, lag: int, step0: int) -> tuple[list, ...]:
    """Each request's blocks taken and counters after the ``K`` steps (set on the request), and who finished.

    Returns ``(takes, runs, frees, running, finished, freed, deferred)``: (request, blocks it takes) in the free queue's
    order; [first step, blocks, …], one block every ``B`` steps from the first; [step, blocks, …], a finished request's
    blocks off the samples from that step on; the requests still running; (request, its last step's number) of the
    finished; those freed in the stretch; those freed after the next schedule (async).
    ``stretch_core.settle_lives`` is this function in C."""
    takes: list[tuple[SimRequest, int]] = []
    runs: list[int] = []
    frees: list[int] = []
    running, finished, freed, deferred = [], [], [], []
    for r, d0, c0, held, m, admitted in lives:
        end = m if d0 + m <= K else K - d0  # decode steps it ran here
        j = held * B - c0  # its first block-filling step, from d0
        cnt = 0
        if j < end:
            cnt = (end - j - 1) // B + 1
            runs += (d0 + j, cnt)
        take = held + cnt if admitted else cnt  # an admitted request also takes its prompt's blocks
        if take:
            takes.append((r, take))
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
    return takes, runs, frees, running, finished, freed, deferred


def settle_decoded(st, b: int, last: float) -> None:
    """After ``_ArrivalStretch.decode_until``'s steps ``st.K`` .. ``b`` − 1 (open_stretch.py; ``last``: the latest
    decode price, s): keep their priced steps, count their blocks at their most, drop the requests finished in them."""
    st.last = last
    K, n, keys, groups, lag, ends, durs = st.K, st.n, st.keys, st.groups, st.lag, st.ends, st.durs
    k = b - K  # steps K .. b − 1 ran: drop the priced steps past them, count their blocks at their most and the
    if not k:  # requests that finished in them
        del ends[K + 1:], durs[K:]
        return
    if len(durs) > b:
        del ends[b + 1:], durs[b:]
    st.blocks_left -= n * (k // st.B + 1)
    if lag:
        g = groups.get(b)
        st.finishing = g[0] if g is not None else 0  # async: finished in the segment's last step
    st.K = b
    if keys[0] <= b:
        S, x = st.S, 0
        for f in keys:
            if f > b:
                break
            cnt, tok = groups.pop(f)
            n -= cnt
            S -= tok
            x += 1
        del keys[:x]
        st.n, st.S = n, S
    st.sched_t = ends[b - 1] if lag else ends[b]
