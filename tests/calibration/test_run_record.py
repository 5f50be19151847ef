"""validate/calibrate read everything a run recorded (TP, blocks, block size, async scheduling...), refuse DP/EP runs,
drop failed requests with a count, and compare aggregate-only sweeps by rate."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.replay import load_measured, measured_from_records
from kvledger.calibration.sweep import Stage, stage_workload
from kvledger.calibration.validate import knee_rate, validate_sweep
from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.records import RequestRecord, RunMetadata, RunRecords

MODEL = "meta-llama/Llama-3.1-8B"


def _run_dir(tmp_path, parallel: dict, kv: dict | None = None):
    reqs = [{"request_id": f"r{i}", "input_toks": 200, "output_toks": 8, "queued_ts": 1.0 + 0.5 * i,
             "first_token_ts": 1.05 + 0.5 * i, "last_token_ts": 1.2 + 0.5 * i} for i in range(6)]
    (tmp_path / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    meta = {"model": MODEL, "vllm_version": "0.19.0",
            "engine_kwargs": {"max_model_len": 4096, "max_num_seqs": 64, "max_num_batched_tokens": 2048},
            "resolved_config": {"parallel_config": parallel,
                                "scheduler_config": {"async_scheduling": True, "enable_chunked_prefill": True},
                                "cache_config": {"block_size": 32, "num_gpu_blocks": 5000,
                                                 "enable_prefix_caching": False}}}
    if kv is not None:
        meta["kv_cache"] = kv
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    return tmp_path / "requests.jsonl"


def test_a_tp2_run_is_replayed_at_tp2_with_its_own_blocks_and_async_scheduling(tmp_path):
    # the record: TP 2, 5,000 blocks of 32 tokens, async scheduling on, prefix caching off. Replaying at the tool's
    # defaults (TP 1, blocks from the memory plan, block 16, async off for vLLM 0.19) would be another engine.
    path = _run_dir(tmp_path, {"tensor_parallel_size": 2, "data_parallel_size": 1, "pipeline_parallel_size": 1})
    setup = engine_for(SimRequestArgs(model=MODEL, gpu="H100", tp=None), load_measured(str(path)))
    cfg = setup.config
    assert setup.tp == 2 and setup.plan.settings.tp == 2
    assert (cfg.num_gpu_blocks, cfg.block_size, cfg.async_scheduling) == (5000, 32, True)
    assert (cfg.enable_prefix_caching, cfg.enable_chunked_prefill, cfg.max_num_seqs) == (False, True, 64)
    # the same through the CLI, no --tp flag: the JSON says TP 2 and the note names where it came from
    res = CliRunner().invoke(app, ["validate", str(path), "--model", MODEL, "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["tp"] == 2 and out["engine"]["num_gpu_blocks"] == 5000 and out["scope"] in ("uncalibrated", "gpu")
    assert any("tp 2" in n and "num_gpu_blocks 5000 (replayed as --num-gpu-blocks-override)" in n for n in out["notes"])
    # a flag on the command line wins over the record
    assert engine_for(SimRequestArgs(model=MODEL, gpu="H100", tp=1), load_measured(str(path))).tp == 1


def test_a_data_parallel_expert_parallel_run_is_refused(tmp_path):
    path = _run_dir(tmp_path, {"tensor_parallel_size": 1, "data_parallel_size": 2, "enable_expert_parallel": True})
    with pytest.raises(InputError, match="data parallel 2 with expert parallelism"):
        engine_for(SimRequestArgs(model=MODEL, gpu="H100", tp=None), load_measured(str(path)))
    res = CliRunner().invoke(app, ["validate", str(path), "--model", MODEL, "--gpu", "H100"])
    assert isinstance(res.exception, InputError) and "data parallel 2" in str(res.exception)


def test_failed_requests_are_dropped_and_counted():
    # 5 records, 2 failed (no first token): 3 replayed, 2 counted as dropped
    recs = [RequestRecord(f"r{i}", float(i), 100, 10, first_token_s=i + 0.1, finish_s=i + 0.5) for i in range(3)]
    recs += [RequestRecord(f"f{i}", 3.0 + i, 100, 0, error="timeout") for i in range(2)]
    run = measured_from_records(RunRecords(recs, RunMetadata("x", "x")), "x")
    assert len(run.requests) == 3 and run.num_dropped == 2
    # a stage of 10 requests with 4 failed at the client: the replay sends the 6 successes over the same 30 s
    st = Stage("s", 0.33, 10, 30.0, {}, [(0.0, 100.0), (1.0, 100.0)], [(0.0, 10.0), (1.0, 10.0)], 0.2, 2.0, 4, 0.33)
    w = stage_workload(st, seed=0)
    assert len(w) == 6 and w[-1].arrival_s == pytest.approx(30.0)


def test_knee_by_hand():
    # TTFT 0.1, 0.2, 1.2 s at 1, 2, 3 req/s; threshold 0.5 s is crossed between 2 and 3: 2 + (0.5−0.2)/(1.2−0.2) = 2.3
    assert knee_rate([1.0, 2.0, 3.0], [0.1, 0.2, 1.2], 0.5) == pytest.approx(2.3)
    assert knee_rate([1.0, 2.0], [0.1, 0.2], 0.5) is None


def _sglang_line(rate: float, ttft_ms: float, tpot_ms: float) -> dict:
    n = 40
    return {"backend": "sglang", "dataset_name": "random", "request_rate": rate, "max_concurrency": None,
            "completed": n, "duration": n / rate + 2.0, "total_input_tokens": 512 * n, "total_output_tokens": 64 * n,
            "request_throughput": rate, "output_throughput": 64 * rate, "random_input_len": 512,
            "random_output_len": 64, "random_range_ratio": 1.0,
            "mean_ttft_ms": ttft_ms, "median_ttft_ms": ttft_ms, "p99_ttft_ms": 2 * ttft_ms,
            "mean_tpot_ms": tpot_ms, "median_tpot_ms": tpot_ms, "p99_tpot_ms": 1.5 * tpot_ms,
            "mean_e2e_latency_ms": ttft_ms + 63 * tpot_ms, "median_e2e_latency_ms": ttft_ms + 63 * tpot_ms,
            "p99_e2e_latency_ms": 2 * (ttft_ms + 63 * tpot_ms)}


def test_an_aggregate_only_sglang_sweep_is_compared_by_rate_with_both_knees(tmp_path):
    f = tmp_path / "sglang_sweep.jsonl"
    lines = [_sglang_line(1.0, 40.0, 8.0), _sglang_line(4.0, 60.0, 10.0), _sglang_line(16.0, 900.0, 14.0)]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048))
    assert out.rates == [1.0, 4.0, 16.0] and len(out.runs) == 3
    # measured knee: threshold 5 × 40 ms = 200 ms, crossed between 4 (60 ms) and 16 req/s (900 ms):
    # 4 + (200 − 60)/(900 − 60) × 12 = 6.0 req/s
    assert out.measured.knee_req_per_s == pytest.approx(6.0)
    first = {r.metric: r for r in out.runs[0].comparison.rows}
    assert first["TTFT mean"].measured == pytest.approx(0.040) and first["TPOT mean"].measured == 0.008
    assert first["TTFT mean"].predicted > 0 and out.runs[0].num_requests == 40


def test_a_model_scope_profile_on_another_tp_is_warned_about(tmp_path):
    # a model-scope profile fitted at TP 1 applied to the TP 2 run: its step times do not carry — validate warns
    from kvledger.accounting.calibration_profile import PROFILE_KIND

    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"kind": PROFILE_KIND, "version": 1, "model": MODEL, "gpu": "NVIDIA H100 80GB SXM5",
                                "tp": 1, "step_cost": {"fixed_s": 0.005, "prefill_token_s": 5e-5,
                                                       "prefill_pair_s": 1e-9, "decode_seq_s": 1e-4,
                                                       "decode_kv_token_s": 1e-7, "cpu_overhead_s": 0.0,
                                                       "overlap": False}}))
    path = _run_dir(tmp_path, {"tensor_parallel_size": 2})
    from kvledger.calibration.validate import validate_file

    out = validate_file(str(path), SimRequestArgs(model=MODEL, gpu="H100", tp=None, step_cost=str(prof)))
    assert out.scope == "model" and out.tp == 2
    assert out.notes[0].startswith("WARNING: a model-scope calibration") and "TP 1" in out.notes[0]
    assert "do not carry to another TP (no error band" in out.notes[0]  # names what differs: the TP, not "model or TP"
    # said once: the profile's own "was fitted on another TP" warning, which simulate prints, is not repeated
    assert sum("another TP" in n for n in out.notes) == 1
    # --json's step_cost says the scope that priced it as the text does ("priced by: model: …"), and the mismatch
    assert out.step_cost["priced_by"] == ("model: calibrated profile p.json (fitted on another TP; TP: fitted 1, "
                                          "simulated 2)")


def test_calibrate_scope_gpu_from_the_cli_takes_the_model_from_the_record(tmp_path):
    # no --model: the record names it; the run's TP 2 is used; the profile is a GPU profile for the H100
    path = _run_dir(tmp_path, {"tensor_parallel_size": 2})
    out = tmp_path / "h100.json"
    res = CliRunner().invoke(app, ["calibrate", str(path), "--gpu", "H100", "--scope", "gpu", "--out", str(out),
                                   "--json"])
    assert res.exit_code == 0, (res.output, res.exception)
    prof = json.loads(out.read_text())
    assert prof["kind"] == "kvledger-gpu-profile" and prof["gpu"].startswith("NVIDIA H100")
    assert prof["runs"][0]["tp"] == 2 and 0 < prof["flops_fraction"] <= 1 and 0 < prof["bandwidth_fraction"] <= 1
    assert prof["fit"]["objective"] <= prof["fit"]["objective_start"]


def test_an_sglang_benchmark_is_replayed_as_sglang_and_a_zero_range_ratio_draws_lengths_from_one(tmp_path):
    # bench_serving's "backend": "sglang" names the server measured: the replay takes SGLang's policy (its scheduler
    # and memory plan), as the note says; random_range_ratio 0.0 is SGLang's "lengths uniform in 1 … random_input_len"
    # (max(int(len × 0.0), 1) … len), not a missing ratio that would fix every length at the mean
    from kvledger.calibration.aggregate_stage import aggregate_stage, closed_loop_users
    from kvledger.evidence.read import read_runs

    line = dict(_sglang_line(2.0, 40.0, 8.0), random_range_ratio=0.0)
    f = tmp_path / "sglang_zero_ratio.jsonl"
    f.write_text(json.dumps(line) + "\n" + json.dumps(dict(line, request_rate=4.0)) + "\n")
    run = read_runs(str(f))[0]
    st = aggregate_stage(run, "rate 2", closed_loop_users(run, None))
    assert st.prompt_quantiles == [(0.0, 1.0), (1.0, 512.0)] and st.output_quantiles == [(0.0, 1.0), (1.0, 64.0)]
    assert st.backend == "sglang"
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048))
    notes = out.runs[0].notes
    assert any("from the run's own record" in n and "policy sglang" in n for n in notes)
    assert any("SGLang memory plan" in n for n in notes)
    # a flag on the command line wins: --policy vllm replays it under vLLM's plan
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048,
                                                  policy="vllm"))
    assert not any("SGLang memory plan" in n for n in out.runs[0].notes)


def test_validate_and_calibrate_take_policy_and_mem_fraction_static_as_simulate_does(tmp_path):
    f = tmp_path / "sglang_sweep.jsonl"
    f.write_text("".join(json.dumps(_sglang_line(r, 40.0, 8.0)) + "\n" for r in (1.0, 4.0)))
    res = CliRunner().invoke(app, ["validate", str(f), "--gpu", "H100", "--model", MODEL, "--max-model-len", "2048",
                                   "--mem-fraction-static", "0.8", "--json"])
    assert res.exit_code == 0, res.output
    notes = " ".join(n for run in json.loads(res.output)["runs"] for n in run["notes"])
    assert "mem_fraction_static 0.8" in notes  # SGLang's plan with the fraction given (the record chose SGLang)
    res = CliRunner().invoke(app, ["validate", str(f), "--gpu", "H100", "--model", MODEL, "--policy", "vllm",
                                   "--mem-fraction-static", "0.8"])
    from kvledger.errors import InputError  # the entry point turns it into one paragraph and exit 2

    assert isinstance(res.exception, InputError) and "--mem-fraction-static" in str(res.exception)  # vLLM: refused
    assert "--policy" in CliRunner().invoke(app, ["calibrate", "--help"]).output


def test_a_sweep_with_medians_only_reads_its_knee_on_the_median_ttft(tmp_path):
    # older SGLang bench_serving lines keep medians only: the knee is read on the median TTFT, the rule says so;
    # medians 40, 60, 900 ms at 1, 4, 16 req/s: threshold 5 × 40 = 200 ms, 4 + (200 − 60)/(900 − 60) × 12 = 6.0 req/s
    lines = []
    for rate, ttft in ((1.0, 40.0), (4.0, 60.0), (16.0, 900.0)):
        d = _sglang_line(rate, ttft, 8.0)
        lines.append({k: v for k, v in d.items() if not k.startswith("mean_")})
    f = tmp_path / "medians.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048))
    assert out.measured.knee_req_per_s == pytest.approx(6.0)
    assert out.knee_rule.startswith("median TTFT > 5 × the measured median TTFT") and "no mean TTFT" in out.knee_rule


def test_a_sweep_with_medians_only_shows_and_compares_the_medians(tmp_path):
    # the shape of SGLang bench_serving lines that keep medians only (no mean TTFT, no TPOT at all, a median ITL):
    # the table's latency columns are then the median TTFT and the median ITL, each against the simulated median
    from rich.console import Console

    from kvledger.report.sweep_view import render_sweep

    lines = []
    for rate, ttft, itl in ((1.0, 40.0, 8.0), (4.0, 60.0, 9.0), (16.0, 900.0, 12.0)):
        d = {k: v for k, v in _sglang_line(rate, ttft, itl).items() if not k.startswith("mean_") and "tpot" not in k}
        lines.append({**d, "mean_e2e_latency_ms": d["median_e2e_latency_ms"], "median_itl_ms": itl})
    f = tmp_path / "medians.jsonl"
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048))
    assert out.compared_latency == ["TTFT p50", "ITL p50"]
    # the medians as the lines state them (ms → s); no stage states a mean TTFT
    assert out.measured.ttft_median_s == pytest.approx([0.040, 0.060, 0.900])
    assert out.measured.ttft_mean_s == [None, None, None] and out.predicted.ttft_mean_s == [None, None, None]
    first = {r.metric: r for r in out.runs[0].comparison.rows}
    assert "TTFT mean" not in first and "TPOT mean" not in first
    itl = first["ITL p50"]
    assert itl.measured == pytest.approx(0.008) and itl.predicted > 0
    assert itl.rel_error == pytest.approx(itl.predicted / 0.008 - 1)
    assert out.predicted.ttft_median_s[0] == first["TTFT p50"].predicted
    d = out.to_dict()
    assert d["compared_latency"] == ["TTFT p50", "ITL p50"] and d["measured"]["ttft_median_s"][2] == 0.9

    con = Console(record=True, width=300)
    render_sweep(out, con)
    text = con.export_text()
    assert "TTFT median meas." in text and "ITL median meas." in text and "TTFT mean meas." not in text
    row = next(line for line in text.splitlines() if "40.0 ms" in line)  # the 1 req/s stage: 40.0 ms, then 8.0 ms
    assert "8.0 ms" in row and f"{first['TTFT p50'].rel_error * 100:+.1f}%" in row
    # the rate column: 4 significant figures each (report/validation_figures.fmt_rate)
    assert [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")] == \
        ["1.000", "4.000", "16.00"]
    assert "no band on TTFT median or ITL median" in text


def test_a_sweep_with_means_shows_the_means(tmp_path):
    f = tmp_path / "means.jsonl"
    f.write_text("".join(json.dumps(_sglang_line(r, 40.0, 8.0)) + "\n" for r in (1.0, 4.0)))
    out = validate_sweep([str(f)], SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048))
    # the lines state means (and medians): the table shows the means, whose bands exist
    assert out.compared_latency == ["TTFT mean", "TPOT mean"]
    assert out.measured.ttft_mean_s == pytest.approx([0.040, 0.040])
    assert out.measured.ttft_median_s == pytest.approx([0.040, 0.040])


def test_an_llmservingsim_run_is_named_by_its_folders_whole_names(tmp_path):
    # LLMServingSim keeps <model>/vllm/requests.jsonl; a model folder's dots are no suffix: Llama-3.1-8B, not Llama-3
    run = tmp_path / "Llama-3.1-8B" / "vllm"
    run.mkdir(parents=True)
    _run_dir(run, {"tensor_parallel_size": 1, "data_parallel_size": 1, "pipeline_parallel_size": 1})
    for given in (tmp_path / "Llama-3.1-8B", run, run / "requests.jsonl"):  # each form the reader takes
        assert load_measured(str(given)).label == "Llama-3.1-8B/vllm"
    from kvledger.names import file_labels

    assert file_labels([str(tmp_path / "Llama-3.1-8B"), str(run / "requests.jsonl")]) == ["Llama-3.1-8B", "requests"]


def test_validate_names_the_recorded_keys_the_replay_does_not_use(tmp_path):
    # meta.json records more than the replay reads: the reader keeps the resolved scheduler, parallel and cache
    # sections, model_config's quantization, dtype and enforce_eager and speculative_config (not load_config), and the
    # replay reads the model, the vLLM version, the engine_kwargs, the GPU's name and count, and of kv_cache
    # block_size, num_gpu_blocks, gpu_memory_utilization and enable_prefix_caching (run_record._SOURCES); the rest is
    # named, grouped, in one note
    from kvledger.calibration.run_record import recorded_settings
    from kvledger.evidence.llmservingsim import read_llmservingsim

    path = _run_dir(tmp_path, {"tensor_parallel_size": 1}, kv={"block_size": 32, "num_cpu_blocks": 0,
                                                               "num_kv_tokens": 160_000})
    meta = json.loads((tmp_path / "meta.json").read_text())
    meta["resolved_config"]["load_config"] = {"load_format": "auto"}
    meta.update(schema_version=1, tick_seconds=1.0, hardware={"device_name": "NVIDIA H100 80GB HBM3",
                                                              "device_count": 1, "cuda_version": "12.8"})
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    extra = read_llmservingsim(path).metadata.extra
    assert extra["record_keys"][:3] == ["model", "vllm_version", "engine_kwargs"]  # as meta.json orders them
    unused = (f"recorded in {tmp_path / 'meta.json'}, not used by the replay: schema_version, tick_seconds; "
              "resolved_config: load_config; kv_cache: num_cpu_blocks, num_kv_tokens; hardware: cuda_version")
    assert recorded_settings(extra).unused == [unused]
    res = CliRunner().invoke(app, ["validate", str(path), "--model", MODEL, "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    assert [n for n in json.loads(res.output)["notes"] if "not used by the replay" in n] == [unused]
    # a record that holds only what the replay reads: no note
    assert recorded_settings({"record_keys": ["model", "vllm_version", "kv_cache.block_size"]}).unused == []
