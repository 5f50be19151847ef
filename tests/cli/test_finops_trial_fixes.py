"""A FinOps analyst's trial of ``cost``/``prices``: refusals that name their cause and the flag behind it, the user's
GPU price labelled with its GPU (and provider), and hints only to flags that help."""

from __future__ import annotations

import pytest
from cli_run import MODEL, refused, run_cli

from kvledger.catalog.api_match import same_model_rows
from kvledger.errors import InputError, UnknownNameError
from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.cost import Capacity
from kvledger.ledgers.decision import MonthlyVolume, api_options, resolve_volume

CAP = Capacity(10.0, 10_000.0, 2_500.0, 10_000.0, 2_500.0, 0.4, "given", False)  # as tests/ledgers/test_decision.py
COST = ["cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--num-requests", "500"]


def test_a_mix_no_row_can_fully_discount_prices_every_row_with_what_it_lacks():
    rows = [(r, True, False) for r in same_model_rows(MODEL)]
    mix = ApiMix(batch_share=0.3, cache_hit_rate=0.8)
    vol = resolve_volume(MonthlyVolume(input_tokens=240e6, output_tokens=60e6), CAP)
    opts, notes = api_options(rows, mix, vol)  # none left out
    assert len(opts) == len(rows) == 4
    # api_prices.csv: DeepInfra's 8B row ($0.02 in, $0.03 out) has no batch API and no cached-input price: every token
    # on demand at list price, 240 × 0.02 + 60 × 0.03 = $6.60 (an upper bound: its cache reads may cost less).
    # Groq ($0.05/$0.08, 50% batch discount, no prompt-cache discount for this model: cached input at the $0.05 input
    # price, an exact bill): (240 × 0.05 + 60 × 0.08) × (1 − 0.3 × 0.5) = 16.80 × 0.85 = $14.28
    assert opts[0].price.provider == "DeepInfra" and opts[0].bill.total_usd == pytest.approx(6.6)
    assert next(o for o in opts if o.price.provider == "Groq").bill.total_usd == pytest.approx(14.28)
    assert any("DeepInfra" in n and "no batch API" in n and "on-demand rate" in n for n in notes)
    assert not any("Groq:llama-3.1-8b-instant lists no cached-input price" in n for n in notes)
    assert not opts[[o.price.provider for o in opts].index("Groq")].bounds  # no "at most": the notes say no discount


def test_an_unknown_provider_is_refused_with_a_given_gpu_price():
    msg = refused(*COST, "--monthly-tokens", "5M", "--gpu-provider", "Nowhere", "--gpu-usd-per-hour", "1.9")
    assert msg.startswith("unknown GPU price provider 'Nowhere'.")
    assert "the price tables' providers: AWS, Azure, CoreWeave, GCP, Lambda, Nebius, RunPod" in msg
    # search and report share the check, before any simulation
    same = ["--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--gpu-provider", "Nowhere", "--gpu-usd-per-hour", "2"]
    assert refused("search", MODEL, *same, "--tp", "1", "--monthly-tokens", "5M") == msg
    assert refused("report", MODEL, *same) == msg


def test_a_given_price_names_its_gpu_and_provider_once():
    from kvledger.analyses.serving.cost_run import gpu_rate

    rate = gpu_rate("nvidia_h100_sxm", "nebius", None, 1.9)  # the provider spelled as the price table spells it
    # the price given, on the provider's instance shapes (its cheapest row first, the 8-GPU instances an option)
    assert (rate.usd_per_gpu_hour, rate.label) == (1.9, "nvidia_h100_sxm at Nebius (gpu-h100-sxm 1gpu-16vcpu-200gb, "
                                                        "your price)")
    assert rate.source == ("user input (--gpu-usd-per-hour, nvidia_h100_sxm at Nebius); billed in "
                           "Nebius:gpu-h100-sxm 1gpu-16vcpu-200gb's instances of 1 GPU (gpu_prices.csv)")
    assert [(o.gpus_per_instance, o.usd_per_gpu_hour) for o in rate.options] == [(8, 1.9)]
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
    assert str(err.value).endswith("kvledger prices --kind gpu lists them) (or pass --gpu-usd-per-hour to give "
                                   "your own price)")
    with pytest.raises(UnknownNameError) as err:
        find_gpu_prices("nvidia_b300", own_price=False)
    assert "--gpu-usd-per-hour" not in str(err.value)


def test_prices_refuses_an_unknown_provider():
    msg = refused("prices", "--provider", "nope")
    assert msg.startswith("unknown price provider 'nope'")
    assert "AWS, Anthropic, Azure, Bought, CoreWeave, DeepInfra" in msg
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
    # a 30% batch share: DeepInfra has no batch API, so it stays at its on-demand 2.6e-5; the others' 50% batch
    # discount takes 0.3 × 0.5 = 15% off: Groq 5.61e-5, Together 1.836e-4, Fireworks 2.04e-4
    batch = per_request_rows(rows, ApiMix(batch_share=0.3), (1000.0, 200.0, ""))
    assert [d["usd_per_request"] for d in batch] == pytest.approx([2.6e-5, 5.61e-5, 1.836e-4, 2.04e-4])


def test_the_top_of_the_token_range_is_taken_and_a_split_names_the_tokens_it_converted_at():
    from types import SimpleNamespace

    from kvledger.ledgers.decision import MonthlyVolume
    from kvledger.ledgers.volume import check_monthly_tokens, resolve_volume

    # 10¹⁵ ÷ (1386.7 + 260.4) requests × 1386.7 + × 260.4 sums to 1e15 + 0.1 in floats: inside "(0, 10¹⁵]" as given
    check_monthly_tokens(1e15, 1386.7, 260.4)
    cap = SimpleNamespace(workload_input_tokens_mean=900.0, workload_output_tokens_mean=256.2,
                          mix_output_tokens=1)
    with pytest.raises(InputError) as err:
        resolve_volume(MonthlyVolume(input_tokens=9.5e14, output_tokens=1), cap)
    # 9.5e14 ÷ 900 = 1,055,555,555,556 requests, past --monthly-requests' 10¹²: converted at 900 input tokens each
    assert str(err.value).startswith("--monthly-input-tokens/--monthly-output-tokens converts to 1,055,555,555,556 "
                                     "requests/month (the run's mean 900.0 input tokens a request), out of the range")


def test_search_prints_the_api_month_in_cents_and_its_prices_to_four_figures():
    from kvledger.report.search_answer import api_line

    # Groq's 8B row at a 30% batch share (50% off): input 0.05 × (0.7 + 0.3 × 0.5) = $0.0425 per Mtok, output
    # 0.08 × 0.85 = $0.068; 3.9M in + 1.1M out a month = 0.1656 + 0.0748 = $0.2404
    a = {"key": "Groq:llama-3.1-8b-instant", "as_of": "2025-08-12", "usd_per_mtok_input": 0.0425,
         "usd_per_mtok_output": 0.068, "mix": {"batch_share": 0.3, "cache_hit_rate": 0.0}, "usd_per_month": 0.2404,
         "monthly_input_tokens": 3.9e6, "monthly_output_tokens": 1.1e6}
    line = api_line(a)
    assert "$0.0425 per Mtok in, $0.068 per Mtok out" in line and "costs $0.24 per month" in line
    # the tokens as cost counts them (it printed "(4 M in + 1 M out tokens …)", and "0 M out" below a half million)
    assert "(3.9M in + 1.1M out tokens per month)" in line
    assert "(780,000 in + 220,000 out tokens" in api_line({**a, "monthly_input_tokens": 7.8e5,
                                                           "monthly_output_tokens": 2.2e5})


def test_small_amounts_and_shares_keep_two_significant_digits():
    from kvledger.ledgers.amounts import pct_text, usd_text
    from kvledger.ledgers.factor_rows import share_text

    # 5M tokens/month on one 21 req/s replica: 0.001585 req/s ÷ 21 = 7.55e-5 of its capacity = 0.0075%
    assert pct_text(0.001585 / 21) == "0.0075%" and share_text(0.001585 / 21) == "0.0075%"
    assert (pct_text(0.25), pct_text(0.0), pct_text(0.8 / 3, 0)) == ("25.0%", "0.0%", "27%")
    assert (usd_text(0.24), usd_text(0.0031), usd_text(6963.7), usd_text(123456.7)) == (
        "$0.24", "$0.0031", "$6,963.70", "$123,457")


def test_a_break_even_above_the_peak_cap_says_it_cannot_be_reached():
    from kvledger.ledgers.factor_rows import peak_cap_text

    # --peak-to-mean 3 at --max-utilization 0.8: replicas sized for the peak run at most 0.8 ÷ 3 = 26.7% on the mean
    u_star = {"required_utilization": 0.34, "peak_to_mean": 3.0, "mean_utilization_cap": 0.8 / 3}
    assert peak_cap_text(u_star) == (" — above the 26.7% mean utilization --peak-to-mean 3 allows (80% ÷ 3): not "
                                     "reachable at this peak")
    assert peak_cap_text({**u_star, "required_utilization": 0.25}) == ""  # within reach
    assert peak_cap_text({**u_star, "peak_to_mean": 1.0, "mean_utilization_cap": 0.8}) == ""  # flat traffic


def test_a_volume_too_small_for_the_simulators_clock_runs_at_the_lowest_rate_it_holds():
    from types import SimpleNamespace

    from kvledger.analyses.serving.load_run import load_share_at, lowest_rate
    from kvledger.dynamics.engine.request import MAX_ARRIVAL_S

    # the capacity run: 5 req/s, its last arrival at 100 s; a run's arrivals scale as 1 ÷ its rate, so at 1 req/s the
    # last comes at 500 s, and the lowest rate keeping it within the simulator's 10⁹ s is 500 ÷ 10⁹ = 5e-7 req/s
    records = SimpleNamespace(records=[SimpleNamespace(arrival_s=t) for t in (0.0, 40.0, 100.0)])
    low = lowest_rate(5.0, records)
    assert MAX_ARRIVAL_S == 1e9 and low == pytest.approx(5e-7, rel=1e-8) and low >= 5e-7
    asked = []
    result = SimpleNamespace(duration_s=1000.0, num_requests=3, num_good=3, goodput_input_tok_per_s=3.0,
                             goodput_output_tok_per_s=0.6, throughput_input_tok_per_s=3.0,
                             throughput_output_tok_per_s=0.6)

    def rerun(rate):
        asked.append(rate)
        return SimpleNamespace(result=result, run=SimpleNamespace(args=SimpleNamespace(seed=0)))

    # 1 request a month on 1 replica: 1 ÷ (730 × 3600) = 3.8e-7 req/s, below 5e-7: run at the lowest rate instead
    share = load_share_at(rerun, 1 / (730 * 3600), 1, 21.0, low)
    assert asked == [low] and share.simulated_rate_req_per_s == low
    assert share.rate_req_per_s == pytest.approx(3.805e-7, rel=1e-3)  # tok/s still at the volume's own rate
    # good input tok/s = the volume's rate × the run's 3,000 good input tokens ÷ its 3 requests
    assert share.tok_per_s("input") == pytest.approx(1 / (730 * 3600) * 1000)
    assert "the lowest rate whose 3 arrivals fit the simulator's clock" in share.words()
    assert load_share_at(rerun, 1.0, 1, 21.0, low).simulated_rate_req_per_s is None  # 1 req/s: run as it is


def test_search_prices_a_volume_too_small_for_the_simulators_clock_as_cost_does():
    # 10 tokens a month is ~1e-8 req/s: a rerun there puts its last arrival past the simulator's 10⁹ s. cost runs at
    # the lowest rate that holds them (load_run.lowest_rate of its capacity run); search passed its capacity object,
    # which carries no run, so the lowest rate was 0 and the candidate failed as a simulation error (a review found
    # it): now it is the priced run's, and the candidate is priced, with the lowest rate simulated named
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus",
                                   "H100", "--tp", "1", "--num-requests", "100", "--monthly-tokens", "10", "--backend",
                                   "serial", "--json"])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(res.stdout)["candidates"]
    assert entry["status"] == "feasible"
    load = entry["capacity"]["at_volume_load"]
    assert load["simulated_rate_req_per_s"] > load["rate_req_per_s"] > 0


def test_a_break_even_out_of_the_peaks_reach_is_unreachable_in_json_as_in_the_text():
    # gpt-4.1-mini against Llama-3.1-8B on one H100, 3B in + 1B out tokens a month: one replica's break-even u* is
    # 27.7%; at --peak-to-mean 3 a replica runs at most 80% ÷ 3 = 26.7% on the mean, so the text says "not reachable at
    # this peak" and --json's reachable says the same (it was true: u* ≤ 1 was its only test; a review found it);
    # at --peak-to-mean 2 (40%) it is within reach
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    def u_star(peak: str) -> tuple[dict, str]:
        args = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms",
                "--num-requests", "200", "--monthly-input-tokens", "3e9", "--monthly-output-tokens", "1e9",
                "--peak-to-mean", peak, "--api", "OpenAI:gpt-4.1-mini"]
        res, text = CliRunner().invoke(app, [*args, "--json"]), CliRunner().invoke(app, args, env={"COLUMNS": "400"})
        assert res.exit_code == text.exit_code == 0, res.output
        return json.loads(res.stdout)["break_even_utilization"], " ".join(text.output.split())

    b, text = u_star("3")
    assert 0.2667 < b["utilization"] < 0.28 and b["mean_utilization_cap"] == pytest.approx(0.8 / 3)
    assert b["reachable"] is False and "not reachable at this peak" in text
    b, text = u_star("2")
    assert b["reachable"] is True and "not reachable" not in text
