"""validate marks the runs the GPU profile pricing them was fitted on (in-sample) apart from held-out ones, in the
text and in --json (``in_sample``); the bundled H100 profile names its fitted stages so that it can."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from kvledger.accounting.gpu_profile import _bundled_dir, load_gpu_profile
from kvledger.calibration.compare import Comparison, MetricRow
from kvledger.calibration.validate import RunValidation, SweepSide, SweepValidation, fitted_on
from kvledger.cli.main import app
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.report.calibration_view import render_validation

STAGE = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"


def test_fitted_on_matches_whole_path_components():
    runs = "/x/measured-runs/inference-sim-training/default_args/20260217-155451-llama-2-7b-tp1-codegen/results/"
    data = ["inference-sim-training/default_args/20260217-155451-llama-2-7b-tp1-codegen/results/"
            "stage_1_lifecycle_metrics.json"]
    assert fitted_on(runs + "stage_1_lifecycle_metrics.json", data)
    assert not fitted_on(runs + "stage_0_lifecycle_metrics.json", data)
    assert not fitted_on(runs + "stage_11_lifecycle_metrics.json", [d.replace("stage_1_", "1_") for d in data])
    # a folder-format run (meta.json + requests.jsonl): the profile names the folder
    assert fitted_on("/d/llmservingsim/bench/examples/RTX4090/Llama-3.1-8B/vllm/requests.jsonl",
                     ["llmservingsim/bench/examples/RTX4090/Llama-3.1-8B/vllm"])
    assert not fitted_on("/d/RTX4090/Llama-3.1-8B/vllm2/requests.jsonl", ["RTX4090/Llama-3.1-8B/vllm"])


def test_the_bundled_h100_profile_names_its_fitted_stages():
    # 16 stages listed (benchmarks/build_h100_profile.py); codellama-34b-tp2-reasoning 0 is saturated and left out of
    # the fit, so 15 are the profile's data: before, none had a source and no validation was marked in-sample
    prof = load_gpu_profile(str(_bundled_dir() / "h100-sxm.json"))
    assert len(prof.data) == 15 and not any("codellama-34b-tp2-reasoning" in d for d in prof.data)
    assert all(d.startswith("inference-sim-training/default_args/") and d.endswith("_lifecycle_metrics.json")
               for d in prof.data)


def _profile(tmp_path: Path, source: str) -> Path:
    bundled = json.loads((_bundled_dir() / "h100-sxm.json").read_text())
    bundled["runs"] = [{**bundled["runs"][0], "source": source}]
    p = tmp_path / "h100.json"
    p.write_text(json.dumps(bundled))
    return p


def test_validate_marks_a_run_the_profile_was_fitted_on(tmp_path):
    argv = ["validate", str(STAGE), "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"]
    fitted = _profile(tmp_path, "inference-perf/stage_0_lifecycle_metrics.json")
    d = json.loads(CliRunner().invoke(app, [*argv, "--gpu-profile", str(fitted), "--json"]).output)
    assert d["in_sample"] is True and d["scope"] == "gpu"
    res = CliRunner().invoke(app, [*argv, "--gpu-profile", str(fitted)])
    first = " ".join(res.output.split("predicted vs measured")[0].split())
    assert "IN-SAMPLE: the GPU profile pricing it was fitted on this run" in first
    # the same profile fitted on another stage: held out
    other = _profile(tmp_path, "inference-perf/stage_1_lifecycle_metrics.json")
    d = json.loads(CliRunner().invoke(app, [*argv, "--gpu-profile", str(other), "--json"]).output)
    assert d["in_sample"] is False


def _stage(rate: float, in_sample: bool) -> RunValidation:
    rows = [MetricRow("TTFT mean", "s", 0.2, 0.25, 0.25), MetricRow("throughput", "req/s", rate, rate, 0.0)]
    return RunValidation(f"s{rate:g}", f"s{rate:g}.json", 100, 0, "m", "g", 1, "gpu", {"name": "roofline"},
                         EngineConfig(num_gpu_blocks=100, max_model_len=512), rate, Comparison("s", rows, 100, 100),
                         {}, None, ["IN-SAMPLE: fitted"] if in_sample else [], in_sample)


def test_a_sweep_marks_each_stage_in_sample_or_held_out():
    side = SweepSide(None, 1.0, [0.2, 0.2], 2.0)
    r = SweepValidation([1.0, 2.0], side, side, "rule", [_stage(1.0, True), _stage(2.0, False)], ["IN-SAMPLE: fitted"])
    con = Console(record=True, width=300)
    render_validation(r, con)
    lines = con.export_text().splitlines()
    # rows found by their rate, 4 significant figures (report/validation_figures.fmt_rate)
    assert "IN-SAMPLE: fitted on it" in next(x for x in lines if x.startswith("│      1.000 "))
    assert "held out" in next(x for x in lines if x.startswith("│      2.000 "))
    assert any(x.startswith("IN-SAMPLE: the GPU profile pricing this sweep was fitted on 1 of its 2 stages")
               for x in lines)
    assert json.loads(json.dumps(r.to_dict()))["runs"][0]["in_sample"] is True
