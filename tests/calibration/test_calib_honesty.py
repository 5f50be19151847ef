"""calibrate --scope model runs the GPU scope's fit check and engine notes; a model-scope profile's own runs validate
IN-SAMPLE; its band says the points it rests on and widens past a borrowed two-point floor (ledgers.model_band)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.ledgers.model_band import model_profile_band
from kvledger.ledgers.profile_band import rows_fit_quality
from kvledger.report.calibration_view import fit_quality_warning

runner = CliRunner()


def _three_requests(d, meta: dict) -> str:
    """Three requests of 100 prompt and 4 output tokens, 1 s apart, TTFT 100 ms and E2E 200 ms each."""
    reqs = [{"request_id": f"r{i}", "input_toks": 100, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (d / "meta.json").write_text(json.dumps(meta))
    return str(d / "requests.jsonl")


def test_model_scope_profile_has_the_fit_check_the_engine_note_and_validates_in_sample(tmp_path):
    # meta.json names the model but no vLLM version: calibrate says which it assumed (validate's async note too)
    run = _three_requests(tmp_path, {"model": "meta-llama/Llama-3.1-8B"})
    out = tmp_path / "p.json"
    res = runner.invoke(app, ["calibrate", run, "--gpu", "H100", "--out", str(out)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    p = json.loads(out.read_text())
    q = p["fit_quality"]
    assert q["runs"] == 1 and q["limits"] == {"ttft_mean": 0.15, "tpot_mean": 0.15, "throughput": 0.10}
    assert any(n.startswith("engine version: no run's record") for n in p["notes"])
    assert any(n.startswith("async scheduling") for n in p["notes"])
    assert "engine version: no run's record" in res.output
    v = runner.invoke(app, ["validate", run, "--gpu", "H100", "--step-cost", str(out), "--json"])
    assert v.exit_code == 0, v.output
    d = json.loads(v.stdout)
    assert d["in_sample"] is True
    assert any(n.startswith("IN-SAMPLE: the calibration profile pricing this run") for n in d["notes"])


def test_a_poor_model_fit_is_flagged_and_printed_as_a_gpu_fit_is():
    # kubecon vllm stages 1, 3, 5 under a model-scope fit (the trial's profile): stage_1 TTFT −33.2% (limit ±15%),
    # stage_5 TPOT −15.0% (limit ±15%, just beyond); stage_3 −12.7% / +10.9% is within: 1 of 3 < 80% → poor
    rows = [{"label": "stage_1", "ttft_mean_rel_error": -0.332, "tpot_mean_rel_error": 0.096, "saturated": False},
            {"label": "stage_3", "ttft_mean_rel_error": -0.127, "tpot_mean_rel_error": 0.109, "saturated": False},
            {"label": "stage_5", "ttft_mean_rel_error": 0.100, "tpot_mean_rel_error": -0.1503, "saturated": False}]
    q = rows_fit_quality(rows, True, False, {"max_model_len": None, "engine_version": None}, scope="model")
    assert q["poor"] and (q["runs_within"], q["runs"]) == (1, 3)
    assert "runs it was not fitted on" in q["why"] and "model_band" in q["why"]
    con = Console(record=True, width=400)
    fit_quality_warning({"fit_quality": q}, con)
    text = con.export_text()
    assert "WARNING: poor fit — 1 of 3 runs within" in text and "stage_1: ttft mean -33.2%" in text


def test_a_model_profile_band_says_its_floor_and_widens_to_its_evidence():
    # model/dense/vllm has no measured point: error_band lends it gpu/dense/vllm's throughput band, q10 −3.21%, q90
    # +3.27%, from 2 points (error_bands.json regimes, a t interval): fewer than 10, a floor. Two saturated fitted runs
    # (judged on throughput only; in-sample +1% and −2%, within ±10%: no poor-fit widening) with held-out errors −40%
    # and +20%: the band takes them in, q10 = min(−0.0321, −0.40) = −0.40, q90 = max(0.0327, 0.20) = 0.20, i.e. high =
    # 1/(1 + q10) = 1/0.6, low = 1/(1 + q90) = 1/1.2, resting on max(2, 2) = 2 points (the two folds)
    fit = [{"label": "a", "throughput_rel_error": 0.01, "saturated": True},
           {"label": "b", "throughput_rel_error": -0.02, "saturated": True}]
    loo = [{"run": "a", "throughput_rel_error": -0.40}, {"run": "b", "throughput_rel_error": 0.20}]
    b = model_profile_band("model/dense/vllm", "throughput", "p.json", fit, loo)
    assert b.high == pytest.approx(1 / 0.6) and b.low == pytest.approx(1 / 1.2) and b.num_runs == 2
    assert "from 2 measured points of gpu/dense/vllm" in b.source and "a floor, not a measurement" in b.source
    # no leave-one-out (--no-leave-one-out): the uncalibrated throughput band, q10 −10.65%, q90 +22.58% on 9 points (the
    # saturated deployments' t interval), joins the floor: q10 = min(−0.0321, −0.1065) = −0.1065, q90 = max(0.0327,
    # 0.2258) = 0.2258, on max(2, 9) = 9
    b = model_profile_band("model/dense/vllm", "throughput", "p.json", fit, [])
    assert 1 / b.high - 1 == pytest.approx(-0.106533, abs=1e-6) and 1 / b.low - 1 == pytest.approx(0.225761, abs=1e-6)
    assert b.num_runs == 9 and "no leave-one-out errors in the profile" in b.source


def test_a_model_profile_latency_band_rests_on_the_lent_cross_model_band_and_its_own_evidence():
    # gpu/dense/vllm stores no TTFT band of its own (every GPU-calibrated per-request run of the pool saturated), so
    # error_band stands its cross-model band for it (q10 −64.68%, q90 +183.11%, 31 points, error_bands.json
    # cross_model) and lends that to model/dense/vllm. The profile's own held-out errors are always taken in (never a
    # band narrower than them): −40% and +20% lie inside, "no wider"; in-sample −5% and +3% (within ±15%: no poor
    # fit) too. high = 1/(1 + q10) = 1/(1 − 0.6468) = 2.831, low = 1/(1 + q90) = 1/2.8311 = 0.3532, on 31 points
    fit = [{"label": "a", "ttft_mean_rel_error": -0.05, "tpot_mean_rel_error": 0.02, "saturated": False},
           {"label": "b", "ttft_mean_rel_error": 0.03, "tpot_mean_rel_error": -0.01, "saturated": False}]
    loo = [{"run": "a", "ttft_mean_rel_error": -0.40}, {"run": "b", "ttft_mean_rel_error": 0.20}]
    b = model_profile_band("model/dense/vllm", "ttft_mean", "p.json", fit, loo)
    assert b.high == pytest.approx(1 / (1 - 0.646781008266234))
    assert b.low == pytest.approx(1 / (1 + 1.8311048482742291)) and b.num_runs == 31
    assert b.source == ("p.json: regime model/dense/vllm: -64.7% … +183.1% from 31 measured points of "
                        "gpu/dense/vllm, lent to it (GPU profiles judged on models they were not fitted on); the "
                        "profile's own leave-one-out errors (2 held-out runs) -40.0% … +20.0%: no wider")
    # without held-out errors the band is borrowed and nothing of the profile's own stands off its runs: the
    # uncalibrated band (q10 −71.14%, q90 +13.93%, 31 points) is taken in, its low end the wider: high = 1/(1 −
    # 0.7114) = 3.465, low unchanged (1/(1 + 0.1393) = 0.878 is the narrower side)
    b = model_profile_band("model/dense/vllm", "ttft_mean", "p.json", fit, [])
    assert b.high == pytest.approx(1 / (1 - 0.7114), rel=1e-3)
    assert b.low == pytest.approx(1 / (1 + 1.8311048482742291)) and b.num_runs == 31
    assert "so the uncalibrated roofline's band (31 measured points) -71.1% … +13.9%: widened to -71.1% … +183.1%" \
        in b.source


def test_the_poor_fit_hints_count_what_a_record_states_as_given():
    # kubecon's vllm manifests state --max-model-len=512 and vLLM 0.11.0 (engine_for fills them in): a poor fit's
    # hints then do not ask for them as if unknown; the user's flag wins over the record
    from types import SimpleNamespace

    from kvledger.calibration.engine_assumptions import launch_given

    # (the manifests' max_num_seqs 128; no --max-num-batched-tokens in them nor given: None)
    setup = SimpleNamespace(record_settings={"max_model_len": 512, "engine_version": "0.11.0", "max_num_seqs": 128})
    args = SimpleNamespace(max_model_len=None, engine_version="0.9.0", max_num_seqs=None, max_num_batched_tokens=None)
    assert launch_given([setup], args) == {"max_model_len": 512, "engine_version": "0.9.0", "max_num_seqs": 128,
                                           "max_num_batched_tokens": None}
