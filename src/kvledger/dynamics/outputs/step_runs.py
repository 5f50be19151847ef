"""Step arithmetic of the KV usage series: the steps of block-allocation runs and per-step values since a set step."""

from __future__ import annotations

import numpy as np

__all__ = ["run_steps", "since_set"]


def run_steps(runs: list[int], block_size: int, offsets: list[int] | None = None) -> np.ndarray:
    """The steps of allocation runs ``[first step, count, …]`` (one block every ``block_size`` steps from the first),
    each run's first step shifted by its entry in ``offsets`` when given."""
    if not runs:
        return np.zeros(0, dtype=np.int64)
    r = np.asarray(runs, dtype=np.int64).reshape(-1, 2)
    first, count = r[:, 0], r[:, 1]
    if offsets is not None:
        first = first + np.asarray(offsets, dtype=np.int64)
    start = count.cumsum() - count
    return first.repeat(count) + block_size * (np.arange(int(count.sum())) - start.repeat(count))


def since_set(values: np.ndarray, at: np.ndarray, last: np.ndarray, change: np.ndarray) -> np.ndarray:
    """Per step: the value last set (``values[last]``, set at step ``at[last]``) plus the whole changes from that step
    on.

    The changes are integers summed in int64, so a sample equals the count it stands for exactly."""
    run = change.cumsum()
    before = run[at] - change[at]  # changes before each set step
    return values[last] + (run - before[last]).astype(np.float64)
