"""SGLang's open loop: the decode stretch up to an arrival and the arrival's prefill step, many arrivals per call.

Under SGLang's rule (engine/sglang_scheduler.py) an arrival never joins a decode step: the step after it is a
prefill-only step that pauses the running requests. Step by step, the single-replica driver (cluster.py) runs per
arrival ``fast_path.run_open`` (the decode stretch up to it, then the delivery) and one general step (the prefill).
Here the same two run in one loop without returning to the driver, and the common prefill step — no chunked request
pending, FCFS, every waiting request admitted with its whole prompt, no retraction — runs as ``prefill_step``
(sglang_prefill.py) with the bookkeeping ``Replica._step`` does, from the state it would see. Anything else runs
the replica's general step itself (``run_unit``), as the driver would.

Early stop (early_stop.py) is checked exactly where the driver checks it step by step: after each general or prefill
step of the arrival, when a check is due; the loop then ends if the run is decided.

Every figure stays bit for bit that of step-by-step execution (tests/dynamics/test_sglang_open.py,
benchmarks/engine_rules_speed.py).
"""

from __future__ import annotations

import math

from kvledger.dynamics.engine.radix_cache import RadixKVManager
from kvledger.dynamics.engine.request_state import SimRequest, accept
from kvledger.dynamics.fast import fast_path
from kvledger.dynamics.fast.sglang_prefill import prefill_step

__all__ = ["eligible", "run_sglang_open"]


def eligible(rep) -> bool:
    """The replica runs SGLang's rule on its radix cache with the fast paths on (any queue policy)."""
    return rep.rules.pauses_decodes and rep.fast_forward and isinstance(rep.kv, RadixKVManager)


def run_sglang_open(rep, specs, arrivals, i: int, out, stop) -> tuple[int, bool, bool]:
    """Decode stretches and arrival steps from arrival index ``i``; returns (next index, whether any step ran, whether
    an early stop was decided).

    Precondition (as ``fast_path.run_open``): ``eligible(rep)``; ``rep`` steady and ready with requests running and
    none waiting. Ends, with the state step-by-step execution has there, when the loop leaves that state other than
    by an arrival (blocks ran out, everyone finished, a retraction), after the last arrival, or when ``stop`` decides.
    """
    sched, total = rep.sched, len(arrivals)
    progressed = False
    while True:
        i0 = i
        if i < total and arrivals[i] <= rep.sched_s:  # arrived during the last step: the driver delivers it now
            i = _deliver(rep, specs, arrivals, i, out)
        else:
            i, p = fast_path.run_open(rep, specs, arrivals, i, out)
            progressed = progressed or p
        if not sched.waiting:
            if i > i0 and rep.steady and rep.ready and sched.running:
                continue  # only rejections: the decode stretch goes on
            return i, progressed, False
        # the arrival's step, as the driver runs it: its bound is the next arrival
        bound = arrivals[i] if i < total else math.inf
        if not rep.sched_s < bound:
            return i, progressed, False
        recs = prefill_step(rep)
        if recs is None:
            recs = rep.run_unit(bound, True)
        progressed = True
        for r, rec in recs:
            if rec is not None:
                out.append((r.uid, rec))
        if stop is not None and stop.due(len(out)):
            return i, True, stop.decided([rep], out)
        if not (rep.steady and rep.ready and sched.running) or sched.waiting or not rep.fast_forward:
            return i, True, False


def _deliver(rep, specs, arrivals, i: int, out) -> int:
    """The driver's delivery of the arrivals visible at the next step's start, one by one (``Replica.add``; rejected
    ones' records to ``out``); returns the next index."""
    max_len, now, caps, total = rep.cfg.max_model_len, rep.sched_s, rep.cfg.caps_output, len(arrivals)
    while i < total and arrivals[i] <= now:
        req = accept(i, specs[i], max_len, caps)
        if req.__class__ is SimRequest:
            rep.add(req)
        else:
            out.append((i, req))
        i += 1
    return i
