"""A rate search whose target sits near the attainment the workload reaches at light load: the capacity it finds is set
by the requests that miss at any load (a bursty trace's simultaneous arrivals, whose gaps rescaling the rate keeps at
zero), not by how much load the GPU carries, and it moves far with a small change of the target or the draw.

Llama-3.1-8B on an H100, azure-code, TTFT ≤ 200 ms and TPOT ≤ 50 ms, target 90 %: 93.0 % of requests meet the SLO at
0.125 req/s and 90.0–90.8 % from 0.1875 to 0.2148 req/s, the capacity found; an 8B model on an H100 serves far more,
but its TTFT during the bursts misses either way. The search still answers, with a warning in the capacity's notes
(its prefix one of ``notes.CAPACITY_WARNINGS``, so every command that shows a capacity shows it as a warning).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.analyses.serving.notes import ATTAINMENT_CEILING
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.columns import columns_from

__all__ = ["CEILING_MARGIN", "CEILING_RATE_SHARE", "BURST_GAP_SHARE", "AttainmentCeiling", "attainment_ceiling"]

CEILING_MARGIN = 0.05
"""Warn when the attainment at the lowest rate probed is less than this above the target (5 points), or, for a target
above 90 %, less than half the misses the target allows, (1 − target) ÷ 2, above it: a threshold of this check, not
fitted. At a 99 % target a light load with every request within the SLO (100 %) is 1 point above it, yet nothing
missed: the halved allowance (0.5 point) keeps such a run from being called a ceiling."""
CEILING_RATE_SHARE = 0.75
"""… and that rate is at most this share of the capacity found: a probe close under the capacity is near the load's
own cliff, where an attainment a few points above the target says nothing about a ceiling."""
BURST_GAP_SHARE = 0.01
"""An arrival gap under this share of the mean gap counts as a burst (rescaling the rate keeps the share)."""


@dataclass(frozen=True)
class AttainmentCeiling:
    """The evidence that the target sits near the workload's attainment ceiling.

    Attributes:
        target: the attainment target.
        lowest_rate_req_per_s: the lowest rate probed and run to its end, req/s.
        attainment_at_lowest: share of its requests within the SLO.
        slo_capacity_req_per_s: the SLO capacity found, req/s.
        missed_at_lowest: its completed requests that missed, by SLO metric (a request can miss several), count.
        failed_at_lowest: its requests that did not complete (rejected or failed), count.
        good_at_lowest: its requests within the SLO, count.
        num_requests: requests per probe, count.
        burst_gaps: arrival gaps under ``BURST_GAP_SHARE`` of the mean gap, count (of ``num_gaps``).
        probes: (rate, attainment, run to the end) of each probe, by rate (a probe stopped early: its upper bound).
        note: the warning, in words.
    """

    __json__ = ("target", "lowest_rate_req_per_s", "attainment_at_lowest", "slo_capacity_req_per_s", "missed_at_lowest",
                "failed_at_lowest", "good_at_lowest", "num_requests", "burst_gaps", "num_gaps", "note")
    target: float
    lowest_rate_req_per_s: float
    attainment_at_lowest: float
    slo_capacity_req_per_s: float
    missed_at_lowest: dict[str, int]
    failed_at_lowest: int
    good_at_lowest: int
    num_requests: int
    burst_gaps: int
    num_gaps: int
    probes: list[tuple[float, float, bool]]
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _burst_gaps(run: Any) -> tuple[int, int]:
    """(gaps under ``BURST_GAP_SHARE`` of the mean gap, gaps) between the arrivals of ``run``."""
    gaps = np.diff(np.sort(columns_from(run).arrival_s))
    if not gaps.size or gaps.mean() <= 0:
        return 0, int(gaps.size)
    return int(np.count_nonzero(gaps < BURST_GAP_SHARE * gaps.mean())), int(gaps.size)


def attainment_ceiling(sb: Any) -> AttainmentCeiling | None:
    """The warning for a request-rate search ``sb`` (``sim_boundary.SimBoundary``) whose lowest rate probed, at most
    ``CEILING_RATE_SHARE`` of the capacity, met the target by less than ``CEILING_MARGIN`` or half the target's
    allowance of misses, whichever is less (module doc); None
    otherwise (another axis, no capacity, no such probe, or a wide margin)."""
    b = sb.boundary.boundary_value
    if sb.axis != "request_rate" or b is None:
        return None
    full = sorted((pr.value, k) for k, pr in enumerate(sb.probes) if pr.stopped_early is None)
    if not full or full[0][0] > CEILING_RATE_SHARE * b:
        return None
    low, gp = sb.probes[full[0][1]], sb.goodputs[full[0][1]]
    if not sb.target <= low.attainment < sb.target + min(CEILING_MARGIN, (1.0 - sb.target) / 2):
        return None
    bursts, gaps = _burst_gaps(sb.first_run.run)
    probes = sorted((pr.value, pr.attainment if pr.stopped_early is None else pr.stopped_early["attainment_upper"],
                     pr.stopped_early is None) for pr in sb.probes)
    c = AttainmentCeiling(sb.target, low.value, low.attainment, float(b), dict(gp.num_missed),
                          gp.num_requests - gp.num_completed, gp.num_good, gp.num_requests, bursts, gaps, probes)
    return AttainmentCeiling(**{**c.__dict__, "note": _note(c)})


def _share(x: float) -> str:
    """A share to 0.1 %, rounded down (an upper bound of 89.95 % still reads below a 90 % target)."""
    return f"{math.floor(round(x * 1000, 6)) / 10:.1f}%"


def _note(c: AttainmentCeiling) -> str:
    """The warning: the attainment figures, what missed at the lowest rate, the bursts, and what to do."""
    low, cap = c.lowest_rate_req_per_s, c.slo_capacity_req_per_s
    between = ", ".join(f"{v:.4g} → {a:.1%}" for v, a, _ in c.probes if low < v <= cap)
    above = [(v, a) for v, a, _ in c.probes if v > cap]
    then = between + (f"; from {above[0][0]:.4g} req/s up at most {_share(max(a for _, a in above))}" if above else "")
    names = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}
    missed = {names.get(k, k): n for k, n in c.missed_at_lowest.items() if n}
    by = ", ".join(f"{k} {n:,}" for k, n in missed.items()) or "none completed late"
    top = max(missed, key=missed.get) if missed else None
    failed = f", {c.failed_at_lowest:,} not completed" if c.failed_at_lowest else ""
    return (f"{ATTAINMENT_CEILING}even at {low:.4g} req/s, the lowest rate probed ({low / cap:.0%} of the "
            f"{cap:.4g} req/s capacity), only {c.attainment_at_lowest:.1%} of requests meet the SLO against the "
            f"{c.target:.0%} target (then {then}): the target sits near the most this workload attains at light "
            "load, so the capacity is set by the requests that miss at any load, not by the load the GPU carries, and "
            f"a small change of the target or the draw moves it far. At {low:.4g} req/s "
            f"{c.num_requests - c.good_at_lowest:,} of {c.num_requests:,} requests missed (by metric: {by}{failed}); "
            f"{c.burst_gaps:,} of the {c.num_gaps:,} arrival gaps are under {BURST_GAP_SHARE:.0%} of the mean gap, "
            "bursts that rescaling the rate keeps. Lower --target, or look at why those requests miss"
            + (f" ({top} mostly{', during the bursts' if top == 'TTFT' else ''}: kvledger simulate --rate {low:.4g} "
               "prints the latency percentiles at that rate)" if top else ""))
