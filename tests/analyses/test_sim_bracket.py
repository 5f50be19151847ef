"""The guessed bracket of a configuration search's rate search: the same bracket and bisection state as doubling or
halving from the start, with the end its first midpoint implies left unsimulated."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.sim_bracket import find_bracket, guessed_bracket
from kvledger.ledgers.slo import SLO


class _Cliff:
    """A prober whose attainment meets the target up to ``boundary`` req/s and misses above it; records each value
    it simulates (once, as the real prober does)."""

    def __init__(self, boundary: float) -> None:
        self.boundary, self.runs, self.current_phase = boundary, [], "bracket"

    def meets(self, value: float) -> bool:
        if value not in self.runs:
            self.runs.append(value)
        return value <= self.boundary


@pytest.mark.parametrize(("boundary", "expected", "probes"), [
    # start 8: the midpoint 6 meets, so 4 meets (implied); 8 misses → [4, 8], state (6, 8); main probes 8, 4 (then 6)
    (7.0, (4.0, 8.0, 6.0, 8.0), [6.0, 8.0]),
    # 6 misses, so 8 misses (implied); 4 meets → [4, 8], state (4, 6); main probes 8, 4 (then 6)
    (5.0, (4.0, 8.0, 4.0, 6.0), [6.0, 4.0]),
    # 6 and 4 miss: halving goes on with [2, 4] guessed, its midpoint 3 meets → state (3, 4); main probes 8, 4, 2, 3
    (3.5, (2.0, 4.0, 3.0, 4.0), [6.0, 4.0, 3.0]),
    # 6 and 4 miss, 3 misses, 2 meets → state (2, 3); main probes 8, 4, 2, 3
    (2.5, (2.0, 4.0, 2.0, 3.0), [6.0, 4.0, 3.0, 2.0]),
    # the start meets: doubling from 8 as main does (16 misses) → [8, 16]; the midpoint 6 is one probe more
    (9.0, (8.0, 16.0, 8.0, 16.0), [6.0, 8.0, 16.0]),
])
def test_guessed_bracket_by_hand(boundary, expected, probes):
    p = _Cliff(boundary)
    assert guessed_bracket(p, 8.0) == expected
    assert p.runs == probes
    main = _Cliff(boundary)
    lo, hi = find_bracket(main, None, None, False, 8.0)
    assert (lo, hi) == expected[:2]  # the bracket doubling or halving from the start finds


def test_search_sim_boundary_same_boundary_one_probe_fewer():
    """Llama-3.1-8B on an H100, 200 Azure conversation requests per probe, started at 40 req/s: main probes 40 (misses,
    attainment 0.61), 20 (meets), then bisects from 30; the guess probes 30 first (misses, 0.84), so 40 misses too and
    is not simulated, then 20: the same bracket [20, 40], boundary (28.75 req/s), verdicts and attainments, one probe
    fewer."""
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=200)
    slo = SLO(ttft_s=0.5, tpot_s=0.05)
    plain = search_sim_boundary(args, slo, 0.9, "request_rate", start=40.0)
    guess = search_sim_boundary(args, slo, 0.9, "request_rate", start=40.0, guess=True)
    assert guess.boundary.boundary_value == plain.boundary.boundary_value == 28.75
    assert guess.boundary.first_failing_value == plain.boundary.first_failing_value
    assert guess.boundary.notes == plain.boundary.notes  # "bisection on request_rate in [20, 40], ..."
    verdicts = {p.value: (p.attainment, p.meets_target) for p in plain.probes}
    assert verdicts[40.0] == (0.61, False)
    assert {p.value: (p.attainment, p.meets_target) for p in guess.probes} == {
        v: x for v, x in verdicts.items() if v != 40.0}
    assert [p.value for p in guess.probes[:2]] == [30.0, 20.0]
    assert any("40 misses" in n and "not simulated" in n for n in guess.notes)
