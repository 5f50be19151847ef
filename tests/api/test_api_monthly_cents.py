"""A monthly bill is written to the cent everywhere it appears in JSON (strict_json, docs/reference.md "a monthly total
to the cent"): also the ``total_usd`` and ``amount_usd`` of a ledger in "USD per month" (``monthly.api``,
``decision.self_host_rent``, search's API ledger), not only keys that name the month; unit prices keep 15 digits."""

from __future__ import annotations

import kvledger
from kvledger import strict_json

LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def test_a_monthly_ledger_is_written_to_the_cent_and_its_unit_prices_are_not():
    month = {"name": "API bill per month", "per": "USD per month", "total_usd": 9795.18279734461,
             "items": [{"unit_price_usd": 0.0246, "amount_usd": 4734.9390675518},
                       {"unit_price_usd": 8.0, "amount_usd": 5060.24372979281}]}
    per_mtok = {"name": "API cost per 1M input tokens", "per": "USD per 1M input tokens", "total_usd": 0.0246000000001,
                "items": [{"unit_price_usd": 0.0246, "amount_usd": 0.0246000000001}]}
    out = strict_json.to_strict({"monthly": {"api": month}, "ledgers": {"api_input": per_mtok}})
    assert out["monthly"]["api"]["total_usd"] == 9795.18
    assert [(i["unit_price_usd"], i["amount_usd"]) for i in out["monthly"]["api"]["items"]] == [(0.0246, 4734.94),
                                                                                               (8.0, 5060.24)]
    # a per-token ledger: 15 significant digits, 0.0246000000001 as written
    assert out["ledgers"]["api_input"]["total_usd"] == 0.0246000000001


def test_the_cost_commands_monthly_api_bill_equals_the_decisions():
    # 3B tokens split as the run's completed requests (mean 550 in / 147 out): 2,367,469,533.78 in × $2/Mtok =
    # $4,734.94 + 632,530,466.22 out × $8/Mtok = $5,060.24 → $9,795.18 (gpt-4.1's list prices), as the text prints
    d = kvledger.cost(LLMPERF, slo="ttft=500ms,tpot=50ms", api="OpenAI:gpt-4.1", gpu="H100", num_gpus=4,
                      monthly_tokens="3B").to_dict()
    api = d["monthly"]["api"]
    assert api["total_usd"] == d["decision"]["api_usd_per_month"] == 9795.18
    assert [i["amount_usd"] for i in api["items"]] == [4734.94, 5060.24]
    assert [i["unit_price_usd"] for i in api["items"]] == [2.0, 8.0]
