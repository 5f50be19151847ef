"""The sentences the ledgers print about what they measured and priced (a run with nothing to measure, the capacity
basis and its load warnings).

``capacity_basis.measured_basis`` decides which apply (``check_load``'s verdict); the words are here.
"""

from __future__ import annotations

__all__ = ["capacity_basis_text", "one_batch", "under_loaded", "over_loaded", "fell_behind", "closed_loop_drew",
           "nothing_measured"]

_RERUN_SIMULATED = "drop --at-offered-load to price at the SLO capacity found by simulation"


def nothing_measured(num_requests: int, num_failed: int, *, simulated: bool) -> str:
    """A run of which no request completed (every one failed, or the simulated engine rejected every one): its zeros
    are not a measurement."""
    fix = ("the simulated engine rejected every request as too long for its max_model_len (`kvledger simulate` "
           "names the rule): a longer --max-model-len, or shorter prompts") if simulated else (
        "find why the requests failed (the server down, a wrong endpoint, model name or key) and run the benchmark "
        "again")
    return (f"no request completed ({num_failed:,} of {num_requests:,} failed): there is nothing to measure — its zero "
            f"goodput is not a measurement of the server, and it has no latencies; {fix}")


def capacity_basis_text(goodput_req_per_s: float, *, simulated: bool, burst: bool = False) -> str:
    """The capacity basis of a run priced at its own goodput; ``burst``: every request was sent at t = 0 (no offered
    rate)."""
    what = ("the simulated burst (every request at t = 0)" if burst else "the simulated run at its offered load") \
        if simulated else "the run's measured goodput"
    return (f"capacity basis: {what} ({goodput_req_per_s:,.3f} good req/s per replica) is taken as the replica's "
            "capacity — right only if the run was at or near its SLO limit; a lightly loaded run understates capacity "
            "and overstates the self-hosted cost")


_MEASURE_SWEEP = "measure a rate sweep and price at its SLO boundary (kvledger goodput FILES… --target 0.9)"


def one_batch(reason: str, *, simulated: bool) -> str:
    """The warning on a burst the engine ran as one batch (``burst_read``): its goodput is that batch's drain."""
    fix = _RERUN_SIMULATED if simulated else f"{_MEASURE_SWEEP}, or a burst larger than the engine runs at once"
    return (f"the run is ONE BATCH: {reason}; a larger burst or a sustained rate may serve more, so the self-hosted "
            f"cost per token may be overstated; {fix}")


def under_loaded(reason: str, *, simulated: bool) -> str:
    fix = _RERUN_SIMULATED if simulated else \
        f"{_MEASURE_SWEEP}, or simulate it (kvledger cost --simulate MODEL --gpu GPU …)"
    return (f"the run looks UNDER-LOADED: {reason}. Its goodput is the offered load, not the replica's capacity, so "
            f"capacity is likely higher and the self-hosted cost per token overstated; {fix}")


def fell_behind(reason: str, *, simulated: bool, goodput_req_per_s: float, served_req_per_s: float) -> str:
    """The warning on a run that fell behind (``fell_behind.py``): its served rate bounds the SLO capacity from above;
    the goodput priced is the good share of a queue that grew all run, on either side of that capacity unless it is
    near the ceiling (within ``FELL_BEHIND_SHARE``: then it can only overstate it)."""
    fix = (_RERUN_SIMULATED if simulated else
           "price a run the server kept up with: give the whole rate sweep (kvledger cost FILES… picks the run at the "
           "SLO boundary), or simulate it (kvledger cost --simulate MODEL --gpu GPU …)")
    from kvledger.ledgers.fell_behind import FELL_BEHIND_SHARE  # the same 10 % tolerance, here of the ceiling

    g, y = goodput_req_per_s, max(served_req_per_s, goodput_req_per_s, 1e-12)
    if g >= FELL_BEHIND_SHARE * y:
        side = "that close to the ceiling, it may overstate the capacity (the self-hosted cost per token understated)"
    else:
        side = ("a load the server keeps up with may serve more within the SLO, up to the ceiling (the self-hosted "
                f"cost per token then overstated up to {y / g:,.1f}×), or less where the SLO is missed at any load"
                if g > 0 else "a load the server keeps up with may serve more within the SLO, up to the ceiling")
    return (f"the run FELL BEHIND its offered load: {reason}. Its served rate is the server's throughput ceiling, so "
            f"one replica's SLO capacity is at most {y:,.4g} req/s; the goodput priced, {g:,.4g} good req/s "
            f"({g / y:.1%} of it), is the good share of a queue that grew all run: {side}; {fix}")


def over_loaded(reason: str, *, simulated: bool) -> str:
    fix = (_RERUN_SIMULATED if simulated else
           "price a run at or below the SLO capacity: give the whole rate sweep (kvledger cost FILES… picks the run at "
           "the SLO boundary), or simulate it (kvledger cost --simulate MODEL --gpu GPU …)")
    return (f"the run looks OVER-LOADED: {reason}. It was pushed past its SLO capacity, so its goodput understates "
            "what one replica serves within the SLO at a lower load, and the self-hosted cost per token is overstated "
            f"(a verdict for the API may come from the load, not the prices); {fix}")


def closed_loop_drew(clients: int) -> str:
    """The load check's clause on a closed loop: its throughput is what its clients drew (Little's law)."""
    return (f"; but a closed loop of {clients:,} clients: its throughput is what they drew (clients ÷ mean latency), "
            "not necessarily what the deployment can serve — more clients may fit within the SLO (a concurrency "
            "sweep, or `cost --simulate`, finds the capacity)")
