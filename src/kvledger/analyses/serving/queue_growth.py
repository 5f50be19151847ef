"""Whether a run was overloaded: the requests in the system (arrived, not yet finished) kept growing while requests
arrived.

Under a load the engine sustains, the backlog — requests arrived and not finished — hovers around rate × E2E (Little's
law); above it the waiting queue grows with the trace and TTFT measures that queue, not the engine. The check compares
the backlog at the last arrival with the backlog at the median arrival scaled by the change in the arrival rate between
the two halves of the arrivals (second half's rate ÷ first half's, each its gaps ÷ its span): what a kept-up engine's
backlog would be after that change, once the backlog at the median is rate × E2E — the arrivals up to the median span at
least the median E2E of their requests; before that it still counts arrivals (200 requests at 60 req/s on one H100
serving Llama-3.1-8B: 2.3 s to the median arrival, 4 s E2E) and is compared unscaled. A trace's own rate moves: the
first 200 requests of azure-conv arrive 2.28× faster in their second half, and at a mean 10 req/s on Llama-3.1-8B / H100
the backlog goes 20 → 48 while the engine keeps up with the second half's 16.4 req/s (20 × 2.28 = 46 expected). The
backlog is an overload when it exceeds that expected backlog by more than 10 requests, is more than 5 % of the run, and
either is at least 1.5× the expected or exceeds it by more than 5 % of the requests that arrived in between
(``MIN_GROWTH``, ``MIN_SHARE``, ``GROWTH``, ``SHORTFALL``: thresholds of this check, not fitted); the backlog's time
averages over the second and the last quarter of the arrivals must pass the same rule, so that a dip at the median
arrival is no growth (``backlog_windows``). The second form is the engine finishing under 95 % of the rate at which
requests arrived over the second half of the arrivals (what arrived there − what finished there = the backlog's growth,
here past what the rate's change accounts for): a load a few percent above what the engine sustains adds a few percent
of the arrivals to a backlog of about rate × E2E, which a long E2E keeps under half (Llama-3.1-8B on an H100, 512/128
tokens, 2,000 requests at 61.5 req/s against ~57.6 served: ~260 → ~320; mooncake's first 800 requests on two H100s: 100
→ 134 against 112 expected, 22 past 399 arrivals' 5 %, TTFT 26–30 s through the second half) — yet that queue never
drains.
A kept-up run's backlog moves over the same span by about the square root of its size (±20 around 200), well under
5 % of 1,000 arrivals, once the rate's own change is taken out (azure-conv at 38 req/s on Llama-3.1-8B / H100 TP 2,
2,000 requests: 259 → 310 against 269 expected, 4.1 % of 1,000 arrivals, and 6,000 requests at that rate keep up; at
40 req/s 297 → 489 against 308). Over that second half of the arrivals the check also gives the rates at which
requests arrived and finished.

The comparison needs the engine to have been finishing requests: until a run's first request finishes, the backlog
counts every arrival however lightly loaded the engine is, so growth read then is the run's warm-up, not an overload —
a burst (e.g. every request sent within milliseconds) grows that way. The arrivals up to the median must therefore
span at least ``MIN_SPAN_FIRST_FINISH`` × the time the run took to finish its first request (first finish − first
arrival; a threshold of this check, not fitted: the shortest span after which a kept-up engine's finishes can offset
its arrivals). A run in which no request finished has no such span and is checked as before.

A run shorter than that — its arrivals up to the median spanned less than the time to its first finish — cannot show
whether it kept up from its backlog. Its waiting queue (arrived, no first token yet) can still show an overload: a
request leaves that queue after its TTFT, far sooner than it finishes, and while the running batch grows towards its
steady size every step only slows, so a waiting queue that grows during the warm-up grows at least as fast under the
sustained load (the prefill cannot keep up with the arrivals). It is read with the same rule and thresholds, once the
arrivals up to the median span ``MIN_SPAN_FIRST_FINISH`` × the median TTFT of those requests: a queue read over less
time than its requests wait in it cannot tell a rate from a burst (every request sent within milliseconds fills the
waiting queue however fast the engine; a burst is no overload, as above). A
short run whose waiting queue did not grow is neither overloaded nor shown to keep up: it is reported as too short to
tell (``ShortRun``), with the requests that would let the backlog be read, ``SHORT_RUN_HINT`` × the arrival rate × the
time to the first finish rounded up to a hundred (a choice of this check, not fitted: twice the least, so that the
arrivals up to the median span the warm-up twice over; an overloaded engine's first finish comes later in a longer
run, so this is a least number, not a guarantee). A decode-bound overload (every request admitted, the batch growing)
shows only in the backlog, so its short run is reported too short, never kept up.

A session run is closed loops (a turn is sent its think time after the previous one finished): its backlog cannot
grow with the arrivals — an overloaded engine delays the next turns instead —, and measured on the agent preset it
peaks mid-run and falls as sessions end, overloaded or not. Its overload is the turns' waiting instead: the share of
their time in the system spent before the first token, Σ TTFT ÷ Σ E2E, at least ``SESSION_TTFT_SHARE`` (a threshold of
this check, not fitted: measured on Llama-3.1-8B / H100 agent sessions, runs with TTFT mean ≤ 0.06 s had 0.02–0.03,
runs with TTFT mean 1.6–6.9 s had 0.17–0.77).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from kvledger.analyses.serving import notes as N
from kvledger.analyses.serving.backlog_windows import dispersion, quarter_means, rate_change
from kvledger.analyses.serving.sim_document import PACED_MODE
from kvledger.ledgers.columns import columns_from
from kvledger.records import RunRecords

if TYPE_CHECKING:
    from kvledger.analyses.serving.overloads import QueueGrowth, SessionQueue, ShortRun

# QueueGrowth, SessionQueue and ShortRun: overloads.py, by __getattr__
__all__ = ["QueueGrowth", "queue_growth", "not_steady_note", "GROWTH", "MIN_GROWTH", "MIN_SHARE", "SessionQueue",  # noqa: F822
           "SHORTFALL", "run_overload", "SESSION_TTFT_SHARE", "MIN_SPAN_FIRST_FINISH", "open_loop_check", "ShortRun",
           "SHORT_RUN_HINT", "short_run_note", "boundary_steadiness", "probe_queue_grew", "QUEUE_CHECK", "SUSTAINED_Z"]

GROWTH = 1.5  # backlog at the last arrival ÷ backlog at the median arrival, at least (or SHORTFALL)
SHORTFALL = 0.05  # or the backlog's growth ÷ the arrivals between the median and the last one, more than
MIN_GROWTH = 10  # requests the backlog grew by, more than
MIN_SHARE = 0.05  # backlog at the last arrival ÷ requests in the run, more than
SESSION_TTFT_SHARE = 0.10  # a session run's Σ TTFT ÷ Σ E2E, at least (module doc)
MIN_SPAN_FIRST_FINISH = 1.0  # first → median arrival span ÷ first arrival → first finish, at least (module doc)
SUSTAINED_Z = 3.0  # a capacity probe's queue excess ÷ its burst noise, more than, to count it out (probe_queue_grew)
SHORT_RUN_HINT = 4.0  # requests suggested to a run too short to tell ÷ (arrival rate × first finish) (module doc)


def __getattr__(name: str) -> Any:
    """The two overload records, from ``overloads.py`` on first use (PEP 562): a run that kept up (most ``simulate``
    runs) makes neither class (~0.4 ms each at import)."""
    if name in ("QueueGrowth", "SessionQueue", "ShortRun"):
        from kvledger.analyses.serving import overloads

        return getattr(overloads, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def queue_growth(run: RunRecords, advice: str = N.OVERLOAD_ADVICE_SIMULATE) -> QueueGrowth | None:
    """The growth of the backlog (or, in a run too short to read it, of the waiting queue) over the second half of the
    arrivals when it shows an overload (module doc), else None; ``advice`` ends the note (the flags of the command
    that prints it).

    Requests that never finish (failed, or still running when a run stopped) count as in the system to the end.
    """
    return open_loop_check(run, advice)[0]


def open_loop_check(run: RunRecords, advice: str = N.OVERLOAD_ADVICE_SIMULATE,
                    z: float = SUSTAINED_Z) -> tuple[QueueGrowth | None, ShortRun | None]:
    """(overload, too short): the backlog's growth when the run is long enough to read it; else the waiting queue's;
    else, when neither grew, the record saying the run was too short to tell (module doc). (None, None): it kept up,
    or had fewer than 20 requests, or all arrived at once. ``z``: the burst allowance's multiple of √(D × expected)
    (``SUSTAINED_Z`` for one run; ``dp_saturation`` tightens it for the N ranks it tests)."""
    cols = columns_from(run)
    arrival = np.sort(cols.arrival_s)
    n = arrival.size
    if n < 20:
        return None, None
    t0, t_mid, t_last = float(arrival[0]), float(arrival[n // 2]), float(arrival[-1])
    if t_last <= t_mid:
        return None, None
    finish = _ends(cols.finish_s)
    warm_up = float(finish[0]) - t0 if np.isfinite(finish[0]) else 0.0  # until the first finish (module doc)
    first_half = cols.arrival_s <= t_mid
    if t_mid - t0 >= MIN_SPAN_FIRST_FINISH * warm_up:
        stay = _median_stay(cols.e2e_s()[first_half])
        return _growth(arrival, finish, t0, t_mid, t_last, advice, stay_s=stay, z=z), None
    ttft = cols.ttft_s()[first_half]  # the first half's waits for a first token (module doc)
    ttft = ttft[np.isfinite(ttft)]
    if ttft.size and t_mid - t0 >= MIN_SPAN_FIRST_FINISH * float(np.median(ttft)):
        q = _growth(arrival, _ends(cols.first_token_s), t0, t_mid, t_last, advice, waiting=True,
                    stay_s=_median_stay(cols.ttft_s()[first_half]), z=z)
        if q is not None:
            return q, None
    from kvledger.analyses.serving.overloads import ShortRun  # lazy: only a run too short to tell makes one

    rate = (n - 1) / (t_last - t0)
    enough = int(math.ceil(SHORT_RUN_HINT * rate * warm_up / 100.0)) * 100
    return None, ShortRun(t_mid - t0, t_last - t0, warm_up, n, enough,
                          N.too_short(t_mid - t0, t_last - t0, warm_up, n, enough))


def _ends(times: np.ndarray) -> np.ndarray:
    """Sorted event times, a request without one (never reached it) at +inf: counted as not there to the end."""
    out = np.where(np.isfinite(times), times, np.inf)
    out.sort()
    return out


def _median_stay(stays: np.ndarray) -> float:
    """The median time in the queue read (E2E, or TTFT for the waiting queue) of the first half's requests, one that
    never left it counted as infinite."""
    return float(np.median(np.where(np.isfinite(stays), stays, np.inf))) if stays.size else math.inf


def _growth(arrival: np.ndarray, done: np.ndarray, t0: float, t_mid: float, t_last: float, advice: str,
            waiting: bool = False, stay_s: float = 0.0, z: float = SUSTAINED_Z) -> QueueGrowth | None:
    """The queue (arrived by t, not ``done`` by t: not finished, or with ``waiting`` without a first token) at the
    median and the last arrival, as a QueueGrowth when it grew past the thresholds (module doc), else None.
    ``stay_s``: the first half's median stay in that queue; settled, the arrivals up to the median span it, so the
    queue there is rate × stay and scales with the rate's change; else it still counts arrivals and is compared
    unscaled. The record keeps it for the pace's window (``overloads.QueueGrowth.pace_read``)."""
    settled = t_mid - t0 >= stay_s
    n = arrival.size

    def queue(t: float) -> int:
        return int(np.searchsorted(arrival, t, side="right") - np.searchsorted(done, t, side="right"))

    mid, last = queue(t_mid), queue(t_last)
    arrived_between = int(np.searchsorted(arrival, t_last, side="right")
                          - np.searchsorted(arrival, t_mid, side="right"))
    k = rate_change(arrival, t0, t_mid, t_last) if settled else 1.0
    expected = mid * k  # a kept-up backlog after the arrival rate's change (module doc)
    if not _past(last, expected, arrived_between, n):
        return None
    means = quarter_means(arrival, done, settled)  # the same rule over windows, not instants (backlog_windows)
    if means is not None and not _past(means[1], means[2], arrived_between, n):
        return None
    from kvledger.analyses.serving.overloads import QueueGrowth  # lazy: only an overloaded run makes one

    span = t_last - t_mid
    arrived = arrived_between / span
    left = float(np.searchsorted(done, t_last, side="right") - np.searchsorted(done, t_mid, side="right")) / span
    allowance = z * math.sqrt(dispersion(arrival) * expected)
    words = N.overloaded_waiting if waiting else N.overloaded
    return QueueGrowth(t_mid - t0, t_last - t0, mid, last, arrived, left,
                       words(mid, t_mid - t0, last, t_last - t0, arrived, left, advice, expected, allowance, z),
                       "waiting" if waiting else None, expected, allowance, stay_s=stay_s)


def _past(last: float, expected: float, arrived_between: int, n: int) -> bool:
    """The backlog ``last`` past the ``expected`` one by this check's thresholds (module doc)."""
    if not (last - expected > MIN_GROWTH and last > MIN_SHARE * n):
        return False
    return last >= GROWTH * expected or last - expected > SHORTFALL * arrived_between


QUEUE_CHECK = "kvledger.analyses.serving.queue_growth.probe_queue_grew"
"""This check, as an SLO-capacity search's note names it (``kvledger.ledgers.boundary.unsustained_note``)."""


def probe_queue_grew(run: RunRecords, mode: str) -> bool | None:
    """Whether an SLO-capacity probe did not sustain its load, as every boundary search counts it (a miss whatever
    its attainment: ``kvledger.ledgers.boundary.BoundaryPoint.queue_grew``): an open loop (``mode`` "open loop …",
    the workload's) whose queue grew (``queue_growth``) by more than the trace's own bursts can move it —
    the excess over the expected backlog more than ``SUSTAINED_Z`` × √(D × the expected backlog), D the arrivals'
    index of dispersion (the squared coefficient of variation of their gaps, at least 1: a Poisson count's variance is
    its mean, a bursty trace's D times it). A probe counted out lowers the capacity, so an end-of-run burst must not
    do it: the first 150 requests of azure-conv at 3.25 req/s on Llama-3.1-8B / H100 (TTFT 30 ms) end with 18 in the
    system against 7.4 expected, an overload by ``queue_growth``'s rule (which the boundary's warning still reports)
    but 10.6 < 3 × √(2.18 × 7.4) = 12.1. None, not checked: a closed loop (its backlog cannot grow with the arrivals),
    and a probe the early-stop rule ended (it misses anyway, and its unfinished requests are no backlog)."""
    if run.metadata.extra.get("stopped_early") is not None or not mode.startswith("open loop"):
        return None
    q = queue_growth(run)
    return q is not None and not q.within_bursts


STEADY_HINT_REQUESTS = 2000
"""The requests per probe the warning suggests: report's and cost --simulate's default (cli/report_cmd.py)."""


def not_steady_note(q: QueueGrowth, rate: float, num_requests: int) -> str:
    """The warning for an SLO-capacity probe at ``rate`` req/s (``num_requests`` requests) that met its target with its
    backlog still growing at its last arrival: a rate above what the engine sustains still passes a run too short for
    its queue to cost the SLO, so the capacity found is too high. Starts with ``not steady: `` (views look for it)."""
    waiting = q.queue == "waiting"  # read in a probe too short for the backlog (module doc)
    return (f"not steady: the probe at the capacity ({rate:g} req/s, {num_requests:,} requests) ended with its queue "
            f"still growing — requests {'waiting for their first token' if waiting else 'in the system'} rose from "
            f"{q.backlog_mid:,} at the median arrival to {q.backlog_last:,} at the last"
            f"{N.expected_clause(q.backlog_mid, q.backlog_expected, q.burst_allowance, q.backlog_last, SUSTAINED_Z)}; "
            f"{q.arrived_per_s:,.2f} req/s "
            f"arrived and {q.finished_per_s:,.2f} req/s {'got their first token' if waiting else 'finished'} in "
            "between (kvledger.analyses.serving.queue_growth) — so the search did not count the probe out "
            "(queue_growth.probe_queue_grew), but the run may have ended before its queue cost "
            "the SLO, and the rate found is optimistic (whatever a drain tail does to the goodput priced): rerun "
            f"with more requests per probe (--num-requests; {STEADY_HINT_REQUESTS:,} is the default)")


def short_run_note(short: ShortRun, rate: float) -> str:
    """The warning for an SLO-capacity probe at ``rate`` req/s that met its target in a run too short to tell whether
    it kept up (``open_loop_check``): starts with ``not steady: `` (views look for it), as ``not_steady_note``."""
    return (f"not steady: the probe at the capacity ({rate:g} req/s, {short.num_requests:,} requests) was too short to "
            f"tell whether it kept up — its arrivals up to the median spanned {short.t_mid_s:,.2f} s, less than the "
            f"{short.first_finish_s:,.2f} s to its first finish, and its waiting queue did not grow "
            "(kvledger.analyses.serving.queue_growth) — so the rate found may be optimistic: rerun with more "
            f"requests per probe (--num-requests; at least {short.suggested_num_requests:,} here, "
            f"{STEADY_HINT_REQUESTS:,} is the default)")


def boundary_steadiness(run: RunRecords, rate: float, num_requests: int) -> tuple[QueueGrowth | ShortRun | None,
                                                                                     list[str]]:
    """The SLO-capacity probe at ``rate`` (``num_requests`` requests) read by ``open_loop_check``: (its queue growth,
    or its too-short record, or None when it held; the ``not steady`` warning, or [])."""
    q, short = open_loop_check(run, N.OVERLOAD_ADVICE_CAPACITY)
    if q is not None:
        return q, [not_steady_note(q, rate, num_requests)]
    return short, [] if short is None else [short_run_note(short, rate)]


def run_overload(run: RunRecords, mode: str, info: dict[str, Any] | None = None) -> Any:
    """The overload of a run by its workload's ``mode``: an open loop's queue growth, a session run's waiting share
    (module doc), a paced closed loop's clients behind their rate (``paced_behind``; ``info``: the workload's
    description); None when it kept up, or for another closed loop."""
    if mode.startswith("open loop"):
        return queue_growth(run)
    if mode == PACED_MODE:
        from kvledger.analyses.serving.paced_loop import paced_behind

        return paced_behind(run, info or {})
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

