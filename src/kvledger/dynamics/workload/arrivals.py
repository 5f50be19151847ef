"""Arrival processes: the seeded Generator every draw comes from, and vLLM's Gamma-gap arrival times.

Arrivals follow vLLM's ``benchmarks/serve.py`` convention: the first request is sent at
t = 0 and each later one after an inter-arrival gap drawn from a Gamma distribution with
shape k and mean 1/rate. k = 1 is a Poisson process; vLLM calls k the ``burstiness``;
the gaps' coefficient of variation is CV = 1/√k, so we take ``cv`` and use k = 1/CV².
CV = 0 is the limit k → ∞: every gap is exactly 1/rate (a fixed-interval client timer), and no gap is drawn.
"""

from __future__ import annotations

import math

import numpy as np

from kvledger.errors import InputError

__all__ = ["make_rng", "arrival_times"]


def make_rng(seed: int | np.random.Generator) -> np.random.Generator:
    """A Generator from an int seed (PCG64, numpy's default) or the Generator itself; anything else is an InputError."""
    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        return np.random.default_rng(int(seed))
    raise InputError(f"seed must be an int or a numpy Generator, got {seed!r}")


def arrival_times(n: int, rate_per_s: float, *, cv: float = 1.0, seed: int | np.random.Generator) -> np.ndarray:
    """Arrival times of ``n`` requests, s, shape ``(n,)``, float64, non-decreasing, first at 0.

    Gaps are Gamma(shape = 1/cv², scale = cv²/rate): mean 1/rate, coefficient of variation ``cv``
    (cv = 1: exponential gaps, a Poisson process; cv > 1: bursty; cv < 1: smoother than Poisson; cv = 0: request i
    at exactly i/rate, nothing drawn from ``seed``, so a caller's later draws are those it would make with no
    arrivals at all). ``rate_per_s = inf`` sends everything at t = 0 (a burst, as offline benchmarks do).

    Raises:
        InputError: n < 0, rate not > 0, cv not ≥ 0.
    """
    if n < 0:
        raise InputError(f"number of requests must be ≥ 0, got {n}")
    if not rate_per_s > 0:
        raise InputError(f"arrival rate must be > 0 req/s (inf for a burst), got {rate_per_s}")
    if math.isinf(rate_per_s) or n <= 1:
        return np.zeros(n, dtype=np.float64)
    if not (cv >= 0 and math.isfinite(cv)):
        raise InputError(f"arrival CV must be a finite number ≥ 0 (0 = a fixed interval of 1/rate), got {cv}")
    if cv == 0:
        return np.arange(n, dtype=np.float64) / rate_per_s  # i/rate, one correctly rounded division each
    rng = make_rng(seed)
    shape = 1.0 / (cv * cv)
    gaps = rng.gamma(shape, 1.0 / (rate_per_s * shape), size=n - 1)
    return np.concatenate(([0.0], np.cumsum(gaps)))
