"""The cells of a capacity search's probe table (``goodput --simulate --target``): its attainment and its verdict; and
what its target means (``target_words``)."""

from __future__ import annotations

from typing import Any

__all__ = ["probe_attainment", "probe_verdict", "target_words"]


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


def target_words(target: float) -> str:
    """``≥ 99% of requests within all limits at once (not a p99 of each)`` for ``target`` 0.99, said once where
    goodput and search state the target.

    The share of requests that meet every SLO limit at once (``ledgers.goodput``: a request is good when its TTFT,
    TPOT and every other limit given are all within), not a percentile of each metric: ``--target 0.99`` is 99% of
    requests good, not a p99 TTFT and a p99 TPOT (two p99 limits can each hold while fewer than 99% of requests
    meet both)."""
    pct = f"{100 * target:.4g}"  # 0.995: 99.5, not the 100% that :.0% rounds it to
    return f"≥ {pct}% of requests within all limits at once (not a p{pct} of each)"
