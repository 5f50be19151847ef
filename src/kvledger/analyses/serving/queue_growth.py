"""Whether a run was overloaded: the requests in the system (arrived, not yet finished) kept growing while requests
arrived.

Under a load the engine sustains, the backlog — requests arrived and not finished — hovers around
rate × E2E; above it the waiting queue grows with the trace and TTFT measures that queue, not the
engine. The check compares the backlog at the median arrival with the backlog at the last arrival:
it grew by at least half, by more than 10 requests and to more than 5 % of the run
(``GROWTH``, ``MIN_GROWTH``, ``MIN_SHARE``: thresholds of this check, not fitted). Over that
second half of the arrivals it also gives the rates at which requests arrived and finished.

The comparison needs the engine to have been finishing requests: until a run's first request finishes, the backlog
counts every arrival however lightly loaded the engine is, so growth read then is the run's warm-up, not an overload —
a burst (e.g. every request sent within milliseconds) grows that way. The arrivals up to the median must therefore
span at least ``MIN_SPAN_FIRST_FINISH`` × the time the run took to finish its first request (first finish − first
arrival; a threshold of this check, not fitted: the shortest span after which a kept-up engine's finishes can offset
its arrivals). A run in which no request finished has no such span and is checked as before.

A session run is closed loops (a turn is sent its think time after the previous one finished): its backlog cannot
grow with the arrivals — an overloaded engine delays the next turns instead —, and measured on the agent preset it
peaks mid-run and falls as sessions end, overloaded or not. Its overload is the turns' waiting instead: the share of
their time in the system spent before the first token, Σ TTFT ÷ Σ E2E, at least ``SESSION_TTFT_SHARE`` (a threshold of
this check, not fitted: measured on Llama-3.1-8B / H100 agent sessions, runs with TTFT mean ≤ 0.06 s had 0.02–0.03,
runs with TTFT mean 1.6–6.9 s had 0.17–0.77).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvledger.analyses.serving import notes as N
from kvledger.ledgers.columns import columns_from
from kvledger.records import RunRecords

if TYPE_CHECKING:
    from kvledger.analyses.serving.overloads import QueueGrowth, SessionQueue

# QueueGrowth and SessionQueue: overloads.py, by __getattr__
__all__ = ["QueueGrowth", "queue_growth", "not_steady_note", "GROWTH", "MIN_GROWTH", "MIN_SHARE", "SessionQueue",  # noqa: F822
           "run_overload", "SESSION_TTFT_SHARE", "MIN_SPAN_FIRST_FINISH"]

GROWTH = 1.5  # backlog at the last arrival ÷ backlog at the median arrival, at least
MIN_GROWTH = 10  # requests the backlog grew by, more than
MIN_SHARE = 0.05  # backlog at the last arrival ÷ requests in the run, more than
SESSION_TTFT_SHARE = 0.10  # a session run's Σ TTFT ÷ Σ E2E, at least (module doc)
MIN_SPAN_FIRST_FINISH = 1.0  # first → median arrival span ÷ first arrival → first finish, at least (module doc)


def __getattr__(name: str) -> Any:
    """The two overload records, from ``overloads.py`` on first use (PEP 562): a run that kept up (most ``simulate``
    runs) makes neither class (~0.4 ms each at import)."""
    if name in ("QueueGrowth", "SessionQueue"):
        from kvledger.analyses.serving import overloads

        return getattr(overloads, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def queue_growth(run: RunRecords, advice: str = N.OVERLOAD_ADVICE_SIMULATE) -> QueueGrowth | None:
    """The backlog's growth over the second half of the arrivals when it shows an overload (module doc), else None;
    ``advice`` ends the note (the flags of the command that prints it).

    Requests that never finish (failed, or still running when a run stopped) count as in the system to the end.
    """
    cols = columns_from(run)
    arrival = np.sort(cols.arrival_s)
    n = arrival.size
    if n < 20:
        return None
    finish = np.where(np.isfinite(cols.finish_s), cols.finish_s, np.inf)
    finish.sort()
    t0, t_mid, t_last = float(arrival[0]), float(arrival[n // 2]), float(arrival[-1])
    warm_up = float(finish[0]) - t0 if np.isfinite(finish[0]) else 0.0  # until the first finish (module doc)
    if t_last <= t_mid or t_mid - t0 < MIN_SPAN_FIRST_FINISH * warm_up:
        return None

    def backlog(t: float) -> int:
        return int(np.searchsorted(arrival, t, side="right") - np.searchsorted(finish, t, side="right"))

    mid, last = backlog(t_mid), backlog(t_last)
    if not (last >= GROWTH * mid and last - mid > MIN_GROWTH and last > MIN_SHARE * n):
        return None
    from kvledger.analyses.serving.overloads import QueueGrowth  # lazy: only an overloaded run makes one

    span = t_last - t_mid
    arrived = float(np.searchsorted(arrival, t_last, side="right") - np.searchsorted(arrival, t_mid,
                                                                                     side="right")) / span
    finished = float(np.searchsorted(finish, t_last, side="right") - np.searchsorted(finish, t_mid,
                                                                                     side="right")) / span
    return QueueGrowth(t_mid - t0, t_last - t0, mid, last, arrived, finished,
                       N.overloaded(mid, t_mid - t0, last, t_last - t0, arrived, finished, advice))


STEADY_HINT_REQUESTS = 2000
"""The requests per probe the warning suggests: report's and cost --simulate's default (cli/report_cmd.py)."""


def not_steady_note(q: QueueGrowth, rate: float, num_requests: int) -> str:
    """The warning for an SLO-capacity probe at ``rate`` req/s (``num_requests`` requests) that met its target with its
    backlog still growing at its last arrival: a rate above what the engine sustains still passes a run too short for
    its queue to cost the SLO, so the capacity found is too high. Starts with ``not steady: `` (views look for it)."""
    return (f"not steady: the probe at the capacity ({rate:g} req/s, {num_requests:,} requests) ended with its queue "
            f"still growing — requests in the system rose from {q.backlog_mid:,} at the median arrival to "
            f"{q.backlog_last:,} at the last; {q.arrived_per_s:,.2f} req/s arrived and {q.finished_per_s:,.2f} req/s "
            "finished in between (kvledger.analyses.serving.queue_growth) — so the run ended before its queue cost "
            "the SLO, and the rate found is optimistic (whatever a drain tail does to the goodput priced): rerun "
            f"with more requests per probe (--num-requests; {STEADY_HINT_REQUESTS:,} is the default)")


def run_overload(run: RunRecords, mode: str) -> QueueGrowth | SessionQueue | None:
    """The overload of a run by its workload's ``mode``: an open loop's queue growth, a session run's waiting share
    (module doc); None when it kept up, or for another closed loop."""
    if mode.startswith("open loop"):
        return queue_growth(run)
    if not mode.startswith("sessions"):
        return None
    cols = columns_from(run)
    ttft, e2e = cols.ttft_s(), cols.e2e_s()
    done = np.isfinite(ttft) & np.isfinite(e2e)
    if not done.any() or float(e2e[done].sum()) <= 0:
        return None
    share = float(ttft[done].sum() / e2e[done].sum())
    if share < SESSION_TTFT_SHARE:
        return None
    mean = float(ttft[done].mean())
    from kvledger.analyses.serving.overloads import SessionQueue  # lazy: only an overloaded run makes one

    return SessionQueue(share, mean, SESSION_TTFT_SHARE, N.sessions_overloaded(share, mean, SESSION_TTFT_SHARE))
