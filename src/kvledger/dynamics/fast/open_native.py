"""The arrival stretch's calls into the compiled core (native.py, stretch_core.c): its fields in, its counts back.

``open_stretch._ArrivalStretch`` calls these in place of its own ``decode_until`` and ``arrive`` when the core is
loaded; the C functions are line-for-line translations of those methods (the same steps, the same float operations in
the same order), so every figure is the same either way (tests/dynamics/test_native_core.py).
"""

from __future__ import annotations

from kvledger.accounting.roofline import RooflineStepCost
from kvledger.dynamics.engine.request_state import RUNNING, SimRequest, accept
from kvledger.dynamics.fast.stretch_times import plain_decode_terms

__all__ = ["decode_until", "arrive", "run_loop", "plain_price"]


def decode_until(run, bound: float) -> None:
    """``run.decode_until(bound)`` by the core, on the run's own fields: the decode steps up to the first one scheduled
    at or after ``bound``."""
    run.core.decode_until(run, plain_decode_terms, bound)


def plain_price(cost, price):
    """``(constants, token_terms)`` when a mixed step's ``price`` is the roofline's ``step_time_of`` in its plain form
    (``step_consts``; no host term): the core then prices the step itself, the same operations in the same order;
    else None (the core calls ``price``)."""
    if (type(cost) is not RooflineStepCost or price != cost.step_time_of or cost.host_step_s or cost.host_seq_s):
        return None
    k = cost.float_step_consts()  # float constants, as the core reads them
    return None if k is None else (k, cost.token_terms)


def arrive(run, spec_at, arrivals, i: int, total: int, out) -> int:
    """``run.arrive(…)`` by the core: the next arrival index, or −1 when the step cannot take the arrivals (nothing
    changed). The prefix-cache counters are the replica's, added here: one lookup per admitted request, no hit."""
    res = run.core.arrive(run, spec_at, arrivals, i, total, out, accept, SimRequest, run.price, RUNNING, run.limits,
                          run.rep.num_steps, run.plain)
    if res is None:
        return -1
    i, a, pf = res
    if a:
        stats = run.rep.kv.prefix_stats
        stats.requests += a
        stats.queries += pf
    return i


def run_loop(run, spec_at, arrivals, i: int, total: int, out) -> int:
    """``run_arrivals``' loop by the core (``open_run``: ``decode_until`` and ``arrive`` in turn, as above); returns the
    next arrival index. The prefix-cache counters get the loop's sums of what ``arrive`` adds per call."""
    i, a, pf = run.core.open_run(plain_decode_terms, run, spec_at, arrivals, i, total, out, accept, SimRequest,
                                 run.price, RUNNING, run.limits, run.rep.num_steps, run.plain)
    if a:
        stats = run.rep.kv.prefix_stats
        stats.requests += a
        stats.queries += pf
    return i
