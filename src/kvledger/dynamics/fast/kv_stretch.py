"""The KV usage and step-log samples of a decode stretch, from the changes a KV manager's ``stretch_commit`` returns."""

from __future__ import annotations

import numpy as np

from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.outputs.step_runs import run_steps

__all__ = ["per_step_samples", "account_stretch"]


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


def account_stretch(rep, pieces: list, k: int, ends: list[float], durs: list[float], samples: tuple,
                    running: list[SimRequest], rems: list[int]) -> None:
    """KV usage and token-state samples of each step of a stretch, as step-by-step execution takes them.

    ``samples``: what the KV manager's ``stretch_commit`` returned — the paged manager's changes
    ``(used0, held0, allocation steps, drops, allocation runs)``, or per-step ``(used blocks, held slots)`` arrays.
    """
    cap = rep.kv.capacity_blocks
    if len(samples) == 5:
        rep.usage.add_stretch(ends[:k], durs[:k], cap, *samples, pieces)
        used = per_step_samples(samples, k, rep.kv.block_size)[0] if rep.steplog is not None else None
    else:
        used, held = samples
        rep.usage.add_steps(ends[:k], durs[:k], used, cap, None, held, pieces=pieces)
    if rep.steplog is not None:
        for a, b, alive, _ in pieces:
            b = min(b, k)
            if b > a:
                batch = [(r.spec.request_id, 1) for r, m in zip(running, rems) if m > a]
                u = used[a: b] / cap if isinstance(used, np.ndarray) else np.full(b - a, used / cap)
                rep.steplog.add_stretch(rep.num_steps - k + a, np.asarray(ends[a: b]), np.asarray(durs[a: b]), alive,
                                        u, alive, len(rep.sched.waiting), batch)
