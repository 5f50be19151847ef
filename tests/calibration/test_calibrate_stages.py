"""calibrate on inference-perf stage files (aggregates, no per-request records): its per-run and leave-one-out
tables compare the stages' aggregates as validate does, the model comes from the run's record when --model is not
given, and two experiments' identically named stage files are told apart by their experiment folders."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import calibrate_files
from kvledger.calibration.targets import input_names
from kvledger.cli.main import run
from kvledger.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
STAGE = "stage_0_lifecycle_metrics.json"


def _experiments(tmp_path: Path) -> list[str]:
    """Two inference-sim/training-like experiments, <exp>/results/stage_0_… beside the bundled config.yaml (its
    server.model_name set to a bundled model: Meta-Llama-3-8B-Instruct is not bundled, and tests run offline)."""
    out = []
    cfg = (DATA / "config.yaml").read_text(encoding="utf-8").replace("Meta-Llama-3-8B-Instruct", "Llama-3.1-8B")
    for exp in ("20260217-a-general", "20260217-b-general"):
        (tmp_path / exp / "results").mkdir(parents=True)
        (tmp_path / exp / "results" / "config.yaml").write_text(cfg, encoding="utf-8")
        out.append(str(shutil.copy(DATA / STAGE, tmp_path / exp / "results" / STAGE)))
    return out


def test_ambiguous_stage_files_are_named_by_their_experiment_folder(tmp_path):
    paths = _experiments(tmp_path)
    assert input_names(paths) == ["20260217-a-general/stage_0", "20260217-b-general/stage_0"]
    # stage files whose names differ are still named by their folder: a stage file's name is every experiment's
    # (before, "stage_0_lifecycle_metrics" alone, which a profile's label could not tell from another folder's stage 0)
    assert input_names([str(DATA / STAGE), str(DATA / "stage_1_lifecycle_metrics.json")]) == [
        "data/inference-perf/stage_0", "data/inference-perf/stage_1"]
    assert input_names([paths[1]]) == ["20260217-b-general/results/stage_0"]  # alone: the two folders it lies in
    # other files whose names differ stay as they are; the same file twice is refused (a fit would weigh it twice)
    assert input_names([str(DATA / "summary_lifecycle_metrics.json"), str(DATA / "stage_0_prometheus_metrics.json")]) \
        == ["summary_lifecycle_metrics", "stage_0_prometheus_metrics"]
    with pytest.raises(InputError, match="the same file given twice"):
        input_names([paths[0], paths[0]])


def test_calibrate_compares_stage_aggregates_and_reads_the_model_from_the_record(tmp_path):
    paths = _experiments(tmp_path)
    prof = calibrate_files(paths, SimRequestArgs(model=None, gpu="H100", engine_version="0.11.0", max_model_len=512),
                           leave_one_out=True, workers=1)
    assert [r["label"] for r in prof["runs"]] == ["20260217-a-general/stage_0", "20260217-b-general/stage_0"]
    for r in prof["runs"]:
        c = r["comparison"]
        # the stage's own aggregates, not an empty per-request run: 60 successes, TTFT mean 0.033319 s and
        # 0.99685 req/s (successes.latency.time_to_first_token.mean, successes.throughput.requests_per_sec)
        assert c["num_measured"] == 60
        rows = {x["metric"]: x for x in c["rows"]}
        assert rows["TTFT mean"]["measured"] == pytest.approx(0.0333190, rel=1e-5)
        assert rows["throughput"]["measured"] == pytest.approx(0.996851, rel=1e-5)
        assert all(r[f"{k}_rel_error"] is not None for k in ("ttft_mean", "tpot_mean", "e2e_mean", "throughput"))
    assert [x["run"] for x in prof["leave_one_out"]] == ["20260217-a-general/stage_0", "20260217-b-general/stage_0"]
    assert all(x["ttft_mean_rel_error"] is not None for x in prof["leave_one_out"])
    # config.yaml's server.model_name, as validate reads it
    assert prof["model"].startswith("meta-llama/Llama-3.1-8B")
    assert any("from" in n and "no --model given" in n for n in prof["notes"])


def test_calibrate_refuses_records_naming_two_models(tmp_path):
    paths = _experiments(tmp_path)
    cfg = Path(paths[1]).parent / "config.yaml"
    cfg.write_text(cfg.read_text().replace("Llama-3.1-8B", "Llama-2-7b-hf"))
    with pytest.raises(InputError, match="name 2 models"):
        calibrate_files(paths, SimRequestArgs(model=None, gpu="H100"), leave_one_out=False, workers=1)


def test_calibrate_says_a_file_is_missing_before_asking_for_a_model(tmp_path, monkeypatch, capsys):
    # no --model: the record would name it, but first the file must exist (one error, exit 2, no traceback)
    monkeypatch.setattr(sys, "argv", ["kvledger", "calibrate", str(tmp_path / "nope.json"), "--gpu", "H100"])
    with pytest.raises(SystemExit) as exit_:
        run()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "nope.json: no such file" in err and "needs --model" not in err
    assert "Traceback" not in err
