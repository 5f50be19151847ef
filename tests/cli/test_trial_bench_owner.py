"""What an inference engineer with their own vLLM measurements (bench results at several rates, the server's log and
its Prometheus /metrics scrapes) tripped over on a first try, each pinned."""

from __future__ import annotations

import re
from pathlib import Path

from cli_run import refused, run_cli

# A vLLM OpenAI server's /metrics as `curl localhost:8000/metrics` saves it: the series vllm/v1/metrics/loggers.py
# (PrometheusStatLogger) exports, in the Prometheus text exposition format (# HELP, # TYPE, then samples whose labels
# hold commas). 5 metrics: 3 gauges, 1 counter, 1 histogram (its _bucket, _count and _sum samples are one metric).
_LABELS = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
SCRAPE = f"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{_LABELS}}} 12.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{_LABELS}}} 0.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{_LABELS}}} 0.0123
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{{_LABELS}}} 0.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.02",model_name="meta-llama/Llama-3.1-8B-Instruct"}} 3000.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"}} 3707.0
vllm:time_to_first_token_seconds_count{{{_LABELS}}} 3707.0
vllm:time_to_first_token_seconds_sum{{{_LABELS}}} 78.6
"""
NAMED = ("a Prometheus /metrics scrape (text exposition format; 5 vLLM metrics, e.g. vllm:num_requests_running, "
         "vllm:num_requests_waiting)")


def test_a_metrics_scrape_is_named_as_one_with_what_to_give_instead(tmp_path):
    # was: goodput/validate/calibrate called it "Markdown" (its first line starts with '#'), doctor "no vLLM log
    # lines … Is this a vLLM server log?": neither said what the file is nor what to give instead
    f = tmp_path / "metrics.txt"
    f.write_text(SCRAPE)
    for cmd in (["goodput", str(f), "--slo", "ttft=200ms"], ["validate", str(f)], ["calibrate", str(f)]):
        msg = refused(*cmd)
        assert f"It is {NAMED}, not a benchmark output" in msg, msg
        assert "Markdown" not in msg and "`vllm bench serve --save-result`" in msg
    # doctor reads a scrape from a file (tests/cli/test_doctor_scrape.py); from standard input it names it and says so
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    msg = str(CliRunner().invoke(app, ["doctor", "-"], input=SCRAPE).exception)
    assert f"this is {NAMED}, not a vLLM server log" in msg, msg
    assert "kvledger doctor metrics.txt" in msg and "no vLLM log lines" not in msg


def test_a_scrape_without_help_lines_is_not_read_as_a_csv_table(tmp_path):
    # the samples alone (a scrape filtered with grep -v '^#'): the labels' commas made it a "CSV" whose keys were the
    # first sample line; the metric count is the same 5
    f = tmp_path / "metrics.prom"
    f.write_text("\n".join(ln for ln in SCRAPE.splitlines() if not ln.startswith("#")) + "\n")
    assert f"It is {NAMED}" in refused("goodput", str(f), "--slo", "ttft=200ms")
    assert "a vLLM Prometheus /metrics scrape" in run_cli("doctor", str(f)).output  # read as one, not refused


def test_the_best_of_several_runs_from_percentiles_is_not_named_where_a_rival_may_pass_it():
    # InferenceX's three GLM-5-FP8 runs (vllm bench serve aggregates, no per-request arrays) under ttft ≤ 500 ms,
    # tpot ≤ 50 ms: only bounds. conc4: 40 requests, ttft median 265 ms ≤ 500 < p99 585 ms → ≥ 20 and ≤ 39 within,
    # tpot p99 26.45 ms ≤ 50 → ≥ 39; joint lower bound 40 − 20 − 1 = 19 good over 31.082 s = 0.611 good req/s, the
    # largest lower bound.
    # conc16: 160 requests, median ≤ SLO < p99 for both → 0 to 158 good over 50.746 s: up to 158/50.746 = 3.114;
    # conc64: up to 320 good over 123.55 s (640 ÷ 5.180 req/s) = 2.590. Was "the best of 3 runs: #2", a run that may
    # serve a fifth of what the others do
    data = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inferencex"
    files = [str(data / f"inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc{c}.json") for c in (16, 4, 64)]
    first = run_cli("goodput", *files, "--slo", "ttft=500ms,tpot=50ms").output.split("\nSLO: ")[0]
    first = re.sub(r"\s+", " ", first)
    assert first.startswith("answer: ≥0.611 good req/s (≥47.5% of 40 requests within the SLO) — zai-org/GLM-5-FP8, "
                            "#2 inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json: the largest lower bound of 3 "
                            "runs, not necessarily the best: from their percentiles, #1 may reach 3.114, #3 may reach "
                            "2.590 good req/s at most, more than its 0.611"), first
    assert "the best of 3 runs" not in first


def test_validate_names_the_gpu_profile_that_priced_the_run_as_simulate_does():
    # LLMServingSim's Qwen3-32B run at TP 2 on the RTX PRO 6000 (bundled public run) is priced by the GPU's bundled
    # profile, fitted on Llama-3.1-8B at TP 1. simulate says so on its "priced by" line; validate printed only
    # "priced by: gpu", a scope name a first-time user cannot read, and not which profile or what it was fitted on
    run = str(Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs"
              / "llmservingsim-rtxpro6000-qwen3-32b" / "vllm")
    out = " ".join(run_cli("validate", run, "--gpu", "RTX PRO 6000").output.split())  # lines wrapped at 250 columns
    assert ("at TP 2 step cost: roofline (priced by: gpu: GPU profile bundled:rtx-pro-6000.json (fitted on "
            "Llama-3.1-8B/vllm; vLLM 0.19.0); this run (Qwen/Qwen3-32B TP 2) is not what it was fitted on "
            "(meta-llama/Llama-3.1-8B (config of meta-llama/Meta-Llama-3.1-8B) TP 1): its fractions carry to "
            "it, its bands are no narrower than the cross-model ones; its source under the figures) "
            "predicted vs measured") in out, out[:900]


def test_a_band_carried_to_an_unmeasured_gpu_says_its_width_is_the_floor_not_its_figure():
    from cli_run import cli_json

    # the same workload on an L40S, a GPU none of the validation's deployments ran on: the SLO capacity's band is
    # the TPOT band carried to the rate. It said "…not on NVIDIA L40S: a floor for it, not a measurement", read
    # beside "SLO capacity 52.5 req/s" as if the capacity were a floor. No L40S run is in the data, so the band is
    # now the unmeasured-GPU one (leave one GPU out), said so; never "a floor for it". Its TPOT ends: error_bands.json
    # unmeasured_gpu uncalibrated/dense/vllm q10 −44.723% (the H100 held out, priced --gemm-efficiency carried),
    # q90 +11.751% (the measured band's, wider above)
    d = cli_json("goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "--prompt-lengths", "fixed:204",
                 "--output-lengths", "fixed:64", "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9")
    src = d["error_band"]["source"]
    assert "no measured run on NVIDIA L40S: the unmeasured-GPU band -44.7% … +11.8%" in src, src
    assert "a floor for it" not in src


def test_the_gpu_fits_first_line_does_not_pass_its_search_start_off_as_the_default():
    import io
    import json

    from rich.console import Console

    from kvledger.report.calibration_view import render_gpu_profile

    # calibrate --scope gpu --fit-frontend on two kubecon H100 stages (the bundled fixture): the search started at
    # FLOP 0.7 × the measured curve and bandwidth 0.8 (objective 0.178), while the uncalibrated default prices the
    # weight matmuls at 1.0 × that curve (objective 0.03555, printed at the end). The first line read "objective 0.178
    # at 0.7/0.8 → 0.032", two "uncalibrated" objectives 5× apart for one set of runs
    p = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "gpu_profiles"
                    / "h100_kubecon_fit_frontend.json").read_text())
    con = Console(file=io.StringIO(), width=250, record=True)
    render_gpu_profile(p, con, None, fit_frontend=True)
    lines = con.export_text().splitlines()
    assert lines[0] == ("GPU profile for NVIDIA H100 80GB SXM5: achievable FLOP/s fraction 1.000, bandwidth fraction "
                        "0.773 (objective 0.178 at the search's start 0.7/0.8, not the uncalibrated default, compared "
                        "below → 0.032; 96 replays)")
    default = "against the uncalibrated default: objective 0.032 fitted against 0.03555"
    assert any(ln.startswith(default) for ln in lines)


def test_the_block_override_help_says_where_a_v1_log_states_the_count():
    from cli_run import cli_json

    # a vLLM V1 start-up log has no 'num_gpu_blocks' line: it prints "GPU KV cache size: 476,016 tokens" (the
    # fixture's Llama-3.1-8B on an H100, vLLM 0.19.0), 476,016 ÷ 16 = 29,751 blocks, the "GPU blocks" doctor reads.
    # The help sent a user with the log in hand looking for a 'num_gpu_blocks' line that is not there
    log = str(Path(__file__).resolve().parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
              / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
    rows = {r["term"]: r for r in cli_json("doctor", log)["startup"]["rows"]}
    assert rows["GPU blocks"]["log_value"] == 476_016 // 16 == 29_751
    for cmd in ("validate", "calibrate"):
        text = " ".join(run_cli(cmd, "--help").output.split())
        assert ("the 'GPU blocks' `kvledger doctor LOG --verbose` reads from its start-up log (vLLM V1 prints 'GPU KV "
                "cache size: N tokens', N ÷ the block size; V0 '# GPU blocks: N')") in text, cmd
        assert "'num_gpu_blocks' your engine logged" not in text


def test_what_is_not_a_scrape_is_not_named_one():
    from kvledger.evidence.prometheus_text import scrape_summary

    assert scrape_summary(SCRAPE) == NAMED
    # two bare "name value" columns with nothing of Prometheus's own (no # TYPE, no {labels}, no vllm: names): a plain
    # table; a vLLM log and a Markdown note are not samples at all
    assert scrape_summary("request_rate 10\nmean_ttft_ms 41.0\n") is None
    log = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_startups_0_19" / "logs" / \
        "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"
    assert scrape_summary(log.read_text()) is None
    assert scrape_summary("# Results\n\nTTFT was 41 ms at 10 req/s.\n") is None


def test_each_deployments_best_from_percentiles_says_when_a_rival_may_pass_it():
    # the three GLM-5-FP8 runs beside llmperf's per-request Llama-2-70B run: two models, so each model's best is
    # named; GLM-5's is a lower bound that runs #1 and #3 may pass (same figures as above), Llama-2-70B's is exact
    data = Path(__file__).resolve().parents[1] / "evidence" / "data"
    files = [str(data / "inferencex" / f"inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc{c}.json")
             for c in (16, 4, 64)] + [str(data / "llmperf" / "leaderboard_individual_anyscale_70b.json")]
    out = re.sub(r"\s+", " ", run_cli("goodput", *files, "--slo", "ttft=500ms,tpot=50ms").output.split("\nSLO: ")[0])
    assert ("#2 inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json (the largest lower bound, from their "
            "percentiles, #1 may reach 3.114, #3 may reach 2.590 good req/s at most, more than its 0.611") in out, out
    assert out.endswith("#4 leaderboard_individual_anyscale_70b.json")


def test_an_assumed_engine_version_is_warned_of_above_the_figures():
    # AIPerf's export names no engine version and no --engine-version is given: the replay runs under the newest rules
    # read (async scheduling on), which on inference-sim-training's Llama-2-7B H100 sweep put the 20 req/s stage's mean
    # TPOT at 18.6 ms (+12%, inside its band) where 0.11.0's rules give 26.5 ms (+60%, outside): an assumption that
    # moves the verdict, said only as the 9th note under the table before
    run = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "aiperf" / "run1_profile_export.jsonl")
    out = " ".join(run_cli("validate", run, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100").output.split())
    warned = out.find("WARNING: engine version: neither the run's record nor --engine-version names it")
    assert 0 <= warned < out.find("predicted vs measured"), out[:600]
    assert "can move the replayed latency by more than its band: pass --engine-version" in out
