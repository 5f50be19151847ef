"""Findings of a fresh-user trial on cost with benchmark files: each test fails on the code before its fix."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import MODEL, refused, run_cli

from kvledger.evidence import read_run
from kvledger.ledgers.decision_notes import tokens_text
from kvledger.report.figure import fmt

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
SUMMARY = str(DATA / "llmperf" / "leaderboard_summary_anyscale_70b.json")
STAGE = str(DATA / "inference-perf" / "stage_2_lifecycle_metrics.json")
COST = ("--gpu", "H100-SXM", "--num-gpus", "4", "--monthly-requests", "1e6", "--api", "OpenAI:gpt-4.1")


def test_the_llmperf_summary_states_its_token_totals():
    # results_number_output_tokens_mean 146.94666… × 150 completed = 22,042 tokens, which ÷ the 106.216 s duration is
    # the file's own results_mean_output_throughput_token_per_s 207.5212; input 550.0 × 150 = 82,500
    agg = read_run(SUMMARY)
    assert (agg.total_input_tokens, agg.total_output_tokens) == (82_500, 22_042)
    assert agg.total_output_tokens / agg.duration_s == pytest.approx(207.52121071152493)
    assert any(d.startswith("token totals = results_number_input_tokens_mean and results_number_output_tokens_mean")
               for d in agg.metadata.definitions)
    bedrock = read_run(DATA / "llmperf" / "leaderboard_summary_bedrock_70b.json")  # 149.7524… × 101 completed
    assert (bedrock.total_input_tokens, bedrock.total_output_tokens) == (55_550, 15_125)


def test_cost_reads_the_duration_goodput_reads_from_an_llmperf_summary():
    good = json.loads(run_cli("goodput", SUMMARY, "--slo", "ttft=500ms", "--json").stdout)
    res = run_cli("cost", SUMMARY, "--slo", "ttft=500ms", *COST, "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert good["duration_s"] == pytest.approx(150 / 84.73327721639254 * 60)
    assert good["duration_source"] == "stated by the file"
    assert doc["capacity"]["goodput_req_per_s"] == pytest.approx(good["goodput_req_per_s"])  # ≥1.393 good req/s, both
    assert doc["capacity"]["goodput_req_per_s"] == pytest.approx(148 / 150 * 84.73327721639254 / 60)
    assert doc["capacity"]["good_output_tok_per_s"] == pytest.approx(22_042 * 148 / 150 * 84.73327721639254 / 150 / 60)
    text = " ".join(run_cli("cost", SUMMARY, "--slo", "ttft=500ms", *COST).stdout.split())
    assert "measured per replica: 1.393 good req/s, 766.4 good input tok/s, 204.8 good output tok/s" in text


def test_cost_states_the_bound_when_the_summary_bounds_goodput_at_zero():
    # of 150: TTFT p99 474.5 ms ≤ 500 ms < max 592.8 ms → 148–149; E2E min 0.749 s ≤ 1 s < p25 2.079 s → 1–⌈0.25 × 149⌉
    # = 38; joint ≥ max(0, 150 − 2 − 149) = 0, ≤ 38 (a TPOT SLO, which this summary cannot judge, is refused now)
    res = run_cli("cost", SUMMARY, "--slo", "ttft=500ms,e2e=1s", *COST)
    text = " ".join(res.stdout.split())
    assert res.exit_code == 1
    assert text.startswith("answer: none — between 0 and 38 of 150 completed requests met the SLO")
    assert "between $126.0353 (were all 38 good) and unbounded (were none) per 1M output tokens" in text


def test_a_run_without_token_counts_is_named_so_not_an_unknown_duration():
    from kvledger.errors import InputError
    from kvledger.ledgers.cost import capacity_from
    from kvledger.ledgers.goodput import goodput
    from kvledger.ledgers.slo import parse_slo

    agg = read_run(SUMMARY)
    agg.total_output_tokens = None

    with pytest.raises(InputError, match=r"states no output token counts, so no cost per token can be derived "
                                         r"\(its goodput is 1\.393 good req/s\)"):
        capacity_from(agg, goodput(agg, parse_slo("ttft=500ms")), 0.1)


def test_an_implausible_monthly_volume_is_refused_with_the_reason():
    msg = refused("cost", STAGE, "--slo", "ttft=200ms", "--monthly-tokens", "1e20")
    assert msg.startswith("--monthly-tokens 1e+20 is out of range; allowed: (0, 1,000,000,000,000,000] tokens/month; "
                          "10¹⁵ a month is 380 million tokens/s around the clock")
    msg = refused("cost", STAGE, "--slo", "ttft=200ms", "--monthly-requests", "1e13")
    assert msg.startswith("--monthly-requests 10,000,000,000,000 is out of range; allowed: (0, 1,000,000,000,000] "
                          "requests/month; 10¹² a month is 380,000 req/s around the clock")
    assert refused("search", MODEL, "--slo", "ttft=500ms", "--gpus", "H100", "--monthly-tokens", "2e15").startswith(
        "--monthly-tokens 2,000,000,000,000,000 is out of range; allowed: (0, 1,000,000,000,000,000] tokens/month")


def test_a_large_volume_prints_its_numbers_with_separators():
    text = " ".join(run_cli("cost", STAGE, "--slo", "ttft=200ms", "--monthly-requests", "1e12").stdout.split())
    assert "for 264T tokens/month (201T in, 62.8T out)" in text
    assert "self-hosted: 6,404 replicas × 1 GPU rented" in text
    assert "its 6,404 replicas are upper bounds" in text
    assert "⌉ = 6,404 (at most: the capacity is a lower bound)" in text
    assert tokens_text(1e20) == "100,000,000T" and tokens_text(7.62e14) == "762T" and tokens_text(5_000) == "5,000"


def test_a_volume_is_rounded_before_its_unit_is_picked():
    # 999.7B rounded to 3 figures is 1,000B, so it is 1T (never 1e+03B); T has no unit above it: 1,000T
    assert [tokens_text(x) for x in (999.6e12, 999.7e9, 999.4e9, 999.7e6, 999_999.7, 999_999.4, -999.7e9)] == [
        "1,000T", "1T", "999B", "1B", "1M", "999,999", "-1T"]
    assert (fmt(999.7), fmt(999.4), fmt(1234.5)) == ("1,000", "999", "1,234")  # the report's table numbers alike
    text = " ".join(run_cli("cost", STAGE, "--slo", "ttft=200ms", "--monthly-tokens", "999.7B").stdout.split())
    assert "for 1T tokens/month (762B in, 238B out)" in text


def test_a_derived_volume_is_held_to_the_same_caps_as_a_given_one():
    # 10¹⁵ tokens at the run's 263.7 tokens a request is 3.8 × 10¹² requests, above --monthly-requests' 10¹² cap
    assert refused("cost", STAGE, "--slo", "ttft=200ms", "--monthly-tokens", "1e15").startswith(
        "--monthly-tokens converts to 3,792,447,832,754 requests/month (the run's mean 263.7 tokens a request), out "
        "of the range --monthly-requests takes: (0, 1,000,000,000,000] requests/month; 10¹² a month")
    assert refused("cost", STAGE, "--slo", "ttft=200ms", "--monthly-input-tokens", "0", "--monthly-output-tokens",
                   "0").startswith("--monthly-input-tokens/--monthly-output-tokens converts to 0 requests/month (the "
                                   "run's mean 263.7 tokens a request), out of the range --monthly-requests takes: "
                                   "(0, 1,000,000,000,000]")
    assert refused("cost", STAGE, "--slo", "ttft=200ms", "--monthly-tokens", "0").startswith(
        "--monthly-tokens: '0' is zero; a volume must be more than 0")


def test_report_names_its_default_out_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kvledger-report.html").write_text("old")
    args = ("report", MODEL, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1")
    assert refused(*args) == ("kvledger-report.html (the default --out) already exists; pass --force or --out PATH. "
                              "Nothing was run.")
    assert refused(*args, "--out", "kvledger-report.html").startswith(
        "--out kvledger-report.html already exists; refusing to overwrite it")
    assert (tmp_path / "kvledger-report.html").read_text() == "old"


@pytest.mark.parametrize("merged", [True, False])
def test_the_error_prefix_is_lowercase_whether_or_not_stderr_shares_stdouts_pipe(merged):
    # the bytes are "error: " either way (a viewer that capitalises the first character of its output is not kvledger)
    cmd = [sys.executable, "-m", "kvledger.cli.main", "cost", "no-such-file.json", "--slo", "ttft=500ms"]
    res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                         text=True, timeout=120)
    said = res.stdout if merged else res.stderr
    assert res.returncode == 2 and said == "error: no-such-file.json: no such file\n"
