"""On an exact price tie between API rows, the higher-confidence row is compared with (then the row's key), in cost's
decision, its no-volume answer and search's API side (a fresh-user trial: gpt-oss-120b compared with Fireworks's
medium-confidence row while Groq's high-confidence row cost the same $711.10)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix, tie_order
from kvledger.ledgers.decision import api_options
from kvledger.ledgers.volume import Volume

ROWS = ("Fireworks:gpt-oss-120b", "Together:openai/gpt-oss-120b", "Groq:openai/gpt-oss-120b")


def test_tie_order_ranks_confidence_then_key():
    fw, tg, gq = (find_api_price(k) for k in ROWS)
    assert [r.confidence for r in (fw, tg, gq)] == ["medium", "medium", "high"]
    assert tie_order(gq) == (0, "Groq:openai/gpt-oss-120b") and tie_order(fw) == (1, "Fireworks:gpt-oss-120b")
    assert sorted(tie_order(r) for r in (fw, tg, gq)) == [tie_order(gq), tie_order(fw), tie_order(tg)]


def test_a_price_tie_is_won_by_the_high_confidence_row():
    # the trial's volume: 2,419,786,360 input + 580,213,640 output tokens; all three rows list $0.15/$0.60 per M, so
    # each bills 2,419.78636 × 0.15 + 580.21364 × 0.60 = 362.967954 + 348.128184 = $711.096138 ($711.10): Groq
    # (high) first, then the two medium rows by key (Fireworks before Together), where the key alone put Fireworks first
    vol = Volume(2_190_283.0, 2_419_786_360.0, 580_213_640.0, "given")
    opts, _ = api_options([(find_api_price(k), True, False) for k in ROWS], ApiMix(), vol)
    assert [o.price.key for o in opts] == ["Groq:openai/gpt-oss-120b", "Fireworks:gpt-oss-120b",
                                           "Together:openai/gpt-oss-120b"]
    assert [o.bill.total_usd for o in opts] == pytest.approx([711.096138] * 3, rel=1e-12)
    # a cheaper row still wins whatever its confidence: $0.14 input on Fireworks's medium row → $686.90
    fw = find_api_price(ROWS[0])
    cheap = replace(fw, input_usd_per_mtok=0.14)
    opts, _ = api_options([(cheap, True, False), (find_api_price(ROWS[2]), True, False)], ApiMix(), vol)
    assert opts[0].price is cheap and opts[0].bill.total_usd == pytest.approx(2_419.78636 * 0.14 + 580.21364 * 0.6)
