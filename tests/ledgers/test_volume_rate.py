"""A monthly volume typed per day or per hour (``ledgers.volume_rate``): converted with the cost ledger's own month
(730 h = 730 ÷ 24 = 30.4167 days), restated as typed, and refused with the reason when it cannot be read."""

from __future__ import annotations

import pickle

import pytest

from kvledger.errors import InputError
from kvledger.ledgers.cost import HOURS_PER_MONTH
from kvledger.ledgers.decision_notes import tokens_text
from kvledger.ledgers.volume_rate import DAYS_PER_MONTH, RateVolume, rate_words, volume_option

TOKENS = volume_option("--monthly-tokens", positive=True)
SPLIT = volume_option("--monthly-input-tokens")


def test_a_day_is_the_ledgers_month_over_24_hours():
    # 730 h ÷ 24 h = 30.41666… days: the one month constant, not a second one
    assert HOURS_PER_MONTH == 730.0
    assert DAYS_PER_MONTH == pytest.approx(30.416666666666668)


@pytest.mark.parametrize(("text", "monthly"), [
    ("100M/day", 100e6 * 730 / 24),   # 1e8 × 30.41667 = 3,041,666,666.7 tokens a month
    ("100m / Day", 100e6 * 730 / 24),  # unit and suffix in any case, spaces around the slash
    ("2B/h", 2e9 * 730),               # 2e9 × 730 h = 1.46e12
    ("4K/hour", 4000 * 730),           # 4,000 × 730 = 2,920,000
    ("1e6/hr", 1e6 * 730),             # 730,000,000
    ("3B/month", 3e9),                 # per month: as the bare count
    ("3B", 3e9),
])
def test_a_rate_is_its_monthly_volume(text, monthly):
    assert TOKENS(text) == pytest.approx(monthly, rel=1e-12)


def test_a_rate_keeps_what_was_typed_and_a_month_stays_a_plain_number():
    v = TOKENS("100M/day")
    assert isinstance(v, RateVolume) and (v.per, v.rate, v.given) == ("day", 1e8, "100M/day")
    assert type(TOKENS("3B/month")) is float and type(TOKENS("3B")) is float
    assert pickle.loads(pickle.dumps(v)).given == "100M/day"  # the simulator's workers get it whole


def test_the_conversion_is_restated_as_the_month_priced():
    # 1e8 × 30.4167 = 3.0417e9 → "3.04B"; 2e9 × 730 = 1.46e12 → "1.46T"
    assert rate_words(TOKENS("100M/day"), "tokens", tokens_text) == (
        "100M tokens/day × 30.42 days = 3.04B tokens/month")
    assert rate_words(TOKENS("2B/h"), "tokens", tokens_text) == "2B tokens/hour × 730 h = 1.46T tokens/month"
    assert rate_words(TOKENS("3B"), "tokens", tokens_text) == ""


@pytest.mark.parametrize(("parse", "text", "words"), [
    (TOKENS, "100M/week", "'100M/week': cannot read the rate unit 'week'; write the volume per /month, /day, /hour, "
                          "/min or /s"),
    (TOKENS, "1B/year", "cannot read the rate unit 'year'"),
    (TOKENS, "-5/day", "'-5' is negative; a volume must be more than 0"),
    (TOKENS, "0/day", "'0' is zero; a volume must be more than 0"),
    (TOKENS, "abc/day", "cannot read 'abc' as a count"),
    (TOKENS, "/day", "cannot read '' as a count"),
    (SPLIT, "-5/day", "'-5' is negative; a count is 0 or more"),
])
def test_an_unreadable_rate_is_refused_naming_the_flag_and_what_was_typed(parse, text, words):
    with pytest.raises(InputError) as err:
        parse(text)
    assert str(err.value).startswith("--monthly-") and words in str(err.value)
    assert repr(text) in str(err.value)  # the whole text as typed, not only the count before the slash


REQUESTS = volume_option("--monthly-requests", positive=True)


def test_a_load_in_requests_per_second_is_the_month_search_sizes():
    # 20 req/s, the load `search --rate 20` sizes for: 20 × 3600 s × 730 h = 52,560,000 requests a month, the figure
    # `cost --monthly-requests 72K/hour` gives (72,000 × 730); per minute: 1,200/min × 60 × 730 = 52,560,000 too
    assert REQUESTS("20/s") == REQUESTS("20/second") == REQUESTS("20 / sec") == 52_560_000.0
    assert REQUESTS("72K/hour") == REQUESTS("1.2K/min") == REQUESTS("1200/minute") == 52_560_000.0
    v = REQUESTS("20/s")
    assert (v.per, v.rate, v.given) == ("second", 20.0, "20/s")
    assert rate_words(v, "requests", tokens_text) == "20 requests/second × 2,628,000 s = 52.6M requests/month"
    assert rate_words(REQUESTS("1.2K/min"), "requests", tokens_text) == (
        "1,200 requests/minute × 43,800 min = 52.6M requests/month")  # tokens_text writes 1,200 whole
