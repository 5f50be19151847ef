"""goodput and search say once, where they state --target, that it is the share of requests within every SLO limit at
once, not a percentile of each (a fresh-user trial read `--target 0.99` as a p99 TTFT and a p99 TPOT)."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

from kvledger.report.probe_cells import target_words

GUIDELLM = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "guidellm"
               / "llmd_fixture_guidellm_report_v2_mockserver.json")
SAYS = "of requests within all limits"


def test_the_words():
    # 0.99 → "≥ 99%" and "p99"; 0.995 → 99.5 in full (":.0%" would print 100%)
    assert target_words(0.99) == "≥ 99% of requests within all limits at once (not a p99 of each)"
    assert target_words(0.9) == "≥ 90% of requests within all limits at once (not a p90 of each)"
    assert target_words(0.995) == "≥ 99.5% of requests within all limits at once (not a p99.5 of each)"


def test_goodput_says_it_once_on_measured_runs_and_in_a_simulation():
    res = run_cli("goodput", GUIDELLM, "--slo", "ttft=500ms,tpot=50ms", "--target", "0.9")
    assert res.exit_code == 0, res.output
    assert res.stdout.count(SAYS) == 1
    assert "SLO: ttft ≤ 500.00 ms" in res.stdout and "; target ≥ 90% of requests within all limits at once " \
                                                      "(not a p90 of each)" in res.stdout
    sim = run_cli("goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "60",
                  "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--slo", "ttft=500ms,tpot=50ms",
                  "--target", "0.99")
    assert sim.exit_code == 0, sim.output
    assert sim.stdout.count(SAYS) == 1
    assert "target attainment ≥ 99% of requests within all limits at once (not a p99 of each)" in sim.stdout


def test_search_says_it_once():
    res = run_cli("search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1",
                  "--num-requests", "60", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--rate",
                  "5", "--target", "0.99", "--workers", "1")
    assert res.exit_code == 0, res.output
    assert res.stdout.count(SAYS) == 1
    assert res.stdout.startswith("kvledger search: meta-llama/Llama-3.1-8B, SLO ttft=500ms,tpot=50ms for ≥ 99% of "
                                 "requests within all limits at once (not a p99 of each); 1 candidate")
