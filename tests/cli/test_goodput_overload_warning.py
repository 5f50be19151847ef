"""`kvledger goodput FILE` on a run pushed past its SLO capacity warns as `cost` does on the same file (the same load
check, ledgers/capacity_basis.check_load): an on-call reading an incident's benchmark sees that its goodput measures
the overload's queue, not the deployment's capacity."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json, run_cli

EV = Path(__file__).parents[1] / "evidence" / "data"
AIPERF = EV / "aiperf" / "run1_profile_export.jsonl"
STAGE0 = EV / "inference-perf" / "stage_0_lifecycle_metrics.json"
SLO = ["--slo", "ttft=900ms,tpot=33.2ms"]


def test_an_over_loaded_run_is_warned_of_above_the_table():
    # AIPerf, gpt-oss-20b, 100 requests: 5 within TTFT ≤ 900 ms and TPOT ≤ 33.2 ms (5.0 %, below 90 %), TTFT p90
    # 3.797 s = 4.2 × the 900 ms limit: cost's load check calls it over-loaded, and goodput now says so too
    res = run_cli("goodput", str(AIPERF), *SLO)
    assert res.exit_code == 0, res.output
    head = " ".join(res.stdout.split("\nSLO:")[0].split())  # the answer and the warnings above the table
    assert head.startswith("answer: 0.537 good req/s (5.0% of 100 requests within the SLO)")
    assert head.endswith("warning: the run looks OVER-LOADED: only 5.0% of requests good (below 90%); TTFT p90 "
                         "3.797 s = 4.2× its 900.00 ms limit. Its goodput is what that overload left, not what the "
                         "deployment serves within the SLO at a lower load: measure a rate sweep and give its files "
                         "with --target 0.9 for the SLO capacity")
    cost = run_cli("cost", str(AIPERF), *SLO, "--api", "OpenAI:gpt-4.1", "--utilization", "0.5", "--gpu", "H100",
                   "--gpu-usd-per-hour", "2", "--num-gpus", "1")
    assert "the run looks OVER-LOADED: only 5.0% of requests good (below 90%); TTFT p90 3.797 s" in cost.stdout


def test_no_overload_warning_on_a_light_run_or_with_a_target():
    # inference-perf stage 0: 1 req/s offered, every request within the SLO: no warning
    d = cli_json("goodput", str(STAGE0), *SLO)
    assert not any("OVER-LOADED" in n for n in d["notes"])
    # the kubecon batch_size sweep at TTFT ≤ 200 ms, TPOT ≤ 50 ms: stages 4–6 (148.9–222.8 req/s requested, at most
    # 5 % good by the percentile bounds) are over-loaded when read one by one (stage 3, 111.9 req/s, 50–75 %, is
    # not); with --target the SLO boundary across them is the answer, no per-run verdict
    stages = sorted(map(str, (EV / "inference-perf").glob("stage_*_lifecycle_metrics.json")))
    slo = ["--slo", "ttft=200ms,tpot=50ms"]
    flagged = [k for k, r in enumerate(cli_json("goodput", *stages, *slo)["runs"])
               if any("OVER-LOADED" in n for n in r["notes"])]
    assert flagged == [4, 5, 6]
    d = cli_json("goodput", *stages, *slo, "--target", "0.9")
    assert not any("OVER-LOADED" in n for r in d["runs"] for n in r["notes"])


def test_a_run_sent_far_faster_than_it_was_served_is_warned_of_in_goodput_and_cost():
    # kubecon batch-size stage 5: inference-perf requested 185.86 req/s; 11,151 requests completed at 114.314 req/s
    # (the file's successes throughput): 114.314 / 185.86 = 61.5 % < 90 %, every request within a loose SLO
    loose = ["--slo", "ttft=10s,tpot=1s"]
    stage5 = str(EV / "inference-perf" / "stage_5_lifecycle_metrics.json")
    d = cli_json("goodput", stage5, *loose)
    assert any(n.startswith("warning: the run FELL BEHIND its offered load: offered 185.9 req/s, served 114.3 "
                            "completed req/s (61.5% of offered, below 90%)") for n in d["notes"])
    cost = run_cli("cost", stage5, *loose, "--api", "OpenAI:gpt-4.1", "--utilization", "0.5", "--gpu", "H100",
                   "--gpu-usd-per-hour", "2", "--num-gpus", "1")
    assert "the run FELL BEHIND its offered load: offered 185.9 req/s, served 114.3 completed req/s" in cost.stdout
    assert "the server fell behind the run's offered load (see above)" in cost.stdout


def test_a_run_that_fell_behind_with_few_requests_good_is_not_called_an_upper_bound():
    # the same stage 5 under ttft=2s: 558 of 11,151 requests good (goodput's estimate from the file's percentiles)
    # over 97.547 s: 5.720 good req/s against 114.314 served. The SLO capacity is at most the served rate, the
    # ceiling; the goodput priced is 5.0% of it, so pricing at it may overstate the cost up to 114.314 / 5.720 = 20.0×
    # (it said "an upper bound on what one replica serves within the SLO … the cost per token may be understated")
    stage5 = str(EV / "inference-perf" / "stage_5_lifecycle_metrics.json")
    strict = ["--slo", "ttft=2s,tpot=100ms"]
    d = cli_json("goodput", stage5, *strict)
    assert (d["num_good"], d["num_completed"]) == (558, 11_151)
    cost = run_cli("cost", stage5, *strict, "--api", "OpenAI:gpt-4.1", "--utilization", "0.5", "--gpu", "H100",
                   "--gpu-usd-per-hour", "2", "--num-gpus", "1").stdout
    flat = " ".join(cost.split())
    assert ("one replica's SLO capacity is at most 114.3 req/s; the goodput priced, 5.72 good req/s (5.0% of it), is "
            "the good share of a queue that grew all run: a load the server keeps up with may serve more within the "
            "SLO, up to the ceiling (the self-hosted cost per token then overstated up to 20.0×), or less where the "
            "SLO is missed at any load") in flat
    assert "upper bound on what one replica serves" not in flat and "optimistic for self-hosting" not in flat
    assert ("capacity within the SLO is at most its served rate and may lie above or below the goodput priced, so the "
            "self-hosted costs and the break-even may be off either way") in flat
