"""The guessed bracket of a configuration search's rate search: the same bracket and bisection state as doubling or
halving from the start, with a high end its first midpoint implies left unsimulated and the low end always probed."""

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


def _main(boundary: float, start: float, p: _Cliff | None = None) -> tuple[tuple[float, float, float, float],
                                                                           list[float]]:
    """The bracket and final bisection state without the guess: doubling or halving from ``start``, then
    search_boundary's bisection to hi/100 (kvledger.ledgers.boundary), and the values it simulated (``p``: the
    prober, a cliff at ``boundary`` by default)."""
    p = p or _Cliff(boundary)
    lo, hi = find_bracket(p, None, None, False, start)
    good, bad = lo, hi
    while bad - good > hi / 100.0:
        mid = (good + bad) / 2.0
        good, bad = (mid, bad) if p.meets(mid) else (good, mid)
    return (lo, hi, good, bad), p.runs


@pytest.mark.parametrize(("boundary", "probes", "main_probes"), [
    # start 8, bracket [4, 8], tolerance 0.08: six midpoints 6, 7, 7.5, 7.25, 7.125, 7.0625 settle it; 7.5 misses (so
    # 8 does, not simulated); 6 meets, but the low end 4 is verified, not implied: 7 probes; main adds 8 and 4
    (7.1, 7, 8),
    # 6 and 5 miss, none met: 4 is probed (it meets), then 4.5 … 4.0625: 7 probes; main 8
    (4.01, 7, 8),
    # 6, 5 miss and 4 misses: halving goes on with [2, 4] (tolerance 0.04), 4 known to miss: 3 meets, 3.5, 3.75,
    # 3.625, 3.5625, 3.53125, then 2 is verified → 10 probes, against main's 8, 4, 2 and its six midpoints (9)
    (3.5, 10, 9),
    # every midpoint meets, so 8 is probed: it meets and doubling from it brackets [8, 16] as main does (6 + 2
    # probes here; search_boundary then bisects [8, 16] with main's six midpoints): the six midpoints of [4, 8] were
    # spent for nothing, 14 probes against main's 8
    (9.0, 8, 8),
])
def test_guessed_bracket_by_hand(boundary, probes, main_probes):
    p = _Cliff(boundary)
    lo, hi, good, bad, implied = guessed_bracket(p, 8.0)
    state, ran = _main(boundary, 8.0)
    if hi <= 8.0:
        assert (lo, hi, good, bad) == state
    else:  # doubling: search_boundary bisects [lo, hi] itself (the state is its start)
        assert (lo, hi) == state[:2] and (good, bad) == (lo, hi)
    assert (len(p.runs), len(ran)) == (probes, main_probes)
    assert all(v in p.runs or f"{v:g} " in " ".join(implied) for v in (lo, hi) if hi <= 8.0)


def test_guessed_bracket_same_state_as_doubling_or_halving():
    """Boundaries from 0.01 to 30 req/s, start 8: the same bracket and final bisection state as main's search."""
    for i in range(1, 300):
        b = 0.01 * 1.03 ** i
        lo, hi, good, bad, _ = guessed_bracket(_Cliff(b), 8.0)
        state, _ = _main(b, 8.0)
        assert (lo, hi) == state[:2] and ((good, bad) == state[2:] or (good, bad) == (lo, hi) and hi > 8.0), b


def test_search_sim_boundary_same_boundary_one_probe_fewer():
    """Llama-3.1-8B on an H100, 2,000 Azure conversation requests per probe, started at 40 req/s: main probes 40
    (misses, attainment 0.0495) and 20 (meets), then bisects [20, 40] from 30; the guess bisects first: 30 misses (so
    40 does) and 25 misses too, so it probes 20 (meets) and bisects on from [20, 25]: the same boundary (20.9375
    req/s), verdicts and attainments, one probe fewer (40)."""
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=2000,
                          gemm_efficiency="flat")  # the flat roofline these probes were read off
    slo = SLO(ttft_s=0.5, tpot_s=0.05)
    plain = search_sim_boundary(args, slo, 0.9, "request_rate", start=40.0)
    guess = search_sim_boundary(args, slo, 0.9, "request_rate", start=40.0, guess=True)
    assert guess.boundary.boundary_value == plain.boundary.boundary_value == 20.9375
    assert guess.boundary.first_failing_value == plain.boundary.first_failing_value == 21.25
    assert guess.boundary.notes == plain.boundary.notes  # "bisection on request_rate in [20, 40], ..."
    verdicts = {p.value: (p.attainment, p.meets_target) for p in plain.probes}
    assert verdicts[40.0] == (0.0495, False) and verdicts[20.0] == (0.993, True)
    assert {p.value: (p.attainment, p.meets_target) for p in guess.probes} == {
        v: x for v, x in verdicts.items() if v != 40.0}
    assert [p.value for p in guess.probes[:3]] == [30.0, 25.0, 20.0]
    # every probe either met the target having kept up, or missed it on attainment: none counted out by its queue
    assert all(p.queue_grew in (False, None) for p in plain.probes)


def _finish(p: _Cliff, lo: float, hi: float, good: float, bad: float) -> float:
    """search_boundary's bisection from a bracket state to hi/100 (kvledger.ledgers.boundary): the boundary rate."""
    while bad - good > hi / 100.0:
        mid = (good + bad) / 2.0
        good, bad = (mid, bad) if p.meets(mid) else (good, mid)
    return good


def test_bracket_start_is_the_power_of_two_at_or_above_the_bound():
    from kvledger.analyses.search.capacity import bracket_start

    # 2^4 = 16 < 26.085 ≤ 32 = 2^5; an exact power stays; 0.3 → 0.5 (2^−1); no bound → 1 req/s
    assert [bracket_start(x) for x in (26.085, 32.0, 0.3, None, float("inf"))] == [32.0, 32.0, 0.5, 1.0, 1.0]


def test_a_search_started_at_its_bound_stops_where_goodput_simulate_does():
    """A fresh-user trial: search (started at its bound 26.085, rounded to 26.1) stopped at 21.0023 req/s, goodput
    --simulate (doubling from 1) at 21 — the same SLO, trace and seed, two brackets bisected to 1% of their top. From
    the power of two at or above the bound, halving lands on the bracket doubling from 1 finds ([16, 32] for a cliff at
    21.1: 16 meets, 32 misses), so the midpoints (24, 20, 22, 21, 21.5, 21.25) and the boundary (21) are the same, for
    any bound, however far off."""
    from kvledger.analyses.search.capacity import bracket_start

    main = _main(21.1, 1.0)[0]
    assert main == (16.0, 32.0, 21.0, 21.25)
    for b in (0.05 * 1.07 ** i for i in range(120)):
        (lo, hi, good, bad), _ = _main(b, 1.0)
        want = _finish(_Cliff(b), lo, hi, good, bad)
        for factor in (0.3, 0.9, 1.0, 1.24, 1.9, 3.5):
            p = _Cliff(b)
            glo, ghi, ggood, gbad, _ = guessed_bracket(p, bracket_start(b * factor))
            assert _finish(p, glo, ghi, ggood, gbad) == want, (b, factor)


def test_search_from_its_bound_and_goodput_simulate_find_the_same_boundary_and_goodput():
    """The simulator, not a cliff: Llama-3.1-8B on an H100, 2,000 Azure conversation requests per probe. The search's
    start for a bound of 26.085 req/s (the trial's TP 1 bound) is 32, guessed bracket [16, 32]; goodput --simulate
    doubles from 1 to the same bracket; both bisect it through the same midpoints, so the boundary and the goodput
    measured at it are identical (before: 26.1, another bracket, another stopping rate)."""
    from kvledger.analyses.search.capacity import bracket_start
    from kvledger.analyses.serving.sim_boundary import search_sim_boundary
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=2000,
                          gemm_efficiency="flat")  # the flat roofline these probes were read off
    slo = SLO(ttft_s=0.5, tpot_s=0.05)
    plain = search_sim_boundary(args, slo, 0.9, "request_rate")
    guess = search_sim_boundary(args, slo, 0.9, "request_rate", start=bracket_start(26.085), guess=True)
    assert guess.boundary.boundary_value == plain.boundary.boundary_value == 21.0
    assert guess.boundary.notes == plain.boundary.notes  # "bisection on request_rate in [16, 32], ..."
    good = {p.value: g.goodput_req_per_s for g, p in zip(plain.goodputs, plain.probes)}
    gg = {p.value: g.goodput_req_per_s for g, p in zip(guess.goodputs, guess.probes)}
    assert gg[guess.boundary.boundary_value] == good[plain.boundary.boundary_value]


def test_the_end_taken_without_a_probe_is_named_in_plain_words():
    # capacity 7.1 req/s, started at 8: 6 meets and 7.5 misses (probed), so 8 misses because the lower 7.5 does
    # (attainment does not rise with load) and is not simulated; 4, the end the capacity rests on, is probed
    p = _Cliff(7.1)
    _, _, _, _, implied = guessed_bracket(p, 8.0)
    assert implied == ["8 req/s misses the target, as 7.5 req/s does"] and 4.0 in p.runs and 8.0 not in p.runs


class _Dip(_Cliff):
    """A cliff at ``boundary`` whose probe at ``dip`` req/s misses too (a queue read as growing at a light load)."""

    def __init__(self, boundary: float, dip: float) -> None:
        super().__init__(boundary)
        self.dip = dip

    def meets(self, value: float) -> bool:
        return super().meets(value) and value != self.dip


def test_a_low_end_that_misses_sends_the_guess_where_doubling_stops():
    # the trial's shape: capacity 26 req/s, but the probe at 16 misses. Doubling from 1 (goodput --simulate) meets at
    # 1, 2, 4, 8 and stops at 16: bracket [8, 16]. The guess from 32 bisects [16, 32] (24 meets, 28 misses, …) and
    # used to take 16 as meeting: bracket [16, 32], 2× apart. Now 16 is probed, misses, and halving goes on with
    # [8, 16], 16 known to miss: the same bracket and bisection state as doubling
    want, _ = _main(26.0, 1.0, _Dip(26.0, 16.0))
    assert want[:2] == (8.0, 16.0)
    lo, hi, good, bad, _ = guessed_bracket(_Dip(26.0, 16.0), 32.0)
    assert (lo, hi, good, bad) == want
