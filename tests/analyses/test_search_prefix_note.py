"""search's API side says when the searched workload's shared prefix, which every candidate's prefix cache reuses, is
priced uncached on an API that discounts cached input (as cost --simulate's mix note does for the run it prices)."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.analyses.search.api_side import _prefix_note
from kvledger.catalog.api_match import find_api_price
from kvledger.ledgers.api_cost import ApiMix

GPT41 = find_api_price("OpenAI:gpt-4.1")  # $2 per Mtok input, $0.5 cached (api_prices.csv)


def test_a_shared_prefix_priced_uncached_names_its_share_and_the_flag():
    # 20,000 shared tokens of an 80,000-token mean prompt: 20,000 ÷ 80,000 = 25.0 % of the input, --cache-hit-rate 0.25.
    spec = SimpleNamespace(shared_prefix_tokens=20_000)
    (note,) = _prefix_note(spec, ApiMix(0.0, 0.0, 0.0), GPT41, 80_000.0)
    assert (GPT41.input_usd_per_mtok, GPT41.cached_input_usd_per_mtok) == (2.0, 0.5)
    assert "up to 25.0% of the mean prompt (20,000 ÷ 80,000 tokens" in note and "--cache-hit-rate 0.25 " in note
    # A prefix longer than the mean prompt is capped at the whole input: min(1, 100,000 ÷ 80,000) = 100.0 %.
    assert "up to 100.0% of the mean prompt" in _prefix_note(SimpleNamespace(shared_prefix_tokens=100_000),
                                                             ApiMix(0.0, 0.0, 0.0), GPT41, 80_000.0)[0]


def test_no_note_when_the_mix_prices_caching_the_row_has_no_discount_or_no_prefix():
    spec = SimpleNamespace(shared_prefix_tokens=20_000)
    assert _prefix_note(spec, ApiMix(0.0, 0.25, 0.0), GPT41, 80_000.0) == []  # --cache-hit-rate given
    together = find_api_price("Together:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo")  # no cached price listed
    assert together.cached_input_usd_per_mtok is None and _prefix_note(spec, ApiMix(0, 0, 0), together, 8e4) == []
    groq = find_api_price("Groq:llama-3.3-70b-versatile")  # cached input listed at the input price, $0.59 both
    assert groq.cached_input_usd_per_mtok == groq.input_usd_per_mtok == 0.59
    assert _prefix_note(spec, ApiMix(0, 0, 0), groq, 8e4) == []
    assert _prefix_note(SimpleNamespace(shared_prefix_tokens=None), ApiMix(0, 0, 0), GPT41, 8e4) == []
