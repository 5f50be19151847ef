"""What the third new-user trial found in the ledgers' output, each pinned with its figures worked by hand: the people
line's source, the never-break-even sentence, bills to the cent, factor values in words, the plan's range caveat,
goodput's bracket and shared notes, one range formatter, and answers printed before anything else."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.accounting.kv_range import concurrency_caveat, no_fit_caveat, range_text
from kvledger.analyses.serving.sim_capacity import stopped_share_text
from kvledger.cli.main import app
from kvledger.report.decision_view import report_answer_lines
from kvledger.units import GiB

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
EV = ROOT / "tests" / "evidence" / "data"
LLMPERF = str(EV / "llmperf" / "leaderboard_individual_anyscale_70b.json")


def _out(*args: str) -> str:
    res = runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    return res.output


def test_cost_bills_to_the_cent_people_labelled_and_factors_in_words():
    out = _out("cost", LLMPERF, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--gpu", "H100",
               "--gpu-provider", "Nebius", "--instance", "gpu-h100-sxm 8gpu", "--num-gpus", "4",
               "--monthly-requests", "1e6", "--engineer-usd-per-month", "30000")
    # rented (the 8-GPU preset named, so the whole-instance bill is what is checked): one TP-4 replica on one whole
    # Nebius gpu-h100-sxm 8gpu instance (gpu_prices.csv Nebius:gpu-h100-sxm 8gpu:
    # 8 GPUs at $2.95), 4 of its GPUs idle: 8 × $2.95 × 730 h = $17,228.00; people 0.25 (team 'some' default) ×
    # $30,000 = $7,500.00; total $24,728.00
    assert "│  17,228.00 │" in out and "│   7,500.00 │" in out and "│  24,728.00 │" in out
    assert "17,228.0000" not in out
    # API bill: 10⁶ requests × 550 input tokens = 550 Mtok × $2.00 = $1,100.00
    assert "│   1,100.00 │" in out
    out = " ".join(out.split())  # the sentences, unwrapped
    # only --engineer-usd-per-month was given: the sources say so, and that the months are the default
    assert "user input (--engineer-usd-per-month); the other from the kvledger default assumption" in out
    assert "data sovereignty: not required —" in out and "not_required" not in out
    # never breaks even: a·c = $6,711 < R = 4 × $2.95 × 730 h = $8,614, a replica's share of full instances (two TP-4
    # replicas fill one), named with its arithmetic ($2.95 × 8 = $23.60/h ÷ 2), and one replica's own bill, the whole
    # instance, $17,228; the sentence gives both parts, R + P = $16,114
    assert ("costs $8,614/month in GPU rental alone as its share of full instances of Nebius:gpu-h100-sxm 8gpu "
            "($23.60/h ÷ 2 replicas per instance × 730 h: the bill nears it as replicas fill whole instances, so no "
            "volume does better; one replica alone is billed $17,228/month on Nebius:gpu-h100-sxm 8gpu) (plus "
            "$7,500/month of people, $16,114 in all; the people line only widens the gap), but its 2,949,260 requests "
            "cost $6,711 on the API") in out
    assert "1 replica × 4 GPUs rented on 1 gpu-h100-sxm 8gpu instance (8 GPUs, 4 idle)" in out


def test_plan_fits_line_says_when_the_range_may_not_hold_one_request():
    plan = json.loads(_out("plan", "openai/gpt-oss-120b", "--gpu", "H100", "--json"))
    low, high = plan["memory"]["ranges"]["max_concurrency"]
    assert low < 1 <= high  # the central figure holds one 131,072-token request, the range's low end does not
    out = _out("plan", "openai/gpt-oss-120b", "--gpu", "H100")
    # gpt-oss has sliding layers: the figure is vLLM's start-up check (the short plan's concurrency line says so, and
    # that the × is the engine's printed one), and the decoding figure follows it
    assert f"fits: 1 concurrent 131,072-token request at start-up (1.61x — but may " \
           f"not: the range's low end holds {low:.2f}x, under one request); ≈1 at once while decoding" \
           in " ".join(out.split())
    assert f"at vLLM's start-up check (the engine's printed 1.61x — but may not: the range's low end holds {low:.2f}x" \
        in " ".join(_out("plan", "openai/gpt-oss-120b", "--gpu", "H100", "--verbose").split())


def test_plan_prints_available_kv_at_the_precision_of_its_other_gib_figures():
    # vLLM 0.33 on one H100 keeps 55.00 GiB for KV (README recipe 1); "55.0" beside "55.00 GiB KV per GPU" read as two
    # figures. The fits line holds: its range's low end still holds 3 full-length requests, so no caveat
    out = " ".join(_out("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100").split())
    assert "available KV 55.00 GiB (" in out and "available KV 55.0 GiB" not in out and "may not" not in out


def test_concurrency_caveat_and_range_text():
    assert concurrency_caveat({"max_concurrency": (3.44, 3.60)}, 3) == ""  # the low end still holds 3
    caveat = concurrency_caveat({"max_concurrency": (2.5, 3.6)}, 3)
    assert caveat == " — the range's low end holds 2.50x, so as few as 2"
    assert concurrency_caveat(None, 3) == ""
    # "does not fit" at the central figure (0.95x) while the high end holds 1.20x: the verdict may flip
    flip = no_fit_caveat({"max_concurrency": (0.60, 1.20)})
    assert flip == " It may fit after all: the range's high end holds 1.20x."
    assert no_fit_caveat({"max_concurrency": (0.60, 0.90)}) == ""
    assert range_text(4.1 * GiB, 8.6 * GiB) == "(4.1–8.6)"
    assert range_text(-61.9 * GiB, -61.2 * GiB) == "(−61.9 to −61.2)"  # no "-61.9–-61.2"
    assert range_text(5.0 * GiB, 5.04 * GiB) == ""


def test_a_stopped_probe_prints_both_ends_to_one_decimal_its_bound_rounded_down():
    assert stopped_share_text(0.111, 0.882) == "11.1%–88.2%*"  # was 11.1%–88.20%*
    assert stopped_share_text(0.5, 0.8995) == "50.0%–89.9%*"  # 89.95 % misses 90 %: it must not read 90.0 %


def test_goodput_files_bracket_the_boundary_and_print_shared_notes_once():
    files = sorted(str(p) for p in (EV / "inference-perf").glob("stage_*_lifecycle_metrics.json"))
    out = " ".join(_out("goodput", *files, "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9").split())
    assert ("the measured runs bracket it: between 74.94 req/s (the last that meets) and 111.92 req/s (the next "
            "measured, whose attainment is only bounded, [50.0%, 75.0%]: even its upper bound misses)") in out
    assert out.count("manifests.yaml MODEL_ID (the Deployment's)") == 1 and "notes for all 7 runs" in out
    # stage 3: TTFT ≤ 200 ms for between 3,358 and 5,036 of 6,715: 3358/6715 = 50.0 %, 5036/6715 = 75.0 %
    assert "between 3,358 and 5,036 of 6,715 completed requests" in out
    assert "request_rate 111.92: attainment in [50.0%, 75.0%] misses (even its upper bound is under 90%)" in out
    assert "request_rate 74.94: attainment 100.0% meets" in out  # both ends 100.0 %: no bracket


def test_report_answer_lines_from_the_golden_report():
    text = (ROOT / "tests" / "golden" / "report_llama8b_h100.out").read_text(encoding="utf-8")
    cost = json.loads(text[text.index("\n") + 1:])["cost"]
    first, cap, warn = report_answer_lines(cost)
    assert first == cost["headline"][0] and first.startswith("answer depends on volume: self-hosting is cheaper")
    # the search: 17.5 req/s with 90.3 % within the SLO, so 17.5 × 0.903 = 15.80 good req/s sustained there (the
    # probe's goodput over first arrival → last finish, 15.14, holds its drain), on 1 GPU; its 80% band is the
    # uncalibrated throughput band (error_bands.json q10 −0.10653, q90 +0.22576: a t prediction interval over its nine
    # saturated deployments): 17.5 / 1.22576 = 14.277 to 17.5 / 0.89347 = 19.587, printed to 4 significant digits;
    # 2,000 requests per probe reach steady state; the one warning is that azure-conv's first 2,000 requests are no
    # sample of its 19,366 (output mean 265 against 211: probe_sample)
    assert warn.startswith("warning: unrepresentative sample: each probe replays the trace's first 2,000 requests")
    assert cap == ("SLO capacity: 17.5 req/s (80% band 14.28–19.59 req/s, uncalibrated roofline) per deployment unit "
                   "(1 GPU), 15.80 good req/s there, 90.3% of requests within the SLO (target ≥ 90%)")


def test_simulate_output_starts_with_its_first_line():
    out = _out("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests",
               "200")
    assert out.startswith("workload: azure-conv")
