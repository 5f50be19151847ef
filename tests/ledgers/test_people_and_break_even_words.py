"""The people line says where its figures came from, and the never-break-even sentence states both monthly parts."""

from __future__ import annotations

from kvledger.ledgers.breakeven import break_even_volume
from kvledger.ledgers.cost import Capacity, GpuRate, SelfHostSetup, self_host_unit_ledgers
from kvledger.ledgers.host_bill import people_cost

CAP = Capacity(1000 / (3600 * 730), 1.0, 1.0, 0, 0, 0.5, "given", False)  # 1,000 good requests per 730 h month


def _people_items(months, usd):
    p = people_cost("some", months, usd)
    setup = SelfHostSetup(GpuRate.given(1.0), 1, 1.0, p.engineer_months_per_month, p.engineer_usd_per_month,
                          people_source=p.source)
    led_in, led_out = self_host_unit_ledgers(CAP, setup)
    return led_in.items[1], led_out.items[1]


def test_default_people_line_is_labelled_a_default_not_user_input():
    # no flag given: 0.25 engineer-months at $20,000 from the team capability 'some' default
    for item in _people_items(None, None):
        assert item.unit_price_usd == 20_000 and item.source.startswith("team capability 'some': kvledger default")
        assert item.as_of == "assumption" and "user input" not in item.source
    # 0.25 × 10⁶ ÷ (1 tok/s × 3600 × 730 tok/month) × share 0.5 = 0.04756 engineer-months per 1M tokens
    assert _people_items(None, None)[0].quantity == 0.25 * 1e6 / (3600 * 730) * 0.5


def test_people_line_names_the_flag_actually_given():
    item, _ = _people_items(None, 30_000.0)
    assert item.source.startswith("user input (--engineer-usd-per-month); the other from the kvledger default")
    assert item.unit_price_usd == 30_000 and item.as_of == "user input and assumption"
    item, _ = _people_items(0.1, 30_000.0)
    assert item.source == "user input (--engineer-months-per-month, --engineer-usd-per-month)"
    assert item.as_of == "user input"


def test_never_breaks_even_states_rental_and_people():
    # R = $1,000/month (1000/730 $/h × 730 h), people 0.25 × $20,000 = $5,000, R + P = $6,000;
    # at 50 % one replica serves 500 requests worth 500 × $1.5 = $750 on the API < R: never breaks even
    setup = SelfHostSetup(GpuRate.given(1000 / 730), 1, 1.0, 0.25, 20_000, max_utilization=0.5)
    reason = break_even_volume(CAP, setup, 1.5)["reason"]
    assert reason == ("a replica at 50% utilization costs $1,000/month in GPU rental alone (plus $5,000/month of "
                      "people, $6,000 in all; the people line only widens the gap), but its 500 requests cost $750 "
                      "on the API: self-hosting never breaks even")
    # without people the sentence names the rental alone
    bare = break_even_volume(CAP, SelfHostSetup(GpuRate.given(1000 / 730), 1, 1.0, max_utilization=0.5), 1.5)
    assert bare["reason"].startswith("a replica at 50% utilization costs $1,000/month in GPU rental alone, but its")


def test_never_breaks_even_at_a_peak_says_where_its_utilization_comes_from():
    # --max-utilization 80 % sized for --peak-to-mean 3: a replica averages at most 0.8 ÷ 3 = 26.67 %, so it serves
    # 1,000 × 0.2667 = 267 requests a month, worth 267 × $1.5 = $400 on the API < R = $1,000: never breaks even.
    # The sentence gives 26.7 % (not a bare rounded "27%") and the 80 % ÷ 3 it comes from.
    setup = SelfHostSetup(GpuRate.given(1000 / 730), 1, 1.0, max_utilization=0.8 / 3)
    out = break_even_volume(CAP, setup, 1.5, peak_to_mean=3.0)
    assert out["reason"] == ("a replica at 26.7% utilization (--max-utilization 80% ÷ --peak-to-mean 3: sized for the "
                             "peak) costs $1,000/month in GPU rental alone, but its 267 requests cost $400 on the API: "
                             "self-hosting never breaks even")
