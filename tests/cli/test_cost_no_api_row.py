"""cost of a model no catalog API row serves, without --api: the self-hosted ledger alone, no verdict (a fine-tune or a
model no API sells is still self-hosted at a volume); an --api naming no row is still refused before simulating; report
still refuses, before its simulations, saying how to proceed (a fresh-user trial: Qwen3-30B-A3B on an H100 simulated
its whole search, then said "no API row to compare with")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import kvledger.analyses.serving.cost_compute as cost_compute
from kvledger.cli.main import app
from kvledger.errors import InputError, UnknownNameError

runner = CliRunner()
# Qwen/Qwen3-8B: bundled, and no API row serves it (catalog.api_match.same_model_rows is empty); a flat $2/GPU-hour and
# no people line keep the bill to the GPU hours
SIM = ["cost", "--simulate", "Qwen/Qwen3-8B", "--gpu", "H100", "--slo", "ttft=1s,tpot=60ms", "--num-requests", "100",
       "--gpu-usd-per-hour", "2", "--engineer-months-per-month", "0"]
REASON = ("no API row serves Qwen/Qwen3-8B, so there is no build-vs-buy verdict; for one, name a comparable model's "
          "API price with --api PROVIDER:MODEL (kvledger prices --kind api lists them)")


def test_no_api_row_gives_the_self_hosted_month_at_the_volume():
    res = runner.invoke(app, [*SIM, "--monthly-tokens", "2B", "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["verdict"] is None and d["verdict_reason"] == REASON
    assert d["decision"] is None and d["api_options"] == [] and d["break_even_volume"] is None
    assert d["headline"][0] == f"answer: no verdict — {REASON}; the self-hosted side alone follows"
    m = d["monthly"]
    # 2B tokens a month is 0.78 req/s (≈ 800 + 170 tokens a request), far below one H100's SLO capacity (tens of
    # req/s) × 80%: one replica. Its bill: 1 replica × 1 GPU × $2.00/GPU-h × 730 h/month (ledgers.cost.HOURS_PER_MONTH)
    # = $1,460.00, no people (0 engineer-months)
    assert m["replicas"] == 1 and m["api"] is None and m["cheaper"] is None
    assert m["self_host_usd_per_month"] == pytest.approx(1460.0, abs=1e-9)
    assert [(i["quantity"], i["unit_price_usd"], i["amount_usd"]) for i in m["self_host"]["items"]] == [
        (730.0, 2.0, 1460.0)]
    # per 1M tokens, input and output together: $1,460 ÷ 2,000M tokens × 10⁶ = $0.73
    assert m["input_tokens"] + m["output_tokens"] == pytest.approx(2e9)
    assert m["usd_per_mtok_all_tokens"] == pytest.approx(0.73, rel=1e-12)
    # per 1k good requests: $1,460 ÷ the volume's good requests × 1,000 (every request within the SLO at 2% load)
    assert m["good_requests"] == pytest.approx(m["requests"], rel=1e-12)
    assert m["usd_per_1k_good_requests"] == pytest.approx(1460.0 / m["requests"] * 1e3, rel=1e-12)
    assert m["realized_utilization"] == pytest.approx(
        m["requests"] / (730 * 3600) / d["capacity"]["sizing_req_per_s"], rel=1e-9)
    assert d["totals"]["api_usd_per_mtok_input"] is None and d["totals"]["self_host_usd_per_mtok_output"] > 0
    assert d["ledgers"]["api_input"] is None and d["inputs"]["api_price"] is None
    assert "error_band" not in d  # a band on a verdict there is not


def test_no_api_row_text_leads_with_no_verdict_and_one_replicas_month():
    res = runner.invoke(app, [*SIM, "--utilization", "0.5"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())  # rich wraps at the test terminal's width
    assert text.startswith(f"answer: no verdict — {REASON}; the self-hosted side alone follows self-hosted, one "
                           "replica × 1 GPU (")
    # no volume: one replica's month, 1 × $2.00 × 730 h = $1,460.00 (people 0)
    assert "): $1,460.00/month, people included; at 50.0% utilization (given (--utilization)) $" in text
    assert "per 1k good requests for the bill at your volume pass --monthly-requests or --monthly-tokens" in text
    assert "API cost per 1M" not in text and "break-even" not in text
    assert f"no verdict on cost: {REASON}" in text


def test_no_api_row_per_request_from_the_per_token_ledgers():
    res = runner.invoke(app, [*SIM, "--utilization", "0.5", "--json"], catch_exceptions=False)
    d = json.loads(res.stdout)
    assert d["monthly"] is None and d["inputs"]["utilization"] == 0.5
    # a good request = (USD per 1M input × mean input tokens + USD per 1M output × mean output tokens) ÷ 10⁶
    t, c = d["totals"], d["capacity"]
    per = (t["self_host_usd_per_mtok_input"] * c["mean_input_tokens"]
           + t["self_host_usd_per_mtok_output"] * c["mean_output_tokens"]) / 1e6
    assert d["inputs"]["self_host_usd_per_request"] == pytest.approx(per, rel=1e-12)
    # and the input side: 1 GPU × 10⁶ ÷ (good input tok/s × 3600 × 0.5) × prefill share × $2.00
    assert t["self_host_usd_per_mtok_input"] == pytest.approx(
        1e6 / (c["good_input_tok_per_s"] * 3600 * 0.5) * c["prefill_share"] * 2.0, rel=1e-9)


def test_an_api_naming_no_row_is_still_refused_before_simulating(monkeypatch):
    def no_simulation(*a, **k):
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr(cost_compute, "sim_run", no_simulation)
    res = runner.invoke(app, [*SIM, "--api", "Nope:no-such-model"])
    assert isinstance(res.exception, UnknownNameError)
    assert "unknown API model 'Nope:no-such-model'" in str(res.exception)


def test_report_refuses_it_before_simulating_saying_how_to_proceed(monkeypatch):
    # report compares with an API throughout its sections: the refusal, before its capacity search and sweep (a review
    # trial timed 3.4 s of simulation before it), names --api and cost's self-hosted ledger
    import kvledger.cli.report_cmd as report_cmd

    def no_build(*a, **k):
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr(report_cmd, "_build", no_build)
    res = runner.invoke(app, ["report", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--slo", "ttft=1s,tpot=60ms",
                              "--monthly-tokens", "1B", "--json"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == (
        "no API row to compare with: no catalog row serves Qwen/Qwen3-30B-A3B; name a comparable model's with --api "
        "PROVIDER:MODEL (kvledger prices --kind api lists them), or for the self-hosted ledger alone run kvledger cost "
        "--simulate Qwen/Qwen3-30B-A3B with the same flags; refused before simulating")
