"""``kvledger calibrate`` then ``validate --step-cost PROFILE`` and ``simulate --step-cost PROFILE``: the profile
reproduces its own numbers; errors exit cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import FormatError, InputError, KvLedgerError

runner = CliRunner()
# DistServe's vLLM launch (dynamics/distserve_runs.py: DISTSERVE_VLLM_SETTINGS) in kvledger's flags
DISTSERVE = ["--model", "facebook/opt-13b", "--gpu", "A100-80GB", "--engine-version", "0.5.0",
             "--gpu-memory-utilization", "0.95", "--max-num-batched-tokens", "16384", "--max-num-seqs", "1024",
             "--max-model-len", "2048", "--batching", "vllm_v0", "--max-paddings", "256",
             "--no-enable-chunked-prefill", "--no-enable-prefix-caching"]


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return res.output


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cal") / "opt13b.json"
    _ok(["calibrate", "distserve:vllm-100-1", *DISTSERVE, "--start", "calibrated", "--out", str(out), "--json"])
    return out


def test_profile_layout_and_fit(profile):
    p = json.loads(profile.read_text())
    assert p["kind"] == "kvledger-calibration-profile" and p["model"] == "facebook/opt-13b" and p["tp"] == 1
    assert p["engine"]["batching"] == "vllm_v0" and p["engine"]["max_paddings"] == 256
    # the range it was fitted on (analyses/serving/profile_scope.py): DistServe's vllm-100-1 holds 100 requests, the
    # longest prompt 2,003 tokens, the longest prompt + output 2,029 (< max_model_len 2,048, none refused); at 1
    # req/s that prompt is prefilled in a step of its own (V0: a prompt step holds only prompts)
    r = p["fitted_range"]
    assert (r["max_prompt_tokens"], r["max_context_tokens"], r["max_prefill_tokens_per_step"]) == (2003, 2029, 2003)
    # the longest request's last decodes alone read about 2,028 KV tokens
    assert r["max_decode_seqs_per_step"] >= 1 and r["max_decode_kv_tokens_per_step"] >= 2000
    # the KV pool benchmarks/validate_distserve.py uses: the memory plan under DistServe's vLLM settings
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    s = make_settings(engine_version="0.5.0", gpu_memory_utilization=0.95, max_num_batched_tokens=16384,
                      max_num_seqs=1024,
                      block_size=16, max_model_len=2048)
    blocks = build_plan(load_model("facebook/opt-13b"), get_gpu("A100-80GB"), s, with_roofline=False,
                        with_advice=False).memory.num_gpu_blocks
    assert p["engine"]["num_gpu_blocks"] == blocks and 3_900 < blocks < 4_134  # DistServe's own estimate: 4,134
    assert p["fit"]["objective"] <= p["fit"]["objective_start"]
    assert p["data_files"] == ["distserve:vllm-100-1"] and p["leave_one_out"] == []
    sc = p["step_cost"]  # OPT-13B fp16 KV at TP 1: 2 × 40 layers × 40 heads × 128 × 2 B = 819,200 B per token per GPU
    assert sc["kv_bytes_per_token_per_gpu"] == 819200 and "kv_bytes_per_token" not in sc
    assert sc["decode_kv_byte_s"] == pytest.approx(sc["decode_kv_token_s"] / 819200)


def test_validate_with_the_profile_reproduces_the_profile_errors(profile):
    p = json.loads(profile.read_text())
    out = json.loads(_ok(["validate", "distserve:vllm-100-1", *DISTSERVE, "--step-cost", str(profile),
                          "--slo", "ttft=300ms,tpot=60ms", "--json"]))
    assert out["ttft_mean_rel_error"] == p["runs"][0]["ttft_mean_rel_error"]
    assert out["tpot_mean_rel_error"] == p["runs"][0]["tpot_mean_rel_error"]
    metrics = [r["metric"] for r in out["comparison"]["rows"]]
    assert "TTFT p99" in metrics and "goodput" in metrics and "ITL mean" not in metrics  # no per-token times
    # measured mean TTFT of vllm-100-1 is 161 ms (docs/validation.md §2.1)
    assert out["comparison"]["rows"][0]["measured"] == pytest.approx(0.161, abs=0.0005)


def test_simulate_accepts_the_profile(profile):
    out = json.loads(_ok(["simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--num-requests", "50",
                          "--step-cost", str(profile), "--json"]))
    assert out["step_cost"]["name"] == "calibrated profile opt13b.json"
    assert "kvledger calibrate profile" in out["step_cost"]["source"]


def test_a_profile_written_before_the_key_said_its_scope_still_loads(tmp_path, profile):
    # an earlier version wrote step_cost.kv_bytes_per_token (one GPU's, at the profile's TP): the same profile under
    # that name loads with the key under its name now, and simulates as the profile written now does
    from kvledger.accounting.calibration_profile import load_profile

    now = json.loads(profile.read_text())
    old = json.loads(profile.read_text())
    old["step_cost"] = {("kv_bytes_per_token" if k == "kv_bytes_per_token_per_gpu" else k): v
                        for k, v in old["step_cost"].items()}
    older = tmp_path / "opt13b.json"  # the same file name: the step cost's name in --json is the file's
    older.write_text(json.dumps(old))
    assert "kv_bytes_per_token_per_gpu" not in old["step_cost"]
    assert load_profile(older)["step_cost"] == now["step_cost"]  # renamed in place, the keys in the same order
    args = ["simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--num-requests", "30", "--json"]
    sim_old = json.loads(_ok([*args, "--step-cost", str(older)]))
    sim_now = json.loads(_ok([*args, "--step-cost", str(profile)]))
    assert sim_old["summary"] == sim_now["summary"] and sim_old["step_cost"]["coefficients"] == \
        sim_now["step_cost"]["coefficients"]


def test_errors(tmp_path, profile):
    agg = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
    stage = sorted(agg.glob("stage_*_lifecycle_metrics.json"))
    if stage:  # calibrate accepts what validate accepts: a stage file is fitted on its aggregates
        out = json.loads(_ok(["calibrate", str(stage[0]), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                              "--max-model-len", "512", "--no-leave-one-out", "--json"]))
        assert out["runs"][0]["num_requests"] == 60 and out["fit"]["objective"] <= out["fit"]["objective_start"]
    res = runner.invoke(app, ["calibrate", "distserve:vllm-100-1", *DISTSERVE, "--out", str(profile)])
    assert isinstance(res.exception, InputError) and "refusing to overwrite" in str(res.exception)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "kvledger-calibration-profile", "step_cost": {"fixed_s": -1}}))
    res = runner.invoke(app, ["simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--step-cost", str(bad)])
    assert isinstance(res.exception, FormatError) and "step_cost" in str(res.exception)
    # the run's record is V0 (vLLM 0.2.3), so --max-paddings needs no flag; with V1's steps asked for it is refused
    res = runner.invoke(app, ["validate", "distserve:vllm-100-1", "--model", "facebook/opt-13b", "--gpu", "A100-80GB",
                              "--batching", "continuous", "--no-enable-chunked-prefill", "--max-paddings", "256"])
    assert isinstance(res.exception, KvLedgerError) and "vllm_v0" in str(res.exception)


def test_validate_an_aggregate_stage():
    stage = (
        Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"
    )
    out = json.loads(_ok(["validate", str(stage), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                          "--max-model-len", "512", "--max-num-seqs", "192", "--client-concurrency", "440", "--json"]))
    rows = {r["metric"]: r for r in out["comparison"]["rows"]}
    # 60 requests at 1 req/s: the client kept pace, so an open-loop replay of all 60
    assert out["num_requests"] == 60 and out["comparison"]["num_predicted"] == 60
    # the client config beside the stage sent ignore_eos with output_len 64: 64 generated tokens, not the 62.35 counted
    assert rows["TPOT mean"]["measured"] == pytest.approx((0.48322820 - 0.03331899) / 63, rel=1e-6)
    assert "goodput" not in rows and any("synthetic workload" in n for n in out["notes"])


def test_disagg_accepts_the_profile(profile):
    out = json.loads(_ok(["disagg", "facebook/opt-13b", "--gpu", "A100-80GB", "--num-requests", "60", "--rate", "2",
                          "--num-gpus", "2", "--no-tune", "--step-cost", str(profile), "--json"]))
    assert any("calibrated profile opt13b.json in every pool" in n for n in out["notes"])


def test_file_without_a_shared_clock_is_refused():
    llmperf = Path(__file__).resolve().parents[1] / "evidence" / "data" / "llmperf"
    f = llmperf / "leaderboard_individual_anyscale_70b.json"
    res = runner.invoke(app, ["validate", str(f), "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100"])
    assert isinstance(res.exception, FormatError) and "common clock" in str(res.exception)


def _three_requests(d, input_toks: int) -> None:
    """Three requests of ``input_toks`` prompt tokens and 4 output tokens, 1 s apart, TTFT 100 ms and E2E 200 ms each,
    in ``d``/requests.jsonl, with a meta.json naming the model and vLLM 0.19.0."""
    reqs = [{"request_id": f"r{i}", "input_toks": input_toks, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (d / "meta.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0"}))


def test_gpu_scope_fit_frontend_prints_the_fitted_latency_with_its_unit(tmp_path):
    # three requests whose meta.json names the model; --fit-frontend fits the set-up's latency outside the engine. It
    # was only in the file (fit.frontend_s, seconds): the printed figure must be that value, in ms
    _three_requests(tmp_path, 100)
    out = tmp_path / "g.json"
    res = runner.invoke(app, ["calibrate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--scope", "gpu",
                              "--fit-frontend", "--out", str(out)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    fe_s = json.loads(out.read_text())["fit"]["frontend_s"]
    assert 0 < fe_s <= 0.2  # searched over [0, 200 ms] (gpu_fit.FRONTEND_MAX_S)
    assert f"front-end latency (the set-up's, per request, outside the engine): {fe_s * 1e3:.1f} ms" in res.output
    # without --fit-frontend nothing is fitted and no latency is printed
    plain = runner.invoke(app, ["calibrate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--scope", "gpu"])
    assert plain.exit_code == 0 and "front-end latency" not in plain.output


def test_gpu_scope_fit_with_the_measured_gemm_curve_writes_a_version_4_profile_that_validate_prices_with(tmp_path):
    # the same three-request run; --gemm-efficiency measured: the profile records the mode (version 3 on; version 4
    # adds the link share), and a run it prices takes the curve without the flag; with --gemm-efficiency flat against
    # it, a one-paragraph refusal
    _three_requests(tmp_path, 300)
    out = tmp_path / "g.json"
    res = runner.invoke(app, ["calibrate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--scope", "gpu",
                              "--gemm-efficiency", "measured", "--no-leave-one-out", "--out", str(out)])
    assert res.exit_code == 0, res.output
    prof = json.loads(out.read_text())
    assert (prof["version"], prof["gemm_efficiency"]) == (4, "measured") and "--gemm-efficiency measured" in res.output
    got = json.loads(_ok(["validate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--gpu-profile", str(out),
                          "--json"]))
    assert got["step_cost"]["gemm_efficiency"] == "measured" and got["step_cost"]["scope"] == "gpu"
    bad = runner.invoke(app, ["validate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--gpu-profile", str(out),
                              "--gemm-efficiency", "flat"])
    assert isinstance(bad.exception, InputError) and "fitted with measured" in str(bad.exception)
    # --gemm-efficiency carried prices a GPU as if nobody had profiled it: no GPU profile is fitted with it (a
    # profile stores flat or measured), refused before any replay, and with the profile as refused
    bad = runner.invoke(app, ["calibrate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--scope", "gpu",
                              "--gemm-efficiency", "carried", "--no-leave-one-out"])
    assert isinstance(bad.exception, InputError) and "no GPU profile is fitted with it" in str(bad.exception)
    bad = runner.invoke(app, ["validate", str(tmp_path / "requests.jsonl"), "--gpu", "H100", "--gpu-profile", str(out),
                              "--gemm-efficiency", "carried"])
    assert isinstance(bad.exception, InputError) and "add --gpu-profile none" in str(bad.exception)


def test_calibrate_notes_a_run_replayed_without_the_padding_cap(tmp_path):
    # distserve:vllm-100-2 padded 4 of its prompt steps past 256 tokens (largest 1,405; validation.md §2.2): the
    # profile says it was replayed uncapped; vllm-100-1 (largest padding 120) keeps the cap
    out = tmp_path / "p.json"
    _ok(["calibrate", "distserve:vllm-100-1", "distserve:vllm-100-2", *DISTSERVE, "--start", "calibrated",
         "--no-leave-one-out", "--workers", "1", "--out", str(out), "--json"])
    notes = json.loads(out.read_text())["notes"]
    [note] = [n for n in notes if "max_paddings" in n]
    assert note.startswith("vllm-100-2: 4 prompt step(s)") and "largest 1405" in note
