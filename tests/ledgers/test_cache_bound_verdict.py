"""A self-host verdict against an "at most" API bill (a row with no cached-input price, its cache reads billed as
ordinary input): the bill's lower end (cache reads free) is priced too; the verdict stands where self-hosting beats it,
else it is conditional on the API's cached-input price, solved from the bill's linear form. The same in search's
comparison and its sentences. Bills worked by hand in the comments."""

from __future__ import annotations

import pytest

from kvledger.analyses.search.bands import api_within_band, cheaper_side
from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix, api_ledger, cache_read_bounds, discounts_words, mix_words
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup
from kvledger.ledgers.decision import MonthlyVolume, api_options, decide, resolve_volume
from kvledger.ledgers.decision_notes import rests_on_line, verdict_lines
from kvledger.report.search_answer import api_line, api_verdict

# as tests/ledgers/test_decision.py: one replica serves 10 good req/s of 1,000 input and 250 output tokens
CAP = Capacity(10.0, 10_000.0, 2_500.0, 10_000.0, 2_500.0, 0.4, "given", False)
RUNPOD = GpuRate.given(2.69, "H100")
TOGETHER_8B = find_api_price("Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo")  # $0.18 in and out, no cached


def _decide(hit: float):
    # 10⁸ requests/month = 38.05 req/s: ⌈38.05 / (10 × 0.8)⌉ = 5 replicas × 730 h × $2.69 = $9,818.50 self-hosted;
    # 10¹¹ input tokens (100,000 Mtok) and 25,000 Mtok output
    vol = resolve_volume(MonthlyVolume(requests=1e8), CAP)
    opts, _ = api_options([(TOGETHER_8B, True, True)], ApiMix(cache_hit_rate=hit), vol)
    return decide(CAP, SelfHostSetup(RUNPOD, 1, None, max_utilization=0.8), vol, opts)


def test_the_bounds_of_an_at_most_bill_by_hand():
    # 1 Mtok in, 1 out, 30% cache reads: upper 0.18 + 0.18 = $0.36; lower 0.7 × 0.18 + 0.18 = $0.306; slope 0.3 Mtok
    b = cache_read_bounds(TOGETHER_8B, ApiMix(cache_hit_rate=0.3), 1.0, 1.0)
    assert (b.upper_usd, b.lower_usd, b.reads_mtok) == (pytest.approx(0.36), pytest.approx(0.306), pytest.approx(0.3))
    # the API is under $0.33 below a cached-input price of (0.33 − 0.306) / 0.3 = $0.08/Mtok; none under $0.306
    assert b.cached_price_below(0.33) == pytest.approx(0.08) and b.cached_price_below(0.30) is None
    assert cache_read_bounds(TOGETHER_8B, ApiMix(), 1.0, 1.0) is None  # no cache reads: an exact bill


def test_a_self_host_verdict_between_the_bounds_is_conditional():
    d = _decide(0.9)
    # upper: every input token at $0.18: 125,000 Mtok × 0.18 = $22,500; lower: 0.18 × (10,000 + 25,000) = $6,300;
    # self-host $9,818.50 lies between: cheaper unless the cached-input price is below
    # (9,818.50 − 6,300) / (0.9 × 100,000) = $0.039094/Mtok
    assert d.verdict == "self-host" and d.primary.bill.total_usd == pytest.approx(22_500)
    assert d.api_lower_usd == pytest.approx(6_300)
    assert d.cached_price_break_even == pytest.approx((9_818.5 - 6_300) / 90_000)
    assert not d.holds_within_band() and d.holds_across_capacity()
    assert "below $0.03909/Mtok" in d.rests_on[0]
    j = d.to_dict()
    assert j["holds_within_band"] is False and j["api_usd_per_month_lower_bound"] == pytest.approx(6_300)
    assert j["self_host_cheaper_unless_cached_input_usd_per_mtok_below"] == pytest.approx(0.0390944, rel=1e-5)
    head = verdict_lines(d, {"reason": "none"}, "H100", 1)[0]
    assert head.startswith("answer: self-host, unless the API's cached-input price is below $0.03909/Mtok — at most "
                           "$22,500.00/month ($6,300.00 with cache reads free) on the API vs $9,818.50/month")
    assert rests_on_line(d).startswith("robustness: CONDITIONAL on the API's cached-input price")


def test_a_self_host_verdict_below_both_bounds_stands_and_flips_against_the_lower():
    d = _decide(0.3)
    # lower: 0.18 × (70,000 + 25,000) = $17,100 > $9,818.50: the verdict stands. Flips against $17,100: GPU price
    # 17,100 / 9,818.50 = 1.7416×; replicas reach ⌈17,100 / 1,963.70⌉ = 9 at capacity 38.05 ÷ (8 × 8)
    assert d.verdict == "self-host" and d.api_lower_usd == pytest.approx(17_100)
    assert d.cached_price_break_even is None and d.holds_within_band()
    assert d.flips["gpu_price_multiplier"] == pytest.approx(17_100 / 9_818.5)
    assert d.flips["capacity_multiplier"] == pytest.approx(1e8 / (730 * 3600) / (8 * 8))
    assert "(at least $17,100.00 even with cache reads free: the verdict stands)" in verdict_lines(
        d, {"reason": "none"}, "H100", 1)[0]


def test_mix_words_takes_its_flags_not_a_replace():
    assert mix_words(False, False, False, None) == "at list price (no batch share or prompt-cache rate given)"
    assert mix_words(False, False, False, None, no_cached_price=True) == (
        "at list price; no cached-input price listed, so cache reads are priced as ordinary input (an upper bound)")
    led = api_ledger(TOGETHER_8B, ApiMix(cache_hit_rate=0.3), 1.0, 1.0, "x", "y")
    assert discounts_words(led, TOGETHER_8B) == mix_words(False, False, False, TOGETHER_8B, no_cached_price=True)


def test_search_says_conditional_between_the_bounds():
    # API at most $22,500 ($6,300 with cache reads free, 90,000 Mtok of cache reads): a $9,818.50 winner is
    # conditional, a $5,000 one certain, a $30,000 one loses
    b = cache_read_bounds(TOGETHER_8B, ApiMix(cache_hit_rate=0.9), 100_000.0, 25_000.0)
    assert [cheaper_side(22_500, b, usd) for usd in (9_818.5, 5_000, 30_000)] == ["conditional", "self-host", "API"]
    winner = {"sizing": {"rental_usd_per_month": 9_818.5, "at_band_low": {"rental_usd_per_month": 12_000.0},
                         "at_band_high": {"rental_usd_per_month": 4_000.0}}}
    wb = api_within_band(winner, 22_500, None, b)
    assert (wb["point"], wb["band_low"], wb["band_high"], wb["flips_inside_band"]) == (
        "conditional", "conditional", "self-host", True)
    api = {"key": TOGETHER_8B.key, "as_of": "x", "usd_per_mtok_input": 0.18, "usd_per_mtok_output": 0.18,
           "mix": {"batch_share": 0.0, "cache_hit_rate": 0.9}, "usd_per_month": 22_500.0, "monthly_input_tokens": 1e11,
           "monthly_output_tokens": 2.5e10, "usd_per_month_is_upper_bound": True, "usd_per_month_lower_bound": 6_300.0,
           "cheaper_with_people": "conditional", "cheaper_gpu_rental_alone": "conditional",
           "winner_self_host_usd_per_month": 9_818.5,
           "people": {"usd_per_month": 0.0, "engineer_months_per_month": 0, "engineer_usd_per_month": 0,
                      "team_capability": "x"},
           "unless_cached_input_usd_per_mtok_below": {"with_people": b.cached_price_below(9_818.5),
                                                      "gpu_rental_alone": b.cached_price_below(9_818.5)}}
    api["within_band"] = wb  # rental alone: conditional at the point and the low end, certain at the high end
    assert "; inside the capacity band it rests on the API's cached-input price (winner $4,000–$12,000/month)" in (
        api_verdict(api, winner["sizing"]))
    assert "costs at most $22,500.00 per month ($6,300.00 with cache reads free)" in api_line(api)
    assert "self-hosting is cheaper unless the API's cached-input price (none listed) is below $0.03909/Mtok" in (
        api_verdict(api, winner["sizing"]))
