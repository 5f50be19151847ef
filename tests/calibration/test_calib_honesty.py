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
    # model/dense/vllm has no measured point: error_band lends gpu/dense/vllm's TTFT band, q10 −6.9%, q90 +13.9%, from
    # 2 points (error_bands.json). With held-out errors −40% and +20% the band takes them in: −40% … +20%, resting on 2
    # points (the two folds). The in-sample errors (−5%) are within the limits: no poor-fit widening
    fit = [{"label": "a", "ttft_mean": -0.05, "tpot_mean": 0.02, "saturated": False},
           {"label": "b", "ttft_mean": 0.03, "tpot_mean": -0.01, "saturated": False}]
    loo = [{"run": "a", "ttft_mean_rel_error": -0.40}, {"run": "b", "ttft_mean_rel_error": 0.20}]
    b = model_profile_band("model/dense/vllm", "ttft_mean", "p.json", fit, loo)
    assert 1 / b.high - 1 == pytest.approx(-0.40) and 1 / b.low - 1 == pytest.approx(0.20) and b.num_runs == 2
    assert "from 2 measured points of gpu/dense/vllm" in b.source and "a floor, not a measurement" in b.source
    # no leave-one-out (--no-leave-one-out): the uncalibrated band's 34 points, −85.8% … −21.5%, joins the floor:
    # −85.8% … +13.9%
    b = model_profile_band("model/dense/vllm", "ttft_mean", "p.json", fit, [])
    assert 1 / b.high - 1 == pytest.approx(-0.8577, abs=1e-4) and 1 / b.low - 1 == pytest.approx(0.1389, abs=1e-4)
    assert b.num_runs == 34 and "no leave-one-out errors in the profile" in b.source


def test_the_poor_fit_hints_count_what_a_record_states_as_given():
    # kubecon's vllm manifests state --max-model-len=512 and vLLM 0.11.0 (engine_for fills them in): a poor fit's
    # hints then do not ask for them as if unknown; the user's flag wins over the record
    from types import SimpleNamespace

    from kvledger.calibration.engine_assumptions import launch_given

    setup = SimpleNamespace(record_settings={"max_model_len": 512, "engine_version": "0.11.0"})
    args = SimpleNamespace(max_model_len=None, engine_version="0.9.0")
    assert launch_given([setup], args) == {"max_model_len": 512, "engine_version": "0.9.0"}
