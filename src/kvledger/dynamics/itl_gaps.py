"""The run's inter-token-latency (ITL) distribution kept exactly without per-request token times: step gaps weighted by counts.

Every ITL of a simulated request is the gap between two of its token times, which are step
end times: within a run of consecutive steps the gap ending at step ``j`` is
``t[j] − t[j−1]``, the same float for every request that emitted a token in both steps. So
the multiset of all ITLs is the set of step gaps, each counted once per such request, plus
the few gaps that span a preemption or a skipped step (kept one by one). Memory follows the
number of steps (12 bytes per step in which some request had a gap), not the number of
tokens; percentiles computed from it are bit for bit numpy's 'linear' percentiles over the
full gap array. The mean is Σ value × count (each product rounded once, the sum exact by
``math.fsum``) over the count: it may differ from numpy's pairwise-summed mean of the full
array in the last digits (relative difference < 1e-12).
"""

from __future__ import annotations

import math

import numpy as np

from kvledger.dynamics.metrics import LatencyStats

__all__ = ["GapHistogram", "merged_stats"]


class GapHistogram:
    """Weighted ITL values of one replica: (gap s, count) pairs, plus single gaps."""

    def __init__(self) -> None:
        self._values: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self.single: list[float] = []  # gaps spanning a preemption or a skipped step, s

    def add_steps(self, gaps: np.ndarray, counts: np.ndarray) -> None:
        """Steps' gaps (s) and how many requests had a token in both the step and the one before (count)."""
        keep = counts > 0
        if keep.any():
            self._values.append(gaps[keep])
            self._counts.append(counts[keep].astype(np.int32))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All (values, counts), single gaps included with count 1."""
        vals = self._values + [np.asarray(self.single, dtype=np.float64)]
        cnts = self._counts + [np.ones(len(self.single), dtype=np.int32)]
        return np.concatenate(vals), np.concatenate(cnts)


def merged_stats(hists: list[GapHistogram]) -> LatencyStats:
    """Mean, p50, p90, p99 and count of all gaps of ``hists``, as ``latency_stats`` gives on the expanded array."""
    parts = [h.arrays() for h in hists]
    values = np.concatenate([v for v, _ in parts])
    counts = np.concatenate([c for _, c in parts]).astype(np.int64)
    n = int(counts.sum())
    if n == 0:
        return LatencyStats(None, None, None, None, 0)
    order = np.argsort(values, kind="stable")
    values, counts = values[order], counts[order]
    cum = np.cumsum(counts)

    def at(rank: int) -> float:  # the rank-th smallest gap (0-based) of the expanded array
        return float(values[int(np.searchsorted(cum, rank, side="right"))])

    out = []
    for q in (50.0, 90.0, 99.0):
        h = q / 100.0 * (n - 1)
        lo = int(h)
        a, b = at(lo), at(min(lo + 1, n - 1))
        out.append(a + (h - lo) * (b - a))
    mean = math.fsum((values * counts).tolist()) / n if n < 2**53 else float(np.dot(values, counts) / n)
    return LatencyStats(mean, out[0], out[1], out[2], n)
