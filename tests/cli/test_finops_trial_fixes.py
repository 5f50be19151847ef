"""A FinOps analyst's trial of ``cost``/``prices``: refusals that name their cause and the flag behind it, the user's
GPU price labelled with its GPU (and provider), and hints only to flags that help."""

from __future__ import annotations

import pytest
from tests.cli.cli_run import MODEL, refused, run_cli

from kvledger.catalog.api_match import same_model_rows
from kvledger.errors import InputError, UnknownNameError
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.decision import api_options

COST = ["cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--num-requests", "500"]


def test_a_mix_that_leaves_out_every_row_names_each_row_its_reason_and_flag():
    rows = [(r, True, False) for r in same_model_rows(MODEL)]
    mix = ApiMix(batch_share=0.3, cache_hit_rate=0.8)
    with pytest.raises(InputError) as err:
        api_options(rows, mix, None)  # every row refused before the volume is read
    msg = str(err.value)
    # api_prices.csv: DeepInfra's 8B row has a blank batch_discount and, like Together's, Fireworks' and Groq's, a
    # blank cached-input price: the cache-hit rate leaves out all four, the batch share DeepInfra's too
    assert ("DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo (no batch API: --batch-share 0.3, no cached-input "
            "price listed: --cache-hit-rate 0.8)") in msg
    assert "Groq:llama-3.1-8b-instant (no cached-input price listed: --cache-hit-rate 0.8)" in msg
    # the three rows left out by the cache-hit rate alone come back without it; DeepInfra needs both flags dropped
    assert ("drop --cache-hit-rate (set it to 0) to compare with Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo, "
            "Fireworks:llama-v3p1-8b-instruct, Groq:llama-3.1-8b-instant") in msg
    assert "or name a row of another model with --api PROVIDER:MODEL" in msg


def test_an_unknown_provider_is_refused_with_a_given_gpu_price():
    msg = refused(*COST, "--monthly-tokens", "5M", "--gpu-provider", "Nowhere", "--gpu-usd-per-hour", "1.9")
    assert msg.startswith("unknown GPU price provider 'Nowhere'.")
    assert "the price tables' providers: AWS, Azure, CoreWeave, GCP, Lambda, Nebius, RunPod" in msg


def test_a_given_price_names_its_gpu_and_provider_once():
    from kvledger.analyses.serving.cost_run import gpu_rate

    rate = gpu_rate("nvidia_h100_sxm", "nebius", None, 1.9)  # the provider spelled as the price table spells it
    assert (rate.usd_per_gpu_hour, rate.label) == (1.9, "nvidia_h100_sxm at Nebius")
    assert rate.source == "user input (--gpu-usd-per-hour, nvidia_h100_sxm at Nebius)"
    from kvledger.ledgers.items import dated

    assert dated(rate.source, rate.as_of) == rate.source  # no "(as of user input)" after it
    assert dated("gpu_prices.csv x", "2026-03") == "gpu_prices.csv x (as of 2026-03)"


def test_an_unknown_gpu_is_refused_as_a_gpu_not_as_a_price():
    msg = refused(*COST, "--monthly-tokens", "5M", "--gpu", "H999")
    assert msg == ("unknown GPU 'H999'. (kvledger gpus lists the catalog's GPUs, kvledger prices --kind gpu their "
                   "rental rows)")
    assert "--gpu-usd-per-hour" not in refused("prices", "--kind", "gpu", "--gpu", "H999")
    # a near miss gets the catalog's close names (catalog.gpus.get_gpu's suggestions)
    assert refused("prices", "--kind", "gpu", "--gpu", "H10").startswith(
        "unknown GPU 'H10'; did you mean: nvidia_h100_sxm, nvidia_h100_pcie, nvidia_h100_nvl")


def test_a_catalog_gpu_without_a_row_offers_a_price_only_where_the_command_takes_one():
    from kvledger.catalog.prices import find_gpu_prices

    with pytest.raises(UnknownNameError) as err:
        find_gpu_prices("nvidia_b300")
    assert str(err.value).endswith("kvledger prices --kind gpu lists them; or pass --gpu-usd-per-hour to give your "
                                   "own price)")
    with pytest.raises(UnknownNameError) as err:
        find_gpu_prices("nvidia_b300", own_price=False)
    assert "--gpu-usd-per-hour" not in str(err.value)


def test_prices_refuses_an_unknown_provider():
    msg = refused("prices", "--provider", "nope")
    assert msg.startswith("unknown price provider 'nope'") and "AWS, Anthropic, Azure, CoreWeave, DeepInfra" in msg
    # Nebius rents GPUs but sells no API tokens
    assert refused("prices", "--kind", "api", "--provider", "Nebius").startswith("unknown api price provider 'Nebius'")
    assert run_cli("prices", "--kind", "api", "--provider", "groq").exit_code == 0


def test_a_short_trace_names_the_request_default_and_the_most_it_holds(tmp_path):
    trace = tmp_path / "mytrace.csv"
    trace.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n"
                     + "".join(f"{i * 0.5},800,200\n" for i in range(300)))
    msg = refused(*COST[:-2], "--trace", str(trace), "--monthly-tokens", "2.4B")  # no --num-requests: 2,000 a probe
    assert msg == ("trace 'mytrace' has 300 requests at or after start_s=0 s; asked for 2,000 (--num-requests as "
                   "given, or the command's default when it is not): pass --num-requests 300 or fewer")


def test_json_api_options_come_cheapest_first_as_the_text_lists_them():
    from kvledger.ledgers.api_cost import per_request_rows

    rows = [(r, True, False) for r in same_model_rows(MODEL)]  # catalog order: Together, Fireworks, Groq, DeepInfra
    got = per_request_rows(rows, ApiMix(), (1000.0, 200.0, ""))
    # list prices (api_prices.csv), USD per Mtok in/out: DeepInfra 0.02/0.03, Groq 0.05/0.08, Together 0.18/0.18,
    # Fireworks 0.2/0.2; a request of 1,000 in + 200 out tokens: DeepInfra (1000·0.02 + 200·0.03)/1e6 = 2.6e-5,
    # Groq (50 + 16)/1e6 = 6.6e-5, Together 216/1e6 = 2.16e-4, Fireworks 240/1e6 = 2.4e-4
    assert [d["key"].split(":")[0] for d in got] == ["DeepInfra", "Groq", "Together", "Fireworks"]
    assert [d["usd_per_request"] for d in got] == pytest.approx([2.6e-5, 6.6e-5, 2.16e-4, 2.4e-4])
    # a row the mix cannot price comes last, unpriced: DeepInfra has no batch API
    assert per_request_rows(rows, ApiMix(batch_share=0.3), (1000.0, 200.0, ""))[-1]["usd_per_request"] is None
