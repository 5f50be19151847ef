"""The backlog averaged over windows of the arrivals, which ``queue_growth`` reads beside its two instants so that a
dip or a spike at one instant is not read as a growth.

At any instant a kept-up engine's backlog (requests arrived, not finished) swings about its mean L = rate × E2E by
about √L (Poisson arrivals; a bursty trace's more), and a seeded workload puts the same dip at the same arrival at
every rate: Llama-3.1-8B on one H200, 1,024/256 tokens, 500 Poisson requests at 14 req/s held 14 at the median arrival
and 29 at the last (TTFT p90 59 ms, E2E ~2.1 s: L ≈ 29), which the two instants read as an overload — and a capacity
search doubling from 1 req/s counted 14 and 16 req/s out at 100 % attainment. The time average over a window many
E2Es long swings far less: over the second quarter of the arrivals (from the arrival of the request a quarter in to the
median arrival) and the last quarter (from three quarters in to the last arrival) that run held 25.8 and 26.8. A
sustained overload grows the backlog linearly in time, and the two windows' centres lie about as far apart as the
median and the last arrival (3/8 and 7/8 of the span against 1/2 and 1), so the window means grow by as much as the
instants do: the rule reads both with the same thresholds (``queue_growth``'s module doc) and calls the run overloaded
only when both grew. Here too are the arrivals' own statistics the rule scales and allows by: the rate's change
between the halves and the index of dispersion of the gaps.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dispersion", "mean_queue", "quarter_means", "rate_change"]


def _area(times: np.ndarray, a: float, b: float) -> float:
    """∫ over [a, b] of the count of sorted ``times`` at or before t (an event after b, or at +inf, adds nothing)."""
    t = times[: int(np.searchsorted(times, b, side="right"))]
    return float(np.sum(b - np.maximum(t, a)))


def mean_queue(arrival: np.ndarray, done: np.ndarray, a: float, b: float) -> float:
    """The time average over [a, b] (a < b) of the requests arrived and not ``done`` (both sorted; a request never
    done at +inf): (∫ arrived − ∫ done) ÷ (b − a)."""
    return (_area(arrival, a, b) - _area(done, a, b)) / (b - a)


def quarter_means(arrival: np.ndarray, done: np.ndarray, settled: bool) -> tuple[float, float, float] | None:
    """(mean backlog over the second quarter of the arrivals, over the last quarter, the first scaled by the arrival
    rate's change between them — each window's gaps ÷ its span — when ``settled``, else unscaled), or None when a
    window has no span."""
    n = arrival.size
    q1, q2, q3, last = (float(arrival[i]) for i in (n // 4, n // 2, 3 * n // 4, n - 1))
    if q2 <= q1 or last <= q3:
        return None
    second, fourth = mean_queue(arrival, done, q1, q2), mean_queue(arrival, done, q3, last)
    k = ((n - 1 - 3 * n // 4) / (last - q3)) / ((n // 2 - n // 4) / (q2 - q1)) if settled else 1.0
    return second, fourth, second * k


def dispersion(arrival: np.ndarray) -> float:
    """The arrivals' index of dispersion: the squared coefficient of variation of their gaps, at least 1 (a Poisson
    count's variance is its mean; a bursty trace's D times it)."""
    gaps = np.diff(arrival)
    mean = float(gaps.mean()) if gaps.size else 0.0
    return max(1.0, float(gaps.var()) / mean ** 2) if mean > 0 else 1.0


def rate_change(arrival: np.ndarray, t0: float, t_mid: float, t_last: float) -> float:
    """The arrival rate over the second half of the arrivals ÷ over the first (each its gaps ÷ its span: the median
    arrival is the last of the first half and the first of the second); 1 when the first half has no span."""
    n, m = arrival.size, arrival.size // 2
    if t_mid <= t0 or t_last <= t_mid:
        return 1.0
    return ((n - 1 - m) / (t_last - t_mid)) / (m / (t_mid - t0))
