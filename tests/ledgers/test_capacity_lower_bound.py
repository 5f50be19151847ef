"""A capacity only bounded below (an under-loaded run: its goodput is the offered load): the decision's band has no
upper end, a self-host verdict is checked at the low end only, an API verdict holds only when no capacity flips it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.decision import MonthlyVolume, api_options, decide, resolve_volume
from kvledger.ledgers.decision_notes import lower_bound_line, rests_on_line

# one replica: 10 good req/s, 1,000 input and 250 output tokens per good request (tests/ledgers/test_decision.py), here
# the goodput of an under-loaded run: a lower bound on the capacity
CAP = replace(Capacity(10.0, 10_000.0, 2_500.0, 10_000.0, 2_500.0, 0.4, "given", False), lower_bound=True)
TOGETHER_8B = find_api_price("Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo")
BAND = "kvledger assumption: run-to-run variation of a measured benchmark"
RATE = 1e8 / (730 * 3600)  # 10⁸ requests/month = 38.05 req/s


def _decide(usd_per_gpu_hour: float, requests: float = 1e8, people: float = 0.0):
    vol = resolve_volume(MonthlyVolume(requests=requests), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, False)], ApiMix(), vol)
    setup = SelfHostSetup(GpuRate.given(usd_per_gpu_hour, "H100"), 1, None, people, 20_000.0, max_utilization=0.8)
    return decide(CAP, setup, vol, opts, capacity_band=0.1, band_source=BAND)


def test_a_self_host_verdict_on_a_lower_bound_holds_if_it_holds_at_the_low_end():
    # ⌈38.05 ÷ (10 × 0.8)⌉ = 5 replicas × 730 h × $2.69 = $9,818.50 vs the API's 10⁸ × 1,250 tokens × $0.18/M = $22,500:
    # self-host. A higher capacity only lowers the bill; the low end ×0.90 (9 req/s): ⌈38.05 ÷ 7.2⌉ = 6 replicas at
    # 38.05 ÷ 54 = 70.5%, 6 × $1,963.70 = $11,782.20 < $22,500: still self-host, so the verdict holds
    d = _decide(2.69)
    assert d.verdict == "self-host" and d.capacity_lower_bound and d.holds_within_band()
    assert (d.band_low, d.band_high) == (pytest.approx(0.9), None)
    (low,) = d.band_ends  # no upper end to redo the decision at
    assert (low.replicas, low.self_host_usd_per_month, low.verdict) == (6, pytest.approx(6 * 1963.7), "self-host")
    assert low.realized_utilization == pytest.approx(RATE / 54)
    line = rests_on_line(d)
    assert line.startswith("robustness: the verdict holds: the capacity priced is only a lower bound (an "
                           f"under-loaded run: its goodput is the offered load), −10% at worst ({BAND}), with no upper "
                           "end; a higher capacity only lowers the self-hosted bill — at ×0.90 (9 req/s capacity): 6 "
                           "replicas at 70.5%, $11,782.20/month → self-host")
    assert "±10%" not in line
    js = d.to_dict()
    assert js["capacity_lower_bound"] is True and js["capacity_band_high"] is None and len(js["band_ends"]) == 1
    assert "= 5 (at most: the capacity is a lower bound)" in d.sizing
    assert "only a lower bound on the SLO capacity it stands in for" in d.sizing


def test_an_api_verdict_on_a_lower_bound_may_flip_when_some_higher_capacity_flips_it():
    # at $6.50/GPU-h: 5 replicas × 730 h × $6.50 = $23,725 > $22,500: the API. 4 replicas ($18,980) win, reached once
    # the capacity is 38.05 ÷ (10 × 0.8 × 4) = 1.189× the one priced — a ±10% band would call that a hold, but the run
    # bounds the capacity only from below, so nothing rules it out
    d = _decide(6.5)
    k = d.flips["capacity_multiplier"]
    assert d.verdict == "API" and k == pytest.approx(RATE / 32) and not d.holds_within_band()
    line = rests_on_line(d)
    assert line.startswith("robustness: the verdict MAY FLIP: the capacity priced is only a lower bound")
    assert "it would flip were the capacity 1.19× the one priced, which the run does not rule out" in line


def test_an_api_verdict_on_a_lower_bound_holds_when_no_capacity_flips_it():
    # 300M tokens at 1,250 a request = 240,000 requests: one replica ($1,963.70) and the people (0.25 × $20,000)
    # already cost more than the API's 300M × $0.18/M = $54: no capacity, however high, flips it
    d = _decide(2.69, requests=240_000, people=0.25)
    assert d.verdict == "API" and d.flips["capacity_multiplier"] is None and d.holds_within_band()
    assert "the verdict holds: the capacity priced is only a lower bound" in rests_on_line(d)
    assert "no capacity, however high, flips it (one replica and the people already cost more)" in rests_on_line(d)


def test_the_answer_says_the_bill_and_replicas_are_upper_bounds():
    d = _decide(2.69)  # $9,818.50/month on 5 replicas (above)
    assert lower_bound_line(10.0, d) == (
        "  WARNING: the run looks UNDER-LOADED (see the capacity basis below): its 10 good req/s is the load it was "
        "offered, not the replica's capacity, which it bounds only from below; so the self-hosted $9,818.50/month and "
        "its 5 replicas are upper bounds (a rate sweep up to the SLO boundary gives the capacity)")
    assert "the self-hosted costs per token and the break-even volume are upper bounds" in lower_bound_line(10.0, None)


def _setup(usd_per_gpu_hour: float = 2.69):
    return SelfHostSetup(GpuRate.given(usd_per_gpu_hour, "H100"), 1, None, 0.0, 20_000.0, max_utilization=0.8)


def test_no_break_even_at_a_lower_bound_names_the_capacity_that_would():
    # c = 10 req/s × 3600 × 730 × 0.8 = 21,024,000 requests a replica takes; at $0.00005 a request the API charges
    # a·c = $1,051.20 for them, less than R = 730 h × $2.69 = $1,963.70: no break-even at the capacity priced. A lower
    # bound is not "never": above R ÷ (a·c) = 1.868× the capacity, a·c > R and some volume breaks even
    from kvledger.ledgers.breakeven import break_even_volume
    from kvledger.ledgers.decision_notes import no_volume_lines

    bv = break_even_volume(CAP, _setup(), 5e-5)
    assert bv["requests_per_month"] is None and bv["capacity_multiplier"] == pytest.approx(1963.7 / 1051.2)
    assert bv["reason"].endswith("self-hosting does not break even at the capacity priced, but the run's goodput is "
                                 "only its offered load, a lower bound on the capacity: were the capacity more than "
                                 "1.87× the one priced, it would break even at some volume, which the run does not "
                                 "rule out")
    assert no_volume_lines(bv, "X")[0].startswith("answer: the API (X) at any volume at the capacity priced, but it "
                                                  "MAY FLIP at a higher capacity — a replica at 80% utilization")
    measured = break_even_volume(replace(CAP, lower_bound=False), _setup(), 5e-5)  # a capacity, not a lower bound
    assert "capacity_multiplier" not in measured and measured["reason"].endswith("self-hosting never breaks even")
    free = break_even_volume(CAP, _setup(), 0.0)  # an API that charges nothing: no capacity breaks even
    assert "capacity_multiplier" not in free and free["reason"].endswith("self-hosting never breaks even")
    assert no_volume_lines(free, "X")[0].startswith("answer: the API (X) at any volume — ")


def test_break_even_utilization_at_a_lower_bound_is_an_upper_bound_with_its_multiplier():
    # one replica, no people: u* = $1,963.70 ÷ (10 × 3600 × 730 × $0.00005) = 1,963.70 ÷ 1,314 = 149.4%; the assumed
    # 80% reaches it at 1.494 ÷ 0.8 = 1.868× the capacity (the break-even volume's multiplier: no people, u = u_max)
    from kvledger.ledgers.breakeven import break_even_utilization
    from kvledger.ledgers.cost_summary import DecisionFactors
    from kvledger.ledgers.factor_rows import factor_rows

    bu = break_even_utilization(CAP, _setup(), 5e-5, 1, 0.8)
    assert bu["required_utilization"] == pytest.approx(1963.7 / 1314) and bu["capacity_lower_bound"] is True
    assert bu["capacity_multiplier"] == pytest.approx(1963.7 / 1314 / 0.8) == pytest.approx(1963.7 / 1051.2)
    row = factor_rows(replace(_setup(), utilization=0.8), DecisionFactors(), bu, False)[0]
    assert row["value"] == "80% of billed hours; one replica's break-even at 149% (at most: the capacity priced is a " \
                           "lower bound)"
    assert row["effect"] == ("below break-even: the API costs less for the same requests at the capacity priced; were "
                             "the capacity 1.87× the one priced (the run's goodput is only its offered load, which "
                             "does not rule that out), 80% would reach break-even")
    at_volume = break_even_utilization(CAP, _setup(), 5e-5, 3)  # a volume's replicas: no assumed utilization to move
    assert at_volume["capacity_lower_bound"] is True and "capacity_multiplier" not in at_volume
    assert "capacity_lower_bound" not in break_even_utilization(replace(CAP, lower_bound=False), _setup(), 5e-5, 1, 0.8)


def test_a_simulated_run_at_its_offered_load_is_told_to_drop_at_offered_load():
    line = lower_bound_line(10.0, None, simulated=True, breaks_even=False)
    assert line.endswith("so the self-hosted costs per token are upper bounds (drop --at-offered-load to price at the "
                         "SLO capacity the simulation finds)")
