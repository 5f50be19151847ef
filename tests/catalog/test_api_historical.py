"""A historical API list price (its catalog notes open with "historical": no longer offered) is never the default
comparison: DeepSeek's original V3 list ($0.27 in / $1.10 out per Mtok, 2025-02) was the cheapest "same model" row
`cost --simulate deepseek-ai/DeepSeek-V3` picked, though DeepSeek's deepseek-chat has served V3.2 at other prices since
2025-09-29 (the catalog's own V3.2 row)."""

from __future__ import annotations

from kvledger.analyses.serving.decision_inputs import api_rows_for
from kvledger.catalog.api_match import find_api_price, same_model_rows
from kvledger.ledgers.api_cost import api_row_notes

V3_ORIGINAL = "DeepSeek:deepseek-chat (DeepSeek-V3, original list)"
R1_ORIGINAL = "DeepSeek:deepseek-reasoner (DeepSeek-R1, original list)"


def test_historical_rows_are_left_out_of_the_default_comparison():
    v3 = [r.key for r in same_model_rows("deepseek-ai/DeepSeek-V3")]
    # the current rows serving V3: DeepInfra $0.38/$0.89, Fireworks $0.90/$0.90, Together $1.25/$1.25 (api_prices.csv)
    assert V3_ORIGINAL not in v3 and "DeepInfra:deepseek-ai/DeepSeek-V3" in v3
    assert V3_ORIGINAL in [r.key for r in same_model_rows("deepseek-ai/DeepSeek-V3", with_historical=True)]
    assert R1_ORIGINAL not in [r.key for r in same_model_rows("deepseek-ai/DeepSeek-R1")]
    assert find_api_price(V3_ORIGINAL).historical and not find_api_price("DeepInfra:deepseek-ai/DeepSeek-V3").historical


def test_a_named_historical_row_is_still_the_same_model_and_says_it_is_historical():
    row = find_api_price(V3_ORIGINAL)
    rows = api_rows_for("deepseek-ai/DeepSeek-V3", row)
    assert rows[0] == (row, True, True)  # same model, named: no "not the same model" note
    assert V3_ORIGINAL not in [r.key for r, _, named in rows if not named]
    assert api_row_notes(row) == [f"  note: {V3_ORIGINAL} is a historical list price (as of 2025-02; the catalog's "
                                  "notes: no longer offered), left out of the default comparison: today's bill for "
                                  "this model is a current row's"]
    assert api_row_notes(find_api_price("DeepInfra:deepseek-ai/DeepSeek-V3")) == []
