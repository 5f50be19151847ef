"""``kvledger cost FILE`` where the run bounds the answer only: an under-loaded run's capacity is a lower bound (the
answer and the robustness line say so, the JSON's notes carry the warning), and a run of which as few as no request met
the SLO has no cost per good token to give (exit 1, strict JSON with null bounds and why)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import records_file, run_cli

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
STAGE_0, STAGE_6 = str(DATA / "stage_0_lifecycle_metrics.json"), str(DATA / "stage_6_lifecycle_metrics.json")
PRICES = ["--api", "OpenAI:gpt-4.1", "--gpu-usd-per-hour", "2.5", "--engineer-months-per-month", "0"]


def test_an_under_loaded_run_is_priced_as_a_lower_bound_on_the_capacity():
    # stage 0: offered 1 req/s, served 0.99685 good req/s with TTFT and TPOT far inside ttft ≤ 500 ms, tpot ≤ 50 ms
    # (under-loaded: tests/cli/test_cost_cli.py). 10⁷ requests/month = 3.805 req/s ÷ (0.99685 × 0.8) → ⌈4.77⌉ = 5
    # replicas × 730 h × $2.50 = $9,125.00; the API: 10⁷ × (200.68 in × $2 + 62.35 out × $8)/10⁶ = $9,001.67: the API.
    # 4 replicas ($7,300) would win, once the capacity is 3.805 ÷ (0.99685 × 0.8 × 4) = 1.19× the one priced — which
    # the under-loaded run does not rule out, so the verdict MAY FLIP (it used to "hold within ±10%")
    args = ["cost", STAGE_0, "--slo", "ttft=500ms,tpot=50ms", *PRICES, "--monthly-requests", "1e7"]
    d = json.loads(run_cli(*args, "--json").output)
    dec = d["decision"]
    assert (dec["replicas"], dec["self_host_usd_per_month"], dec["verdict"]) == (5, pytest.approx(9125.0), "API")
    assert dec["api_usd_per_month"] == pytest.approx(1e7 * (200.68333 * 2 + 62.35 * 8) / 1e6, rel=1e-6)
    assert dec["capacity_lower_bound"] is True and dec["capacity_band_high"] is None
    assert dec["flips"]["capacity_multiplier"] == pytest.approx(1e7 / (730 * 3600) / (0.99685067 * 0.8 * 4), rel=1e-6)
    assert dec["holds_within_band"] is False
    assert d["capacity"]["capacity_lower_bound"] is True
    # the warning opens the answer (second line of the headline) and the JSON's notes
    assert d["headline"][1] == (
        "  WARNING: the run looks UNDER-LOADED (see the capacity basis below): its 0.9969 good req/s is the load it "
        "was offered, not the replica's capacity, which it bounds only from below; so the self-hosted $9,125.00/month "
        "and its 5 replicas are upper bounds (a rate sweep up to the SLO boundary gives the capacity)")
    warnings = [n for n in d["notes"] if n.startswith("WARNING: ")]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: the run looks UNDER-LOADED: offered 1 req/s")
    text = " ".join(run_cli(*args).output.split())  # rich wraps at the console's width
    answer = text[: text.index("stage_0_lifecycle_metrics.json under SLO")]  # the answer block, before any detail
    assert "WARNING: the run looks UNDER-LOADED (see the capacity basis below)" in answer
    assert "robustness: the verdict MAY FLIP: the capacity priced is only a lower bound" in answer
    assert "it would flip were the capacity 1.19× the one priced, which the run does not rule out" in answer
    assert "±10%" not in answer and "= 5 (at most: the capacity is a lower bound)" in answer


def test_a_run_near_its_limit_keeps_its_two_sided_band():
    # stage 3 (TTFT p90 at 60% of 500 ms: not flagged) is priced as before: ±10% and no lower-bound warning
    d = json.loads(run_cli("cost", STAGE_0.replace("stage_0", "stage_3"), "--slo", "ttft=500ms,tpot=50ms", *PRICES,
                           "--monthly-requests", "1e7", "--json").output)
    assert d["decision"]["capacity_lower_bound"] is False and d["decision"]["capacity_band_high"] == pytest.approx(1.1)
    assert d["capacity"]["capacity_lower_bound"] is False and not any(n.startswith("WARNING") for n in d["notes"])


def test_a_saturated_run_bounds_the_cost_per_good_token_from_below_only_and_exits_1():
    # stage 6 from its percentiles: between 0 and 669 of 13,369 requests meet ttft ≤ 200 ms, tpot ≤ 20 ms (kvledger
    # goodput shows ≥0 ≤669). Were all 669 good, of the mean tokens: 7,140.79 output tok/s × 669 ÷ 13,369 = 357.33
    # good output tok/s; per 1M output at 50% utilization, decode share 0.8, $2.50/GPU-h:
    # 10⁶ ÷ (357.33 × 3600 × 0.5) × 0.8 × 2.5 = $3.1095; input 22,837.56 × 669 ÷ 13,369 = 1,142.82 tok/s:
    # 10⁶ ÷ (1,142.82 × 1800) × 0.2 × 2.5 = $0.2431. Were none good, no finite cost: the upper bound is null
    args = ["cost", STAGE_6, "--slo", "ttft=200ms,tpot=20ms", *PRICES, "--utilization", "0.5", "--prefill-share", "0.2"]
    res = run_cli(*args, "--json")
    assert res.exit_code == 1  # the command ran on a valid file; it cannot give one answer (not 2: bad input)
    d = json.loads(res.output, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    g = d["goodput"]
    assert d["answer"] is None and d["good_requests"] == {"lower": 0, "upper": 669, "completed": 13369,
                                                           "requests": 13369, "estimate": True}
    out_tok = g["throughput_output_tok_per_s"] * 669 / 13369
    in_tok = g["throughput_input_tok_per_s"] * 669 / 13369
    assert d["self_host_usd_per_mtok_output"]["lower"] == pytest.approx(1e6 / (out_tok * 1800) * 0.8 * 2.5)
    assert d["self_host_usd_per_mtok_output"]["lower"] == pytest.approx(3.1095, abs=1e-4)
    assert d["self_host_usd_per_mtok_input"]["lower"] == pytest.approx(1e6 / (in_tok * 1800) * 0.2 * 2.5)
    for kind in ("input", "output"):
        bound = d[f"self_host_usd_per_mtok_{kind}"]
        assert bound["upper"] is None and bound["upper_why"].startswith("as few as 0 requests met the SLO")
    assert d["at_upper_bound"]["num_good"] == 669 and d["exit_code"] == 1
    assert any(n.startswith("WARNING: the run looks OVER-LOADED") for n in d["notes"])
    text = run_cli(*args)
    assert text.exit_code == 1
    assert " ".join(text.output.split()).startswith(
        "answer: none — between 0 and 669 of 13,369 completed requests met the SLO (ttft ≤ 200.00 ms, tpot ≤ 20.00 "
        "ms): the file gives percentiles, not each request, and they only bound the count; so the self-hosted cost "
        "per good token is between $3.1095 (were all 669 good) and unbounded (were none) per 1M output tokens, and "
        "between $0.2431 and unbounded per 1M input tokens")


def test_with_a_volume_the_upper_bound_says_whether_the_api_wins_even_there():
    # stage 6 mixes 200.93 input + 62.83 output tokens a request: 3B tokens/month = 11.37M requests = 4.328 req/s. At
    # 669 good requests in 117.62 s = 5.688 good req/s: ⌈4.328 ÷ (5.688 × 0.8)⌉ = 1 replica at 76.1%, 730 h × $2.50 =
    # $1,825.00. gpt-4.1 ($2/$8 per M): 3,000 M × (0.7618 × $2 + 0.2382 × $8) = $10,287.57, so self-hosting is cheaper
    # at the upper bound, which the file cannot say holds; DeepInfra's Llama-3.1-8B ($0.02/$0.03 per M): $67.15, less
    # than the one replica even at the upper bound, so the API is cheaper at every count the file allows
    args = ["cost", STAGE_6, "--slo", "ttft=200ms,tpot=20ms", *PRICES, "--monthly-tokens", "3e9", "--json"]
    best = json.loads(run_cli(*args).output)["at_upper_bound"]
    assert (best["replicas"], best["self_host_usd_per_month"], best["verdict"]) == (1, pytest.approx(1825.0),
                                                                                   "self-host")
    assert best["utilization"] == pytest.approx(0.76096, abs=1e-5)
    assert best["api_usd_per_month"] == pytest.approx(10287.57, abs=0.01)
    assert best["text"].endswith("self-hosting costs less there, but the file cannot say it is so")
    args[args.index("OpenAI:gpt-4.1")] = "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    deep = json.loads(run_cli(*args).output)["at_upper_bound"]
    assert deep["verdict"] == "API" and deep["api_usd_per_month"] == pytest.approx(67.15, abs=0.01)
    assert deep["text"].endswith("the API costs less even then, and so at every count the file allows")


def test_a_run_of_which_no_request_met_the_slo_exits_1_with_no_bound(tmp_path):
    # 100 requests, each TTFT ≥ 100 ms: none within 1 ms, exactly (per-request records): no bound either way
    path = str(records_file(tmp_path))
    args = ["cost", path, "--slo", "ttft=1ms", *PRICES, "--num-gpus", "1", "--gpu", "H100"]
    res = run_cli(*args, "--json")
    assert res.exit_code == 1
    d = json.loads(res.output)
    assert d["good_requests"]["upper"] == 0 and d["at_upper_bound"] is None
    assert d["self_host_usd_per_mtok_output"] == {
        "lower": None, "upper": None, "lower_why": "no request met the SLO: no finite cost per good token",
        "upper_why": "as few as 0 requests met the SLO: no finite cost per good token bounds it above"}
    text = run_cli(*args)
    assert text.exit_code == 1 and " ".join(text.output.split()).startswith(
        "answer: none — no request met the SLO (ttft ≤ 1.00 ms; 0 of 100 completed requests): the cost per good "
        "token is unbounded")


def test_the_console_entry_exits_1_for_no_answer():
    code = (f"import sys; sys.argv = ['kvledger', 'cost', {STAGE_6!r}, '--slo', 'ttft=200ms,tpot=20ms', "
            f"*{PRICES!r}, '--json']\nfrom kvledger.cli.main import main\nmain()\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and json.loads(res.stdout)["good_requests"]["upper"] == 669
