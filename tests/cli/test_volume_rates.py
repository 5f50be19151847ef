"""``kvledger cost`` volumes typed per day or per hour (a head of engineering's trial: "100M/day", not a month), the
split sentence naming the flags for one's own split, and the like-for-like caveat naming the flag that fixes it."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

# llmperf's leaderboard run of Llama-2-70B-chat on 4 H100s: 150 requests of 550 prompt tokens, 22,042 output tokens
LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"
BASE = (LLMPERF, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--gpu", "H100", "--gpu-provider",
        "Nebius", "--num-gpus", "4")


def test_requests_per_day_are_priced_as_the_month_they_make():
    d = cli_json("cost", *BASE, "--monthly-requests", "10K/day")["decision"]
    # 10,000 requests/day × 730 h ÷ 24 = 30.4167 days = 304,166.67 requests a month; tokens by the run's mean:
    # 550 in → 167,291,666.7; 22,042 ÷ 150 = 146.947 out → 44,696,277.8
    assert d["requests_per_month"] == pytest.approx(304_166.667, rel=1e-6)
    assert d["input_tokens_per_month"] == pytest.approx(167_291_666.7, rel=1e-6)
    assert d["output_tokens_per_month"] == pytest.approx(44_696_277.8, rel=1e-6)
    assert d["volume_how"].startswith("10,000 requests/day × 30.42 days = 304,167 requests/month; requests per month")
    same = cli_json("cost", *BASE, "--monthly-requests", str(10_000 * 730 / 24))["decision"]
    assert same["requests_per_month"] == pytest.approx(d["requests_per_month"], rel=1e-12)


def test_the_answer_restates_a_daily_token_volume_as_its_month():
    out = run_cli("cost", *BASE, "--monthly-tokens", "100M/day").stdout
    # 1e8 × 30.4167 = 3.0417e9 tokens; split by the run: 550 ÷ (550 + 146.947) = 78.9% in → 2.40B ("2.4B") in, 641M out
    assert out.splitlines()[0].endswith(
        "for 3.04B tokens/month (2.4B in, 641M out; 100M tokens/day × 30.42 days = 3.04B tokens/month)")
    hourly = run_cli("cost", *BASE, "--monthly-tokens", "4M/h").stdout  # 4e6 × 730 h = 2.92e9
    assert "for 2.92B tokens/month (" in hourly and "4M tokens/hour × 730 h = 2.92B tokens/month)" in hourly


def test_the_split_sentence_names_the_flags_for_ones_own_split():
    how = cli_json("cost", *BASE, "--monthly-tokens", "3B")["decision"]["volume_how"]
    assert how.startswith("tokens per month given; split 79% input / 21% output as in the run's requests")
    assert how.endswith("; for your own split give --monthly-input-tokens and --monthly-output-tokens instead")


@pytest.mark.parametrize(("value", "words"), [
    ("100M/week", "--monthly-tokens: '100M/week': cannot read the rate unit 'week'; write the volume per /month, "
                  "/day, /hour, /min or /s (e.g. 100M/day, 20/s; a month is 730 h = 30.42 days), or per month with "
                  "no unit"),
    ("-5/day", "--monthly-tokens: '-5' is negative; a volume must be more than 0"),
    ("abc/day", "--monthly-tokens: cannot read 'abc' as a count"),
])
def test_an_unreadable_rate_is_refused_at_the_flag(value, words):
    assert refused("cost", *BASE, "--monthly-tokens", value).startswith(words)


def test_the_not_like_for_like_caveat_names_the_shared_prefix_that_matches_the_apis_hit_rate():
    # azure-conv's first 2,000 requests, no prefix ids: the run reuses 0% of its prompts against the API's 50%
    # cached. A shared system prompt of N tokens shares ⌊N/16⌋·16 of every prompt of ≥ N tokens (shorter ones none),
    # share(N) = N × #(p ≥ N) ÷ Σp; the smallest 16-aligned N with share ≥ 50% is 832 (51%), and the simulated run
    # with --shared-prefix-tokens 832 reuses 51% (checked by hand: the caveat is then gone)
    args = ("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--slo",
            "ttft=200ms,tpot=50ms", "--monthly-tokens", "3e9", "--gpu-provider", "Nebius", "--cache-hit-rate", "0.5")
    out = " ".join(run_cli(*args).stdout.split())  # the long "rests on" line, wrapped at 250 columns
    assert ("API input 50% cached (--cache-hit-rate) against a self-hosted run that reused 0% of its prompt tokens: "
            "not like for like — --shared-prefix-tokens 832 shares 51% of the workload's prompt tokens (N × the "
            "prompts of at least N tokens ÷ all prompt tokens) to match, or --cache-hit-rate 0.00 prices the API at "
            "the run's own reuse") in out
    matched = run_cli(*args, "--shared-prefix-tokens", "832").stdout
    assert "reused 51% of its prompt tokens" in matched and "not like for like" not in matched


def test_the_no_verdict_answer_restates_a_daily_volume_too():
    # no --api: no API row serves Llama-2-70b-chat, so no verdict; the self-hosted bill's line restates the volume in
    # the verdict line's words: 1e8 × 730 ÷ 24 = 3.0417e9 tokens, split 2.4B in / 641M out by the run (as above)
    lines = run_cli("cost", *(a for a in BASE if a not in ("--api", "OpenAI:gpt-4.1")), "--monthly-tokens",
                    "100M/day").stdout.splitlines()
    assert lines[0].startswith("answer: no verdict — no API row serves meta-llama/Llama-2-70b-chat-hf")
    bill = next(line for line in lines if line.startswith("  self-hosted bill "))
    assert "(2.4B in + 641M out tokens; 100M tokens/day × 30.42 days = 3.04B tokens/month)" in bill
    monthly = run_cli("cost", *(a for a in BASE if a not in ("--api", "OpenAI:gpt-4.1")), "--monthly-tokens",
                      "3.0416667e9").stdout
    assert "(2.4B in + 641M out tokens): " in monthly and "tokens/day" not in monthly  # typed per month: no clause


def test_search_restates_a_daily_volume_in_its_header_and_json():
    # 60 requests of 512 + 64 tokens on one H100 (tests/api/test_api_search_flags.py's small search): the load 100M
    # tokens a day is 1e8 × 730 ÷ 24 = 3.0417e9 tokens a month, restated in cost's words
    args = ("search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1",
            "--num-requests",
            "60", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--monthly-tokens", "100M/day")
    words = "100M tokens/day × 30.42 days = 3.04B tokens/month"
    head = run_cli(*args).stdout.splitlines()[0]
    assert head.startswith("kvledger search: meta-llama/Llama-3.1-8B, SLO ttft=2s,tpot=100ms for ≥ 90% of requests "
                           "within all limits at once (not a p90 of each); "
                           "1 candidate, 1 feasible") and head.endswith(f"; {words}")
    assert cli_json(*args)["volume_given"] == words
    assert "volume_given" not in cli_json(*args[:-1], "3.0416667e9")  # typed per month: nothing to restate
