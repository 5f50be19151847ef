"""`kvledger simulate` and `kvledger experiment` end to end: JSON keys for scripts, output files, refusals, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

import kvledger
from kvledger.cli.main import app
from kvledger.errors import InputError, KvLedgerError, UnknownNameError

runner = CliRunner()
BASE = ["simulate", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100", "--num-requests", "40"]


def test_json_has_the_fields_scripts_rely_on():
    res = runner.invoke(app, BASE + ["--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)["summary"]
    assert s["num_requests"] == 40 and s["num_finished"] + s["num_rejected"] == 40
    for k in ("num_preemptions", "throughput_output_tok_per_s", "prefix_cache_hit_rate"):
        assert k in s
    for k in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        assert set(s[k]) >= {"mean", "p50", "p90", "p99"}
        assert 0 < s[k]["p50"] <= s[k]["p99"] < 60  # seconds, not milliseconds
    engine = json.loads(res.output)["engine"]
    # the pool comes from the vLLM memory plan: Llama-3.1-8B on an H100 holds ~27K blocks of 16 tokens
    assert 20_000 < engine["num_gpu_blocks"] < 35_000 and engine["block_size"] == 16


def test_out_writes_four_files_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, BASE + ["--out", str(out), "--chrome-trace"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["records.parquet", "steps.parquet", "summary.json", "trace.json"]
    from kvledger.evidence import read_run

    recs = read_run(out / "records.parquet")
    assert recs.metadata.source == "simulator" and len(recs.records) == 40
    assert all(r.chunk_times_s is not None and r.chunk_times_s.size == r.num_output_tokens for r in recs.records)
    assert "traceEvents" in json.loads((out / "trace.json").read_text())
    import pyarrow.parquet as pq

    steps = pq.read_table(out / "steps.parquet").to_pylist()
    first = steps[0]
    assert (
        first["step"] == 0
        and first["num_scheduled_tokens"] == first["num_prefill_tokens"] + first["num_decode_seqs"] > 0
    )
    assert [s["step"] for s in steps] == list(range(len(steps)))  # one row per step (one replica)
    assert sum(b["num_tokens"] for b in first["batch"]) == first["num_scheduled_tokens"]
    again = runner.invoke(app, BASE + ["--out", str(out)])
    assert isinstance(again.exception, InputError) and "refusing to overwrite" in str(again.exception)
    assert runner.invoke(app, BASE + ["--out", str(out), "--force"]).exit_code == 0


def test_policy_presets_and_replicas():
    res = runner.invoke(app, BASE + ["--policy", "static", "--replicas", "2", "--router", "least_loaded", "--json"])
    assert res.exit_code == 0, res.output
    payload = json.loads(res.output)
    eng = payload["engine"]
    assert eng["batching"] == "static" and eng["enable_prefix_caching"] is False
    # the replica count and router are part of the run's description; the engine figures are per replica
    assert payload["replicas"] == 2 and payload["router"] == "least_loaded"
    table = runner.invoke(app, BASE + ["--replicas", "2", "--router", "least_loaded"], terminal_width=200)
    assert "engine: 2 replicas behind the least_loaded router, each with " in table.output
    one = json.loads(runner.invoke(app, BASE + ["--json"]).output)
    assert one["replicas"] == 1 and one["router"] is None


def test_bad_names_and_settings_are_clear_errors():
    res = runner.invoke(app, BASE + ["--trace", "azure-conversation"])
    assert isinstance(res.exception, UnknownNameError) and "azure-conv" in str(res.exception)
    res = runner.invoke(app, BASE + ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048"])
    assert isinstance(res.exception, InputError)
    assert "max_num_batched_tokens (2,048) is smaller than max_model_len" in str(res.exception)
    res = runner.invoke(app, BASE + ["--router", "random"])
    assert isinstance(res.exception, KvLedgerError) and "round_robin" in str(res.exception)


def test_console_entry_point_exits_2_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *BASE, "--replicas", "0"],
                          capture_output=True, text=True, timeout=120)
    assert (
        proc.returncode == 2
        and "--replicas 0 is out of range; allowed: [1, 4,096]" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_experiment_quick_table():
    res = runner.invoke(app, ["experiment", "batching", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    assert [r["output_cap_tokens"] for r in rows] == [32, 128, 512, 1536]
    # continuous batching's advantage grows with output-length spread (Anyscale)
    ratios = [r["continuous_over_static"] for r in rows]
    assert ratios[0] < ratios[-1] and all(x >= 1 for x in ratios)


def test_calibrated_without_a_table_is_a_short_error_grouped_by_model():
    res = runner.invoke(app, BASE + ["--step-cost", "calibrated"])
    assert isinstance(res.exception, InputError)
    msg = str(res.exception)
    lines = msg.splitlines()
    # one line per calibrated model (11 bundled), not one line of ~90 keys
    assert lines[0] == ("no calibrated step cost for meta-llama/Meta-Llama-3.1-8B on H100 (calibration GPU h100-80gb) "
                        "at TP 1. "
                        "Bundled calibrations (model — source: GPU and TPs):")
    assert "  meta-llama/Meta-Llama-3-8B — vidur: a100-80gb tp1,2,4,8" in lines
    assert "  facebook/opt-13b — distserve, distserve-vllm: a100-80gb tp1,2,4" in lines
    assert len(lines) == 13 and max(len(x) for x in lines) < 300
    # the example is the closest-named model's key, ready to paste
    assert "--step-cost calibrated:vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1" in lines[-1]


def test_a_calibration_can_be_picked_by_key():
    res = runner.invoke(app, BASE + ["--step-cost", "calibrated:vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1",
                                     "--json"])
    assert res.exit_code == 0, res.output
    sc = json.loads(res.output)["step_cost"]
    assert sc["name"] == "vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1"
    assert (
        "chosen by key: the step times measured for vidur:meta-llama/Meta-Llama-3-8B@a100-80gb/tp1 stand in for"
        in sc["source"]
    )
    # the short form takes GPU and TP from the simulation; for OPT-13B on an A100-80GB that is the table auto-pick uses
    res = runner.invoke(app, ["simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--num-requests", "20",
                              "--step-cost", "calibrated:facebook/opt-13b", "--json"])
    assert res.exit_code == 0, res.output
    sc = json.loads(res.output)["step_cost"]
    assert sc["name"] == "distserve-vllm:facebook/opt-13b@a100-80gb/tp1" and "chosen by key" not in sc["source"]
    res = runner.invoke(app, BASE + ["--step-cost", "calibrated:vidur:meta-llama/Meta-Llama-3-8B@h100-80gb/tp1"])
    assert isinstance(res.exception, InputError) and "no such calibration" in str(res.exception)


def test_roofline_recommends_calibrated_only_where_a_table_exists():
    res = runner.invoke(app, BASE + ["--json"])
    src = json.loads(res.output)["step_cost"]["source"]
    # the hint, then the measured GEMM curve that prices the H100's matmuls by default
    # the H100's bundled GPU profile is opt-in ("default": false in h100-sxm.json), so it is named, not used
    assert ("; uncalibrated (this GPU's bundled profile is opt-in, not the default: --gpu-profile bundled:h100-sxm "
            "prices with it; no model-scope measured tables for this model, GPU and TP); the measured GEMM efficiency"
            in src) and "--step-cost" not in src
    # both fractions by hand: no profile is loaded, and none is called opt-in (the RTX 4090's is the default)
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "rtx-4090", "--num-requests", "20",
                              "--max-model-len", "8192", "--achievable-flops-fraction", "0.6",
                              "--achievable-bandwidth-fraction", "0.7", "--json"])
    src = json.loads(res.output)["step_cost"]["source"]
    assert "uncalibrated (both fractions as given, in place of any GPU profile;" in src and "opt-in" not in src
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-2-7b-hf", "--gpu", "H100", "--num-requests", "20",
                              "--json"])
    src = json.loads(res.output)["step_cost"]["source"]
    assert "--step-cost calibrated (vidur:meta-llama/Llama-2-7b-hf@h100-80gb/tp1); the measured GEMM efficiency" in src


def test_experiment_prints_shares_as_percent():
    # kv-waste --quick (OPT-13B, A100-40GB): the JSON keeps fractions, the table prints them as %
    js = json.loads(runner.invoke(app, ["experiment", "kv-waste", "--quick", "--json"]).output)
    paged = next(r for r in js["rows"] if r["kv_allocation"] == "paged")
    assert 0 < paged["token_state_share"] <= 1
    out = runner.invoke(app, ["experiment", "kv-waste", "--quick"], env={"COLUMNS": "200"}).output
    row = next(line for line in out.splitlines() if line.strip().startswith("paged"))
    assert f"{paged['token_state_share']:.1%}" in row and f"{paged['kv_usage_mean']:.1%}" in row


def test_a_trace_without_arrival_times_names_the_cli_flags():
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "arxiv"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == ("trace 'arxiv' has no arrival times (only lengths): give --rate R (req/s) for "
                                  "Poisson "
                                  "arrivals drawn with --seed S (default 0), --rate inf to send every request at t = "
                                  "0, or "
                                  "--concurrency N for a closed loop (Python: load_trace(..., rate=R, seed=S))")
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "arxiv",
                              "--rate-scale", "2"])
    assert "; --rate-scale scales a trace's own arrival times, so it does not apply" in str(res.exception)


def test_token_times_on_request_change_no_figure():
    # without --record-token-times the ITL distribution comes from step gaps × counts (dynamics/itl_gaps.py):
    # the same percentiles and count bit for bit, and the same mean (both Σ gaps correctly rounded / count)
    lean = json.loads(runner.invoke(app, BASE + ["--json"]).output)["summary"]
    full = json.loads(runner.invoke(app, BASE + ["--record-token-times", "--json"]).output)["summary"]
    assert lean == full and lean["itl_s"]["count"] > 0


def test_a_bad_length_distribution_names_its_flag():
    # both flags take the same forms, so the parser's message alone ("fixed length must be … ≥ 1, got -5") did not say
    # which one was wrong
    from kvledger.errors import InputError as _InputError

    base = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--rate", "1", "--num-requests", "10"]
    with pytest.raises(_InputError, match=r"^--prompt-lengths: length distribution 'fixed:-5': '-5' is not a "
                                          r"positive token count"):
        runner.invoke(app, base + ["--prompt-lengths", "fixed:-5", "--output-lengths", "fixed:10"],
                      catch_exceptions=False)
    with pytest.raises(_InputError, match=r"^--output-lengths: length distribution 'lognormal:1000:-1': lognormal "
                                          r"sigma must be ≥ 0"):
        runner.invoke(app, base + ["--prompt-lengths", "fixed:100", "--output-lengths", "lognormal:1000:-1"],
                      catch_exceptions=False)


def test_step_cost_source_says_what_cpu_overhead_is_modelled():
    # the default roofline overlaps the engine's CPU time with the GPU step (async scheduling, CUDA graphs): the
    # source says it is hidden there, not priced, and not that none is modelled (fresh-user trial: "CPU overhead 0 s:
    # none modelled" read as if the CPU were ignored)
    src = json.loads(runner.invoke(app, BASE + ["--json"]).output)["step_cost"]["source"]
    assert ("(the engine's CPU time hidden under the GPU step: async scheduling overlaps it, max(GPU, CPU) = GPU "
            "where the CPU time is the shorter; --cpu-overhead prices one)") in src
    # synchronous (before 0.14): V1's CPU time in series, priced by the host term, and named as such
    src = json.loads(runner.invoke(app, BASE + ["--engine-version", "0.13.0", "--json"]).output)["step_cost"]["source"]
    assert "(no --cpu-overhead: V1's CPU time from the host term below)" in src
    src = json.loads(runner.invoke(app, BASE + ["--cpu-overhead", "2ms", "--json"]).output)["step_cost"]["source"]
    assert "(CPU overhead 2 ms)" in src


def test_a_run_that_kept_up_prints_no_saturation_throughput_band():
    # 400 requests of azure-conv at the trace's own arrivals (3.68 req/s) on one H100: the run keeps up (KV max 5.6%,
    # no queue growth), so its throughput is the offered load; a newcomer read "throughput at saturation 3.68 req/s"
    # as the GPU's capacity (goodput --simulate --target finds ~25 req/s). Overloaded at 60 req/s, the band stays.
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "400"]
    kept = " ".join(runner.invoke(app, args).output.split())
    assert "TTFT mean" in kept and "throughput at saturation" not in kept
    assert "no throughput band: the run kept up with its arrivals" in kept
    # the JSON says the same as the text: no throughput band, and why (band_coverage.throughput)
    d = json.loads(runner.invoke(app, args + ["--json"]).output)
    assert "throughput" not in d["error_bands"] and "kept up" in d["band_coverage"]["throughput"]
    loaded = " ".join(runner.invoke(app, args + ["--rate", "60"]).output.split())
    assert "throughput at saturation" in loaded and "no throughput band" not in loaded


def test_a_run_too_short_to_tell_is_not_reported_as_kept_up():
    # Llama-3.1-8B on one H100 at fixed 512/128 tokens. 200 requests at 70 req/s arrive in 3.2 s; the first finishes
    # 2.9 s after the first arrival, later than the median arrival (1.7 s), so the backlog cannot be read, and the
    # waiting queue did not grow past the check's thresholds (read off this run; at 80 req/s it does): the run
    # says it is too short to tell, with no band (neither a sustained latency nor the capacity). At 120 req/s the
    # waiting queue grows (prefill alone needs 512 × 2 × 8.0e9 FLOP = 8.2 TFLOP per request, 0.98 PFLOP/s at 120 req/s,
    # above the 0.69 PFLOP/s the roofline allows an H100 at 70 % of 989 TFLOP/s): overloaded, throughput band only.
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "fixed:512", "--output-lengths",
            "fixed:128", "--num-requests", "200", "--json"]
    d = json.loads(runner.invoke(app, [*args, "--rate", "70"]).output)
    short = d["too_short"]
    assert d["overload"] is None and d["error_bands"] == {} and d["band_coverage"]["throughput"] is None
    assert short["t_mid_s"] < short["first_finish_s"] and short["num_requests"] == 200
    # suggested: 4 × the arrival rate (199 gaps over the arrival span) × the time to the first finish, to a hundred
    rate = 199 / short["t_last_s"]
    assert short["suggested_num_requests"] == -(-4 * rate * short["first_finish_s"] // 100) * 100
    assert any(n.startswith("too short to tell whether the engine kept up") for n in d["notes"])
    text = " ".join(runner.invoke(app, args[:-1] + ["--rate", "70"]).output.split())
    assert "no throughput band: the run kept up" not in text and "error bands:" not in text
    assert f"--num-requests; at least {short['suggested_num_requests']:,} here" in text
    d = json.loads(runner.invoke(app, [*args, "--rate", "120"]).output)
    assert d["overload"]["queue"] == "waiting" and d["too_short"] is None and list(d["error_bands"]) == ["throughput"]
    assert d["overload"]["kind"] == "queue_growth"
    assert d["overload"]["backlog_last"] >= 1.5 * d["overload"]["backlog_mid"]


def test_unvalidated_figures_are_named_once_and_null_in_json():
    # The bands come from leave-one-deployment-out errors of mean TTFT, mean TPOT and saturation throughput
    # (error_bands.json): percentiles, ITL and E2E were never validated, so they get no band — said once in the text,
    # null with the reason in --json. 200 requests at the trace's own rate keep up: the latency means are banded; the
    # throughput is not (it is the offered load, not a capacity), null with that note in the JSON as in the text.
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "200"]
    out = " ".join(runner.invoke(app, args).output.split())
    assert out.count("have no validated band") == 1
    assert "banded: TTFT mean, TPOT mean only; the percentiles (p50/p90/p99), ITL and E2E" in out
    cov = json.loads(runner.invoke(app, args + ["--json"]).output)["band_coverage"]
    assert cov["banded"] == ["ttft_mean", "tpot_mean"] and "kept up" in cov["throughput"]
    assert "throughput" in cov["unbanded"] and cov["unbanded"]["throughput"] is None
    assert cov["unbanded"]["e2e_mean"] is None and cov["unbanded"]["ttft_p90"] is None
    # At 60 req/s the queue grows: a saturated run's latency measures how long it lasted, so only throughput is banded.
    sat = json.loads(runner.invoke(app, args + ["--rate", "60", "--json"]).output)["band_coverage"]
    assert sat["banded"] == ["throughput"] and sat["unbanded"]["ttft_mean"] is None
    assert "ttft_mean" not in cov["unbanded"] and "measured the errors of mean TTFT" in cov["reason"]


def test_rejected_requests_are_warned_about_first_and_none_finished_exits_1():
    # Llama-3.1-8B's max_model_len 131,072 (its config): a 200,000-token prompt is refused (a prompt ≥ max_model_len,
    # vLLM's rule), so every one of 10 is rejected: a warning leads, the throughput line says none finished (it printed
    # 0.00 req/s "over 2.0 s first arrival → last finish" with nothing finished), and the exit status is 1
    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "fixed:200000",
            "--output-lengths", "fixed:100", "--rate", "5", "--num-requests", "10"]
    res = runner.invoke(app, args)
    assert res.exit_code == 1
    text = " ".join(res.output.split())  # the test console wraps at 80 columns
    # the warning ends with what would serve them: 200,000 + 1 = 200,001 (the least --max-model-len that rejects
    # none) is past the 131,072 tokens the config supports, which vLLM (and plan, simulate) refuse to exceed without
    # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, so no --max-model-len is offered (it said "raise --max-model-len to at least
    # 200,100", which simulate then refused)
    fix = (" — 10 need more than the 131,072 tokens the model's config supports (the engine refuses a longer "
           "--max-model-len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, past what the model was trained for), so no "
           "--max-model-len it starts with serves them: use a model with a longer context, or a workload whose "
           "requests fit")
    assert text.startswith("warning: every request (10) was rejected (a prompt ≥ max_model_len; max_model_len 131,072 "
                           "tokens), as the engine refuses them: there is no latency or throughput to report" + fix
                           + " workload:")
    assert "throughput: none (no request finished)" in text
    res = runner.invoke(app, [*args, "--json"])
    doc = json.loads(res.stdout)
    assert res.exit_code == 1 and doc["summary"]["num_finished"] == 0
    # under --json the warning is the document's first note and a line on stderr (it was only num_rejected: 10, with
    # an empty stderr and exit 1)
    said = ("every request (10) was rejected (a prompt ≥ max_model_len; max_model_len 131,072 tokens), as the engine "
            "refuses them: there is no latency or throughput to report" + fix)
    assert doc["notes"][0] == said and res.stderr == f"warning: {said}\n"
    # the Python call's note names its parameter (max_model_len); the plan command line keeps its flag
    assert kvledger.simulate("meta-llama/Llama-3.1-8B", "H100", prompt_lengths="fixed:200000",
                             output_lengths="fixed:100", rate=5.0, num_requests=10).notes[0] == said.replace(
        "--max-model-len", "max_model_len")
    # one of two refused (prompts 100,000 and 200,000 tokens): warned, answered, exit 0
    from kvledger.report.simulate_view import rejected_warning

    said = rejected_warning({"num_rejected": 1, "num_requests": 2}, {"max_model_len": 131072})
    assert said == ("1 of 2 requests was rejected (a prompt ≥ max_model_len; max_model_len 131,072 tokens), as the "
                    "engine refuses them: the latencies and throughput are those of the others")
    sglang = rejected_warning({"num_rejected": 4, "num_requests": 4}, {"max_model_len": 4096, "batching": "sglang"})
    assert sglang.startswith("every request (4) was rejected (prompt + output > max_model_len, or a prompt ≥ SGLang's "
                             "max_req_len − 5; max_model_len 4,096 tokens)")
