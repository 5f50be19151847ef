"""The cells of a capacity search's probe table (``goodput --simulate --target``): its attainment and its verdict."""

from __future__ import annotations

from typing import Any

__all__ = ["probe_attainment", "probe_verdict"]


def probe_attainment(pr: Any) -> str:
    """A probe's attainment; a probe stopped early shows its bounds (finished-by-then share – the most it could
    reach)."""
    if pr.stopped_early is None:
        return f"{pr.attainment:.1%}"
    from kvledger.analyses.serving.sim_capacity import stopped_share_text

    return stopped_share_text(pr.attainment, pr.stopped_early["attainment_upper"])


def probe_verdict(pr: Any) -> str:
    """``meets``, or why it does not: ``queue grew`` / ``too short`` (counted out whatever its attainment), else
    ``misses``."""
    if pr.meets_target:
        return "meets"
    return "queue grew" if pr.queue_grew else "too short" if pr.too_short else "misses"
