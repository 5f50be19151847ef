"""The open-loop check that a run's server served the load it was offered: a rate sweep's top stages are sent faster
than the engine completes requests (inference-perf's kubecon NA 2025 baseline, stage 6: 183.38 req/s requested, 103.08
completed per second, vLLM 0.11.0 on one H100), and a run like that measures the server at its throughput ceiling with a
queue that grew all run, whatever share of its requests met the SLO.

Rule: open loop (a finite request rate R stated), completed requests per second (the run's throughput) below
:data:`FELL_BEHIND_SHARE` × R. The 10 % tolerance is the drain: a run that keeps up still completes fewer requests per
second than it sent, because its last requests finish after the last arrival; ``calibration/sweep_bands.py`` takes the
same 0.9 of the requested rate as the line below which a stage was saturated.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FELL_BEHIND_RULE", "FELL_BEHIND_SHARE", "fell_behind"]

FELL_BEHIND_SHARE = 0.9
"""Completed req/s below this share of the offered rate: the server fell behind its load (the tolerance covers the
drain of the last requests after the last arrival)."""

FELL_BEHIND_RULE = (f"fell behind when an open-loop run's completed req/s is below {FELL_BEHIND_SHARE:.0%} of its "
                    f"offered rate (a tolerance of {1 - FELL_BEHIND_SHARE:.0%} for the drain after the last arrival)")


def fell_behind(rate_req_per_s: float | None, served_req_per_s: float | None) -> dict[str, Any] | None:
    """The failed check, as ``capacity_basis``'s check rows are, when an open-loop run (``rate_req_per_s`` offered,
    req/s) completed fewer than :data:`FELL_BEHIND_SHARE` of it per second (``served_req_per_s``); None when it kept
    up, or when either rate is unknown (a closed loop, a ramped rate, no duration)."""
    if not rate_req_per_s or served_req_per_s is None:
        return None
    share = served_req_per_s / rate_req_per_s
    if share >= FELL_BEHIND_SHARE:
        return None
    return {"check": "served the offered load (open loop)", "value": share, "limit": FELL_BEHIND_SHARE,
            "passed": False,
            "text": (f"offered {rate_req_per_s:,.4g} req/s, served {served_req_per_s:,.4g} completed req/s "
                     f"({share:.1%} of offered, below {FELL_BEHIND_SHARE:.0%}): the server fell behind its load, so "
                     "its queue grew all run and the run measured its throughput ceiling")}
