"""How the API side of the cost ledger says it was priced: a cache write is no discount. Anthropic bills a written
token at 1.25× input, so a bill with cache writes and nothing else costs more than list price and must not read
"after the cache discount"; a provider that bills writes as ordinary input (OpenAI's GPT-4.1 row) leaves the bill at
list price. The HTML report says the same from the cost payload's inputs, not "after batch and prompt-cache
discounts" whatever the mix. Utilizations under 10 % keep a decimal in the deciding-factors row (0.48 % is not "0%")."""

from __future__ import annotations

import pytest

from kvledger.catalog.prices import api_prices
from kvledger.ledgers.api_cost import ApiMix, api_ledger, discounts_words
from kvledger.ledgers.factor_rows import share_text
from kvledger.report.html_report import api_pricing_words


def _row(key: str):
    return next(p for p in api_prices() if p.key == key)


def test_cache_writes_alone_are_a_premium_not_a_discount():
    haiku = _row("Anthropic:claude-haiku-4.5")  # $1 input, $1.25 cache write, $5 output per Mtok (api_prices.csv)
    bill = api_ledger(haiku, ApiMix(cache_write_rate=0.3), 1000.0, 0.0, "API", "USD per month")
    # 700 Mtok × $1 + 300 Mtok × $1.25 = $1,075 > the $1,000 list price of 1,000 Mtok
    assert bill.total_usd == pytest.approx(1075.0)
    assert discounts_words(bill, haiku) == ("at list price, plus the cache-write premium ($1.25 per Mtok written vs $1 "
                                            "input)")  # was "after the cache discount"


def test_cache_writes_at_input_price_and_all_discounts_together():
    gpt = _row("OpenAI:gpt-4.1")  # $2 input, no cache-write price (writes billed as input), batch 50 % off
    bill = api_ledger(gpt, ApiMix(cache_write_rate=0.3), 1000.0, 0.0, "API", "USD per month")
    assert bill.total_usd == pytest.approx(2000.0)  # 1,000 Mtok × $2: list price, no discount
    assert discounts_words(bill, gpt) == "at list price; cache writes billed as ordinary input"
    haiku = _row("Anthropic:claude-haiku-4.5")
    mix = ApiMix(batch_share=0.5, cache_hit_rate=0.3, cache_write_rate=0.1)
    bill = api_ledger(haiku, mix, 1000.0, 0.0, "API", "USD per month")
    # (600 × $1 + 300 × $0.10 + 100 × $1.25) × (1 − 0.5 × 0.5) = 755 × 0.75 = $566.25
    assert bill.total_usd == pytest.approx(566.25)
    assert discounts_words(bill, haiku) == ("after the batch and cache discounts, plus the cache-write premium ($1.25 "
                                            "per Mtok written vs $1 input)")
    plain = api_ledger(haiku, ApiMix(), 1000.0, 0.0, "API", "USD per month")
    assert discounts_words(plain, haiku) == "at list price (no batch share or prompt-cache rate given)"


def test_a_cached_input_price_equal_to_input_is_no_cache_discount():
    groq = _row("Groq:qwen/qwen3-32b")  # $0.29 input, $0.29 cached input (no prompt-cache discount), batch 50 % off
    bill = api_ledger(groq, ApiMix(batch_share=0.5, cache_hit_rate=0.3), 1000.0, 0.0, "API", "USD per month")
    # 1,000 Mtok × $0.29 × (1 − 0.5 × 0.5) = $217.50: the 30 % cache reads cost what input does, only the batch saves
    assert bill.total_usd == pytest.approx(217.5)
    assert discounts_words(bill, groq) == ("after the batch discount; its cached-input price is its input price "
                                           "($0.29 per Mtok), so cache reads save nothing")  # was "batch and cache"
    alone = api_ledger(groq, ApiMix(cache_hit_rate=0.3), 1000.0, 0.0, "API", "USD per month")
    assert alone.total_usd == pytest.approx(290.0)  # 1,000 Mtok × $0.29: list price
    assert discounts_words(alone, groq) == ("at list price; its cached-input price is its input price ($0.29 per "
                                            "Mtok), so cache reads save nothing")


def test_report_words_follow_the_mix():
    none = {"batch_share": 0.0, "cache_hit_rate": 0.0, "cache_write_rate": 0.0}
    # was "after batch and prompt-cache discounts" with neither given
    assert api_pricing_words({"api_price": "OpenAI:gpt-4.1-mini", "api_mix": none}) == (
        "at list price (no batch share or prompt-cache rate given)")
    mix = {**none, "batch_share": 0.5, "cache_hit_rate": 0.3}
    assert api_pricing_words({"api_price": "OpenAI:gpt-4.1-mini", "api_mix": mix}) == (
        "after the batch and cache discounts")


def test_small_utilization_keeps_a_decimal():
    # 0.08334 req/s ÷ 17.5 req/s = 0.48 %: the answer's sizing line says 0.5 %, the factor row said "0%"
    assert share_text(0.08334 / 17.5) == "0.5%"
    assert share_text(0.048) == "4.8%"
    assert share_text(0.26) == "26%"
    assert share_text(5.177) == "518%"


def test_the_fp8_row_note_knows_when_self_hosting_is_fp8_too():
    from kvledger.catalog.api_match import find_api_price
    from kvledger.ledgers.api_cost import quantized_row_note

    row = find_api_price("DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo")
    assert quantized_row_note(row).endswith("or price self-hosting at FP8 too")
    fp8 = quantized_row_note(row, "fp8")
    assert "price self-hosting at FP8 too" not in fp8 and "priced at FP8 weights too (--quantization fp8)" in fp8
