"""The step-cost fit's objective summed run by run, memoised per (run, coefficients) and cut short once it can no longer
beat the value it is compared with: the same accept/reject decisions as the full sum, with fewer replays.

The objective is a sum of non-negative per-run terms (squared weighted log errors), so a candidate whose partial sum
already reaches the incumbent's objective is rejected without replaying the remaining runs; runs are tried in order of
their term at the incumbent, largest first (the runs most likely to reject). One memo serves every fit of a
calibration — the fit on all runs and each leave-one-out fit — so a (run, coefficients) pair is replayed at most once
(the folds start from the same projection of the start model, which depends on the workloads only, never on a measured
latency).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["RunObjective"]


def _key(cost: Any) -> tuple:
    d = cost.coefficients()
    return tuple(sorted((k, float(v)) for k, v in d.items()))


class RunObjective:
    """Per-run objective terms (and the Gauss–Newton linearisations) memoised by (run, engine config, coefficients).

    Attributes:
        num_replays: runs actually replayed (memo misses) so far.
    """

    def __init__(self, term: Callable[[Any, Any, Any], float]) -> None:
        self._term = term
        self._memo: dict[tuple, Any] = {}
        self._weight: dict[tuple[int, int], float] = {}  # each run's term at the last accepted point
        self.num_replays = 0

    def term(self, run: Any, cfg: Any, cost: Any, key: tuple | None = None) -> float:
        k = (id(run), id(cfg), key if key is not None else _key(cost))
        v = self._memo.get(k)
        if v is None:
            v = self._term(run, cfg, cost)
            self._memo[k] = v
            self.num_replays += 1
        return v

    def linearised(self, run: Any, cfg: Any, cost: Any, names: tuple[str, ...],
                   compute: Callable[[Any, Any, Any, tuple[str, ...]], Any]) -> Any:
        """``compute(run, cfg, cost, names)`` (a run's residuals and Jacobian, from a step-by-step replay), memoised."""
        k = ("linearised", id(run), id(cfg), _key(cost), names)
        v = self._memo.get(k)
        if v is None:
            v = compute(run, cfg, cost, names)
            self._memo[k] = v
            self.num_replays += 1
        return v

    def total(self, runs: list, cost: Any, bound: float = math.inf) -> float:
        """Σ of the runs' terms; once the partial sum reaches ``bound`` it is returned as is (a value ≥ ``bound``: the
        candidate cannot be better). Sums are ``math.fsum`` (exactly rounded, so the order the runs are tried in never
        changes a value or a decision: a partial sum ≥ ``bound`` implies the whole one is)."""
        key = _key(cost)
        order = sorted(range(len(runs)), key=lambda i: -self._weight.get((id(runs[i][0]), id(runs[i][1])), 0.0))
        terms = []
        for i in order:
            terms.append(self.term(runs[i][0], runs[i][1], cost, key))
            s = math.fsum(terms)
            if s >= bound:
                return s
        return math.fsum(terms)

    def accept(self, runs: list, cost: Any) -> None:
        """Remember each run's term at ``cost`` (which must have been summed whole) to order the next sums."""
        key = _key(cost)
        for run, cfg in runs:
            v = self._memo.get((id(run), id(cfg), key))
            if v is not None:
                self._weight[(id(run), id(cfg))] = v
