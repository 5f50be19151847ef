"""The memoised, cut-short objective: the same decisions as the full sum with fewer replays."""

from __future__ import annotations

import math

from kvledger.accounting.fitted_cost import LinearStepCost
from kvledger.calibration.objective_memo import RunObjective

A = LinearStepCost(0.01, 1e-4, 0.0, 2e-4, 5e-7)
B = LinearStepCost(0.02, 1e-4, 0.0, 2e-4, 5e-7)


def _fake_terms():
    calls = []
    values = {("r1", 0.01): 3.0, ("r2", 0.01): 1.0, ("r3", 0.01): 2.0, ("r1", 0.02): 0.5, ("r2", 0.02): 4.0,
              ("r3", 0.02): 0.25}

    def term(run, cfg, cost):
        calls.append((run, cost.fixed_s))
        return values[(run, cost.fixed_s)]
    return term, calls


def test_memo_and_cut_short_sum_by_hand():
    term, calls = _fake_terms()
    memo = RunObjective(term)
    runs = [("r1", "cfg"), ("r2", "cfg"), ("r3", "cfg")]
    assert memo.total(runs, A) == 6.0  # 3 + 1 + 2, every run replayed once
    assert memo.num_replays == 3
    assert memo.total(runs, A) == 6.0 and memo.num_replays == 3  # memoised: no replay
    memo.accept(runs, A)  # order of the next sums: r1 (3), r3 (2), r2 (1)
    # B against the bound 6: r1 0.5, r3 0.25 (0.75 < 6), r2 4 → 4.75 < 6: summed whole
    assert memo.total(runs, B, 6.0) == 4.75 and memo.num_replays == 6
    # with bound 4: 0.75 after r1, r3; + 4 (r2) = 4.75 ≥ 4: a value ≥ the bound is returned (rejected either way)
    assert memo.total(runs, B, 4.0) >= 4.0
    # a fresh memo ordered r1, r3, r2 cuts after r1 when the bound is below its term: one replay, not three
    term2, calls2 = _fake_terms()
    m2 = RunObjective(term2)
    m2.total(runs, A)
    m2.accept(runs, A)
    assert m2.total(runs, A, 2.5) == 3.0  # memoised r1 alone reaches 2.5
    assert math.fsum([0.1] * 10) == 1.0  # the sums are exactly rounded (order-free)
