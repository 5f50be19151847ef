"""The machine's empty-loop floor, so that speed figures from different machines and loads can be compared.

A Python loop doing one dict update per iteration is about the cheapest step a pure-Python simulator can take; a
wall time divided by it is a count of "floor steps" that a faster or a busier machine moves far less than seconds.
"""

from __future__ import annotations

import time

__all__ = ["step_floor_s", "floor_line", "in_floor_steps"]


def step_floor_s(steps: int = 2_000_000, repeat: int = 3) -> float:
    """Seconds per iteration of an empty Python loop doing one dict update, best of ``repeat``."""
    best = float("inf")
    for _ in range(repeat):
        d: dict[int, int] = {}
        t0 = time.perf_counter()
        for i in range(steps):
            d[i & 1023] = i
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def floor_line(floor_s: float) -> str:
    return f"machine floor: {floor_s * 1e6:.3f} µs per empty-loop step (one dict update; benchmarks/floor.py)"


def in_floor_steps(seconds: float, floor_s: float) -> str:
    """``seconds`` as millions of floor steps on this machine."""
    return f"{seconds / floor_s / 1e6:,.1f} M floor steps"


if __name__ == "__main__":  # the line the README quotes: python benchmarks/floor.py
    print(floor_line(step_floor_s()))
