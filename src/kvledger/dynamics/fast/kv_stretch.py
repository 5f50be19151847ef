"""The per-step KV usage a decode stretch stands for, from the changes a KV manager's ``stretch_commit`` returns."""

from __future__ import annotations

import numpy as np

from kvledger.dynamics.outputs.kv_usage import run_steps

__all__ = ["per_step_samples"]


def per_step_samples(samples: tuple, k: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(used blocks, held slots) in each of the ``k`` steps of a stretch, from ``PagedStretches.stretch_commit``'s
    changes (engine/stretch_alloc.py)."""
    used0, held0, allocs, drops, runs = samples
    steps = np.concatenate((np.asarray(allocs, dtype=np.int64), run_steps(runs, block_size)))
    change = np.bincount(steps, minlength=k + 1)[: k + 1]
    used_change, held_change = change.copy(), change * block_size
    for j, du, dr in drops:
        used_change[j] -= du
        held_change[j] -= dr * block_size
    return used0 + np.cumsum(used_change[:k]), held0 + np.cumsum(held_change[:k])
