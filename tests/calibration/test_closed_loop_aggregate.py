"""Aggregate-only runs sent at request_rate inf under a client cap (`vllm bench serve --max-concurrency N`, SGLang
`bench_serving --max-concurrency N`, AIPerf `--concurrency N`) are replayed as a closed loop of N clients and compared
on the aggregates the file holds; without a known cap they are refused with what to pass.

The vLLM file is the 0.25.1 `vllm bench serve --save-result` fixture of er0080/vllm-benchmarking
(packages/protocol/tests/fixtures/bench_serve_v0.25.1.json: facebook/opt-125m, 8 random prompts of 32 in / 16 out,
request_rate inf, max_concurrency 2), its values verbatim."""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.replay import replay
from kvledger.calibration.targets import load_targets
from kvledger.calibration.validate import validate_file, validate_sweep
from kvledger.errors import FormatError, InputError

MODEL = "meta-llama/Llama-3.1-8B"
ARGS = SimRequestArgs(model=MODEL, gpu="H100", tp=None, max_model_len=2048)

VLLM_0251 = {
    "date": "20260816-160853", "endpoint_type": "vllm", "backend": "vllm", "label": None,
    "model_id": "facebook/opt-125m", "tokenizer_id": "facebook/opt-125m", "num_prompts": 8, "request_rate": "inf",
    "burstiness": 1.0, "max_concurrency": 2, "duration": 1.5441598830002476, "completed": 8, "failed": 0,
    "total_input_tokens": 256, "total_output_tokens": 128, "request_throughput": 5.180810671273421,
    "request_goodput": None, "output_throughput": 82.89297074037474, "total_token_throughput": 248.6789122211242,
    "max_output_tokens_per_s": 85.0, "max_concurrent_requests": 6, "rtfx": 0.0,
    "mean_ttft_ms": 215.53594200008774, "median_ttft_ms": 55.68139649994919, "std_ttft_ms": 292.06819504885306,
    "p99_ttft_ms": 734.4049174101428, "mean_tpot_ms": 11.265828258331112, "median_tpot_ms": 11.20450286665194,
    "std_tpot_ms": 0.6175290686013256, "p99_tpot_ms": 11.979541883350674, "mean_itl_ms": 11.265836941667354,
    "median_itl_ms": 10.492878499917424, "std_itl_ms": 3.5142929948720183, "p99_itl_ms": 29.815922519960626,
}


def _vllm_file(tmp_path, **changes) -> str:
    f = tmp_path / "bench_serve_v0.25.1.json"
    f.write_text(json.dumps({**VLLM_0251, **changes}))
    return str(f)


def _in_flight(records, t: float) -> int:
    """Requests in flight at ``t``: sent at or before it, not finished by it."""
    return sum(1 for r in records if r.arrival_s <= t < r.finish_s)


def test_a_max_concurrency_run_is_replayed_as_a_closed_loop_of_its_clients(tmp_path):
    (t,) = load_targets(_vllm_file(tmp_path))
    run, st = t.run, t.stage
    assert run.label == "bench_serve_v0.25.1 @ 2 clients"
    assert run.concurrency == 2 and st.client_users == 2  # the file's max_concurrency
    assert len(run.requests) == 8  # all 8 completed requests, none failed
    # lengths fixed at the file's means: 256 input / 8 = 32 and 128 output / 8 = 16 tokens a request
    assert {(r.num_prompt_tokens, r.num_output_tokens) for r in run.requests} == {(32, 16)}
    # the throughputs measured are the file's own, not re-derived
    assert st.requests_per_s == 5.180810671273421 and st.output_tokens_per_s == 82.89297074037474
    assert "closed loop of 2 clients" in run.measured.metadata.extra["client_loop"]
    assert "the file's max_concurrency 2" in run.measured.metadata.extra["client_loop"]
    assert run.measured.metadata.model == "facebook/opt-125m"  # the file's model_id, for a run without --model

    setup = engine_for(ARGS, run, None)
    recs = replay(run, setup.config, setup.cost).records.records
    assert len(recs) == 8 and all(r.ok for r in recs)
    sends = sorted(r.arrival_s for r in recs)
    # two clients start at 0; each later request is sent when an earlier one finishes (no think time)
    assert sends[:2] == [0.0, 0.0]
    finishes = sorted(r.finish_s for r in recs)
    assert sends[2:] == pytest.approx(finishes[:6])
    # never more than 2 in flight, and exactly 2 at every send (while requests remain to be sent)
    ends = sorted({r.arrival_s for r in recs} | {r.finish_s for r in recs})
    assert max(_in_flight(recs, x) for x in ends) == 2
    assert all(_in_flight(recs, s) == 2 for s in sends)


def test_the_closed_loop_is_compared_on_the_aggregates_the_file_holds(tmp_path):
    out = validate_file(_vllm_file(tmp_path), ARGS)
    rows = {r.metric: r for r in out.comparison.rows}
    # measured figures as the file states them, ms → s
    assert rows["throughput"].measured == 5.180810671273421
    assert rows["output throughput"].measured == 82.89297074037474
    assert rows["TTFT mean"].measured == pytest.approx(0.21553594200008774)
    assert rows["TTFT p50"].measured == pytest.approx(0.05568139649994919)
    assert rows["TPOT p99"].measured == pytest.approx(0.011979541883350674)
    assert rows["ITL mean"].measured == pytest.approx(0.011265836941667354)
    # vLLM's default --percentile-metrics (ttft,tpot,itl) keeps no E2E: no E2E row
    assert not any(m.startswith("E2E") for m in rows)
    assert any(n.startswith("aggregates only: the replay is a closed loop of 2 clients") for n in out.notes)
    assert out.num_requests == 8 and out.comparison.num_predicted == 8
    # no band: the bands were measured on open-loop stages
    assert "closed loop of 2 clients" in out.error_bands.latency_note


def test_the_flag_gives_the_clients_when_the_file_states_none_and_the_file_wins_when_it_does(tmp_path):
    (t,) = load_targets(_vllm_file(tmp_path, max_concurrency=None), client_concurrency=3)
    assert t.run.concurrency == 3 and "(--client-concurrency 3)" in t.run.measured.metadata.extra["client_loop"]
    (t,) = load_targets(_vllm_file(tmp_path), client_concurrency=3)
    assert t.run.concurrency == 2
    assert "the file's max_concurrency 2; --client-concurrency 3 not used" in t.run.measured.metadata.extra[
        "client_loop"]


def test_a_run_at_inf_with_no_known_cap_is_refused_with_what_to_pass(tmp_path):
    with pytest.raises(FormatError) as err:
        load_targets(_vllm_file(tmp_path, max_concurrency=None))
    msg = str(err.value)
    assert "request_rate inf" in msg and "states no client cap on requests in flight (max_concurrency)" in msg
    assert "pass --client-concurrency N" in msg and "--max-concurrency N" in msg and "AIPerf `--concurrency N`" in msg
    assert "N = its 8 requests" in msg  # completed 8 + failed 0: an uncapped client sent them all at once
    assert "needs a finite request rate" not in msg
    with pytest.raises(InputError, match="--client-concurrency must be a whole number ≥ 1"):
        load_targets(_vllm_file(tmp_path, max_concurrency=None), client_concurrency=0)


def test_missing_counts_are_named(tmp_path):
    # vLLM 0.25.1's all-failed fixture: completed 0, failed 8
    with pytest.raises(FormatError, match=r"no request completed \(8 failed\)"):
        load_targets(_vllm_file(tmp_path, completed=0, failed=8, total_input_tokens=0, total_output_tokens=0))
    with pytest.raises(FormatError, match="states no input token total"):
        load_targets(_vllm_file(tmp_path, total_input_tokens=0))


def _sglang_line(max_concurrency: int) -> dict:
    """An SGLang bench_serving JSONL line at request_rate inf (its file's `Infinity` literal)."""
    return {"backend": "sglang", "dataset_name": "random", "request_rate": float("inf"),
            "max_concurrency": max_concurrency, "completed": 20, "duration": 2.0, "total_input_tokens": 512 * 20,
            "total_output_tokens": 64 * 20, "request_throughput": 10.0, "output_throughput": 640.0,
            "random_input_len": 512, "random_output_len": 64, "random_range_ratio": 1.0,
            "mean_ttft_ms": 40.0, "median_ttft_ms": 38.0, "p99_ttft_ms": 80.0, "mean_tpot_ms": 8.0,
            "median_tpot_ms": 8.0, "p99_tpot_ms": 12.0, "mean_e2e_latency_ms": 544.0,
            "median_e2e_latency_ms": 540.0, "p99_e2e_latency_ms": 800.0, "concurrency": 3.6}


def test_sglang_runs_at_inf_are_closed_loops_and_not_a_rate_sweep(tmp_path):
    one = tmp_path / "c4.jsonl"
    one.write_text(json.dumps(_sglang_line(4)) + "\n")
    out = validate_file(str(one), ARGS)
    assert out.run == "c4 @ 4 clients" and out.num_requests == 20
    rows = {r.metric: r for r in out.comparison.rows}
    assert rows["E2E p99"].measured == pytest.approx(0.8) and rows["throughput"].measured == 10.0
    # SGLang's "concurrency" is the mean in flight, not the cap: the cap is max_concurrency 4
    assert any("the file's max_concurrency 4" in n for n in out.notes)
    # two levels are a sweep over clients: ordered by them, the knee read on them (both measured at TTFT mean 40 ms:
    # no measured stage passes 5 × 40 ms, so no measured knee), no request rate
    both = tmp_path / "levels.jsonl"
    both.write_text(json.dumps(_sglang_line(16)) + "\n" + json.dumps(_sglang_line(4)) + "\n")
    sw = validate_sweep([str(both)], ARGS)
    assert sw.axis == "concurrency" and sw.clients == [4, 16] and sw.rates == [] and sw.levels == [4.0, 16.0]
    assert [r.run.rsplit("@ ", 1)[1] for r in sw.runs] == ["4 clients", "16 clients"]
    assert sw.measured.knee_clients is None and sw.measured.knee_req_per_s is None
    assert sw.knee_rule == "mean TTFT > 5 × the measured mean TTFT at the fewest clients, interpolated"
    assert sw.measured.saturation_throughput_req_per_s == 10.0  # the files' request_throughput, both levels
    # no level held more requests than the engine's max_num_seqs: no capacity to band
    assert sw.bands.saturation_throughput is None
    assert sw.bands.throughput_note.startswith("no stage was past saturation")
    d = sw.to_dict()
    assert d["axis"] == "concurrency" and d["clients"] == [4, 16] and d["at_knee_rates"] == []


def test_run_n_validates_one_closed_loop_of_a_file_of_several(tmp_path):
    # two levels in one JSONL (lines 1 and 2: max_concurrency 16, then 4): alone they are a sweep over clients;
    # --run 1 is the second line in file order (4 clients), whatever the sort by clients
    both = tmp_path / "levels.jsonl"
    both.write_text(json.dumps(_sglang_line(16)) + "\n" + json.dumps(_sglang_line(4)) + "\n")
    assert validate_file(str(both), ARGS).clients == [4, 16]
    out = validate_file(str(both), ARGS, run=1)
    assert out.run.endswith("@ 4 clients") and "[line 2]" in out.run and out.num_requests == 20
    with pytest.raises(InputError, match=r"--run 2: .* holds 2 run\(s\), numbered from 0"):
        validate_file(str(both), ARGS, run=2)


def test_a_finite_rate_under_a_cap_is_replayed_paced(tmp_path):
    # `vllm bench serve --request-rate 4 --max-concurrency 2`: each request's task starts at its time at 4 req/s and
    # waits for one of 2 slots, so a request is sent at the later of its own time and the first finish freeing a slot
    (t,) = load_targets(_vllm_file(tmp_path, request_rate=4.0))
    run, st = t.run, t.stage
    assert run.label == "bench_serve_v0.25.1 @ 4 req/s, ≤ 2 in flight"
    assert run.concurrency == 2 and run.paced and st.requested_rate == 4.0
    assert st.send_duration_s == pytest.approx(8 / 4.0)  # (completed 8 + failed 0) / 4 req/s: the schedule
    assert "replayed paced" in run.measured.metadata.extra["client_loop"]
    setup = engine_for(ARGS, run, None)
    recs = sorted(replay(run, setup.config, setup.cost).records.records, key=lambda r: r.arrival_s)
    due = sorted(r.arrival_s for r in run.requests)
    finishes = {round(r.finish_s, 12) for r in recs}
    # never before its time; sent later only at a finish (a slot freeing); never more than 2 in flight
    assert all(r.arrival_s >= d - 1e-12 for r, d in zip(recs, due))
    assert all(r.arrival_s == pytest.approx(d) or round(r.arrival_s, 12) in finishes for r, d in zip(recs, due))
    ends = sorted({r.arrival_s for r in recs} | {r.finish_s for r in recs})
    assert max(_in_flight(recs, x) for x in ends) <= 2
    out = validate_file(_vllm_file(tmp_path, request_rate=4.0), ARGS)
    assert any("paced under a cap of 2 in flight" in n for n in out.notes)


def test_runs_at_rates_under_a_cap_are_a_sweep(tmp_path):
    # `vllm bench serve --request-rate 2 / 4 --max-concurrency 2`: each run has a rate, so the two are a load sweep
    # (paced stages), unlike runs at request_rate inf, which a sweep refuses
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = [_vllm_file(tmp_path / "a", request_rate=2.0), _vllm_file(tmp_path / "b", request_rate=4.0)]
    out = validate_sweep(files, ARGS)
    assert out.rates == [2.0, 4.0] and all(r.comparison.num_predicted == 8 for r in out.runs)
    # a closed loop (request_rate inf) beside a rated run: two axes, refused
    with pytest.raises(InputError, match="a sweep reads its knee on one axis, the request rate or the clients"):
        validate_sweep([_vllm_file(tmp_path / "a"), _vllm_file(tmp_path / "b", request_rate=4.0)], ARGS)


def test_a_file_replays_alike_alone_and_anywhere_in_a_sweep(tmp_path):
    # an aggregate file's workload is drawn from --seed (default 0) alone and in a sweep, whatever its place: the two
    # files named in either order give each rate the same replay, and the 4 req/s file alone gives the same errors
    # (before, the second file drew with seed + 1000, so the order of the files moved its figures)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = _vllm_file(tmp_path / "a", request_rate=2.0), _vllm_file(tmp_path / "b", request_rate=4.0)

    def by_rate(sw):
        return {r.rate: r.errors for r in sw.runs}

    forward, backward = by_rate(validate_sweep([a, b], ARGS)), by_rate(validate_sweep([b, a], ARGS))
    assert forward == backward and set(forward) == {2.0, 4.0}
    assert validate_file(b, ARGS).errors == forward[4.0]


def test_a_sweep_over_clients_reads_its_knee_in_clients(tmp_path):
    # three SGLang levels at request_rate inf: 4, 16, 64 clients, measured mean TTFT 40, 100, 400 ms. Threshold
    # 5 × 40 ms = 200 ms, passed between 16 and 64 clients: 16 + (200 − 100)/(400 − 100) × (64 − 16) = 32 clients
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    f = tmp_path / "levels.jsonl"
    f.write_text("".join(json.dumps({**_sglang_line(c), "mean_ttft_ms": ttft}) + "\n"
                         for c, ttft in ((64, 400.0), (4, 40.0), (16, 100.0))))
    sw = validate_sweep([str(f)], ARGS)
    assert sw.clients == [4, 16, 64] and sw.measured.knee_clients == pytest.approx(32.0)
    assert sw.measured.knee_ttft_threshold_s == pytest.approx(0.2)
    out = CliRunner().invoke(app, ["validate", str(f), "--sweep", "--gpu", "H100", "--model", MODEL],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "┃ clients ┃" in out.output and "rate req/s" not in out.output
    assert ("knee (mean TTFT > 5 × the measured mean TTFT at the fewest clients, interpolated): measured 32.00 "
            "clients") in text
    assert "no latency band at 4, 16, 64 clients: each a closed loop" in text


def test_a_paced_replay_whose_clients_fall_behind_is_a_closed_loop_without_bands(tmp_path):
    # 8 requests of 32 + 16 tokens at 20 req/s under a cap of 1: a request takes more than the 50 ms between arrivals
    # (16 decode steps alone take longer), so the simulated client falls behind its rate: the simulated side is
    # marked, and with the cap (1) within the engine's max_num_seqs the cap, not the engine, held the load: no latency
    # band, no saturation-throughput band
    out = validate_file(_vllm_file(tmp_path, request_rate=20.0, max_concurrency=1), ARGS)
    assert "simulated" in out.saturated["sides"]
    assert any(n.startswith("simulated: the clients fell behind their rate: with 1 request in flight at most")
               for n in out.saturated["notes"])
    b = out.error_bands
    assert b.ttft_mean is None and b.saturation_throughput is None
    assert b.latency_note.startswith("its client's cap of 1 in flight, within the engine's max_num_seqs, held the load")


def test_one_rate_under_several_caps_is_read_on_the_caps_and_repeated_levels_are_refused(tmp_path):
    # `vllm bench serve --request-rate 4 --max-concurrency 1 / 2 / 4`: one rate, the caps vary, so the sweep's axis is
    # the caps (clients); two runs at the same level are refused
    for c in (4, 1, 2):
        (tmp_path / f"c{c}").mkdir()
    files = [_vllm_file(tmp_path / f"c{c}", request_rate=4.0, max_concurrency=c) for c in (4, 1, 2)]
    sw = validate_sweep(files, ARGS)
    assert sw.axis == "concurrency" and sw.clients == [1, 2, 4] and sw.rates == []
    with pytest.raises(InputError, match=r"--sweep needs one stage per level; 4 req/s appear more than once"):
        validate_sweep([_vllm_file(tmp_path / "c1", request_rate=4.0), _vllm_file(tmp_path / "c2", request_rate=4.0,
                                                                                     max_concurrency=None)], ARGS)


def test_sglangs_server_info_is_the_runs_own_record(tmp_path):
    # bench_serving writes the server's resolved arguments beside its results (server_info; these are TonyLi15's GH200
    # run's, trial_public/sglang-gh200): the served model, TP, the prefill chunk, the memory fraction, the radix
    # cache and the KV pool the server sized (max_total_num_tokens) are replayed as the server ran them
    info = {"model_path": "Qwen/Qwen2.5-3B-Instruct", "tp_size": 1, "dp_size": 1, "pp_size": 1, "page_size": 1,
            "context_length": None, "chunked_prefill_size": 8192, "max_running_requests": None,
            "mem_fraction_static": 0.9, "disable_radix_cache": False, "max_total_num_tokens": 2301720,
            "kv_cache_dtype": "auto", "version": "0.5.5.post3", "host": "0.0.0.0"}
    f = tmp_path / "c4.jsonl"
    f.write_text(json.dumps({**_sglang_line(4), "server_info": info}) + "\n")
    (t,) = load_targets(str(f))
    assert t.run.measured.metadata.model == "Qwen/Qwen2.5-3B-Instruct"
    out = validate_file(str(f), ARGS)  # --model given: Llama-3.1-8B, bundled
    rec = next(n for n in out.notes if n.startswith("from the run's own record"))
    assert "c4.jsonl server_info" in rec and "mem_fraction_static 0.9" in rec and "max_num_batched_tokens 8192" in rec
    assert "enable_prefix_caching True" in rec and "host" not in rec
    assert "max_total_num_tokens 2301720 (the KV pool the server sized, replayed as it)" in rec
    assert not any("max-total-tokens" in n for n in out.notes)
    # data parallel: two engines sharing the load, refused as one engine
    f.write_text(json.dumps({**_sglang_line(4), "server_info": {**info, "dp_size": 2}}) + "\n")
    with pytest.raises(InputError, match="data parallel 2"):
        validate_file(str(f), ARGS)


def test_a_burst_of_every_request_at_once_is_no_knee(tmp_path):
    # 200 requests of 1,024 + 128 tokens at request_rate inf: under a cap of 100 the replay's later quarters wait
    # longer as the loop saturates (at its knee, simulated); under a cap of 200 every request is sent at t = 0, and
    # the later quarters wait longer only because one burst drains: no knee (the public SGLang agg_local run's shape)
    def line(cap: int) -> dict:
        return {**_sglang_line(cap), "completed": 200, "duration": 4.0, "total_input_tokens": 1024 * 200,
                "total_output_tokens": 128 * 200, "request_throughput": 50.0, "output_throughput": 6400.0,
                "random_input_len": 1024, "random_output_len": 128, "mean_ttft_ms": 600.0, "median_ttft_ms": 550.0,
                "p99_ttft_ms": 1500.0}  # at or above the median (the percentiles of one sample rise)

    for cap, knee in ((100, True), (200, False)):
        f = tmp_path / f"c{cap}.jsonl"
        f.write_text(json.dumps(line(cap)) + "\n")
        assert (validate_file(str(f), ARGS).at_knee is not None) is knee


def test_files_with_their_own_server_info_are_one_deployment_when_its_settings_agree(tmp_path):
    # two SGLang levels, each file carrying its server's record: the KV pool a start sized (2,301,720 vs 2,301,748
    # tokens in TonyLi15's two GH200 starts) is that start's own profiling, not a setting, so they are one sweep; a
    # different mem_fraction_static is another deployment, refused
    info = {"model_path": "Qwen/Qwen2.5-3B-Instruct", "tp_size": 1, "mem_fraction_static": 0.9,
            "chunked_prefill_size": 8192, "max_total_num_tokens": 2301720}
    a, b = tmp_path / "c4.jsonl", tmp_path / "c16.jsonl"
    a.write_text(json.dumps({**_sglang_line(4), "server_info": info}) + "\n")
    b.write_text(json.dumps({**_sglang_line(16), "server_info": {**info, "max_total_num_tokens": 2301748}}) + "\n")
    assert validate_sweep([str(a), str(b)], ARGS).clients == [4, 16]
    b.write_text(json.dumps({**_sglang_line(16), "server_info": {**info, "mem_fraction_static": 0.8}}) + "\n")
    with pytest.raises(InputError, match=r"launched by different records: .*\(stages at 16 clients\)"):
        validate_sweep([str(a), str(b)], ARGS)


def test_drawn_output_lengths_far_from_the_files_mean_are_said(tmp_path):
    # lengths fixed at 64 (range ratio 1, 64 × 20 = 1,280 tokens stated): the draw is the file's mean, nothing said.
    # Uniform 1 … 128 (range ratio 0) while the file's 20 completed requests averaged 800 ÷ 20 = 40 tokens: the draw
    # averages far above it (the uniform's mean is 64.5), and the note gives both means and the gap
    f = tmp_path / "c4.jsonl"
    f.write_text(json.dumps(_sglang_line(4)) + "\n")
    (t,) = load_targets(str(f))
    assert "drawn_lengths" not in t.run.measured.metadata.extra
    f.write_text(json.dumps({**_sglang_line(4), "random_output_len": 128, "random_range_ratio": 0.0,
                             "total_output_tokens": 800}) + "\n")
    (t,) = load_targets(str(f))
    drawn = sum(r.num_output_tokens for r in t.run.requests) / 20
    assert drawn > 50  # uniform 1 … 128, 20 draws
    note = t.run.measured.metadata.extra["drawn_lengths"]
    assert note.startswith(f"output lengths: the replay's 20 drawn requests average {drawn:,.1f} tokens, the file's "
                           f"20 completed ones 40.0 (800 ÷ 20), {drawn / 40 - 1:+.1%}")
    assert note in validate_file(str(f), ARGS).notes


def test_a_gpu_the_benchmark_file_states_is_the_records(tmp_path):
    # vLLM bench's result JSON may state the GPU ("gpu"): validate replays on it when --gpu is not given, as cost
    # prices it, and names the file as where it was read (a review found validate asking for --gpu of such a file)
    out = validate_file(_vllm_file(tmp_path, gpu="H100"), SimRequestArgs(model=MODEL, gpu=None, max_model_len=2048))
    assert out.gpu == "NVIDIA H100 80GB SXM5"
    assert any(n.startswith("GPU NVIDIA H100 80GB SXM5 from the benchmark file (") for n in out.notes)
