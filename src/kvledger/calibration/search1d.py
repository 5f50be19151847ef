"""A golden-section search for the one-dimensional fits of a calibration (a set-up's frontend latency, an all-reduce
link share): deterministic, the same evaluations in the same order for the same function."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["golden_min"]

GOLDEN = (5 ** 0.5 - 1) / 2


def golden_min(f: Callable[[float], float], lo: float, hi: float, iters: int) -> tuple[float, float]:
    """(x, f(x)) at the golden-section minimum of ``f`` over [``lo``, ``hi``] after ``iters`` steps (2 + ``iters``
    evaluations; the interval shrinks by 0.618 a step)."""
    a, b = lo, hi
    c, d = b - GOLDEN * (b - a), a + GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + GOLDEN * (b - a)
            fd = f(d)
    return (c, fc) if fc <= fd else (d, fd)
