"""The records of an overloaded run (``queue_growth.run_overload``): an open loop's queue growth and a session run's
waiting share. Apart from ``queue_growth`` so that a run that kept up does not make these classes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QueueGrowth", "SessionQueue"]


@dataclass(frozen=True, slots=True)
class QueueGrowth:
    """An overload: the backlog at the median and the last arrival (times from the first arrival, s) and the rates at
    which requests arrived and finished in between (requests/s), with the note that says so."""

    t_mid_s: float
    t_last_s: float
    backlog_mid: int
    backlog_last: int
    arrived_per_s: float
    finished_per_s: float
    note: str


@dataclass(frozen=True, slots=True)
class SessionQueue:
    """A session run's overload: Σ TTFT ÷ Σ E2E of its turns (``ttft_share``, at least ``threshold``), their TTFT mean
    (s), and the note that says so."""

    ttft_share: float
    ttft_mean_s: float
    threshold: float
    note: str
