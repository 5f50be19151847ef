"""A fresh-user trial of ``kvledger validate``: IN-SAMPLE by a run's content, not the path typed; ✓ beside a measured
figure inside its band (and ``covers`` in --json); a file stating duration 0 judged over its timestamps or not at
all; per-request runs refused as a sweep for the real reason; one unit per latency; run labels without a stray
slash."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvledger.accounting.gpu_profile import _bundled_dir
from kvledger.calibration.compare import Comparison, MetricRow
from kvledger.calibration.targets import load_targets
from kvledger.calibration.validate import RunValidation
from kvledger.cli.main import app
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.errors import InputError
from kvledger.report.calibration_view import render_validation

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
STAGE = DATA / "stage_0_lifecycle_metrics.json"
ARGS = ["--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"]
LSS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs" / "llmservingsim-rtxpro6000-qwen3-32b"


def _profile(tmp_path: Path, source: str, sha: str | None) -> str:
    """The bundled H100 profile fitted (as it says) on one run: ``source`` as its record names it, ``sha`` its file's
    sha256 (None: a profile written before it recorded one)."""
    d = json.loads((_bundled_dir() / "h100-sxm.json").read_text())
    d["runs"] = [{**d["runs"][0], "source": source, "sha256": sha}]
    p = tmp_path / "h100.json"
    p.write_text(json.dumps(d))
    return str(p)


def test_in_sample_is_the_runs_content_not_the_path_typed(tmp_path, monkeypatch, cli_json):
    copy = tmp_path / "elsewhere"
    shutil.copytree(DATA, copy)  # the stage with its manifests.yaml and config.yaml, as a user's copy
    sha = hashlib.sha256(STAGE.read_bytes()).hexdigest()
    fitted = _profile(tmp_path, "measured-runs/kubecon/results/stage_0_lifecycle_metrics.json", sha)
    # the copy: no path component in common with the profile's record, the same bytes → in sample
    assert cli_json("validate", str(copy / "stage_0_lifecycle_metrics.json"), *ARGS, "--gpu-profile", fitted)[
        "in_sample"] is True
    # stage 1 of the copy: other bytes, other name → held out
    assert cli_json("validate", str(copy / "stage_1_lifecycle_metrics.json"), *ARGS, "--gpu-profile", fitted)[
        "in_sample"] is False
    # typed from inside its folder: "stage_0_lifecycle_metrics.json" alone resolves to …/inference-perf/stage_0…,
    # which the profile's path names (no sha256 recorded: the path alone decides)
    by_path = _profile(tmp_path, "inference-perf/stage_0_lifecycle_metrics.json", None)
    monkeypatch.chdir(DATA)
    assert cli_json("validate", "stage_0_lifecycle_metrics.json", *ARGS, "--gpu-profile", by_path)["in_sample"] is True


def test_a_measured_figure_inside_its_band_is_marked_and_said_in_json(cli_json):
    res = CliRunner().invoke(app, ["validate", str(STAGE), *ARGS], env={"COLUMNS": "200"})
    out = " ".join(res.output.split())
    # simulated TTFT 9.6 ms, band 8.4–33.3 ms (error_bands.json q10/q90 around it): measured 33.3 ms on its top end,
    # inside up to float rounding; TPOT 7.1 ms inside 6.1–7.3 ms (simulated 6.798 ms × 1/(1 + 0.117513) = 6.083 ms …
    # × 1/(1 − 0.063468) = 7.259 ms, the uncalibrated/dense/vllm TPOT q90 and q10)
    assert "│ TTFT mean │ 33.3 ms │ 9.6 ms │ -71.1% │ 8.4–33.3 ms ✓ │" in out
    assert "│ TPOT mean │ 7.1 ms │ 6.8 ms │ -4.8% │ 6.1–7.3 ms ✓ │" in out
    assert "✓: the measured figure lies inside its 80% band; ✗: outside it" in out  # no ✗ printed, the legend still
    b = cli_json("validate", str(STAGE), *ARGS)["error_bands"]
    # the measured mean TTFT 33.3 ms (the comparison row's) beside the band, and covers: low ≤ measured ≤ high
    assert round(b["ttft_mean"]["measured"] * 1e3, 1) == 33.3 and b["ttft_mean"]["covers"] is True
    assert b["tpot_mean"]["covers"] is True and b["saturation_throughput"] is None


def _vllm_bench(tmp_path: Path, starts: bool) -> str:
    """A vLLM bench file of 4 requests stating duration 0: sent at 0, 1, 2, 3 s, each 2 s long (last finish 5 s)."""
    n = 4
    d = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": n, "request_rate": 1.0,
         "burstiness": 1.0, "max_concurrency": None, "duration": 0, "completed": n, "failed": 0,
         "total_input_tokens": 400, "total_output_tokens": 400, "request_throughput": 0.8, "output_throughput": 80.0,
         "input_lens": [100] * n, "output_lens": [100] * n, "ttfts": [0.05] * n,
         "itls": [[(2.0 - 0.05) / 99] * 99 for _ in range(n)], "latencies": [2.0] * n, "errors": [""] * n}
    if starts:
        d["start_times"] = [100.0, 101.0, 102.0, 103.0]
    p = tmp_path / ("timed.json" if starts else "untimed.json")
    p.write_text(json.dumps(d))
    return str(p)


def test_a_stated_duration_of_zero_is_not_judged_as_zero_throughput(tmp_path, cli_json):
    d = cli_json("validate", _vllm_bench(tmp_path, True), "--gpu", "H100")
    row = next(r for r in d["comparison"]["rows"] if r["metric"] == "throughput")
    assert abs(row["measured"] - 4 / 5.0) < 1e-9  # 4 requests over 5 s: first send 0 s to last finish 3 + 2 s
    assert any("states a duration of 0 s; the measured throughput is read over its per-request timestamps" in n
               and "5.0 s" in n for n in d["notes"])
    d = cli_json("validate", _vllm_bench(tmp_path, False), "--gpu", "H100")
    row = next(r for r in d["comparison"]["rows"] if r["metric"] == "throughput")
    assert row["measured"] is None and row["rel_error"] is None
    assert any(n.startswith("throughput not judged: the file states a duration of 0 s and keeps no per-request "
                            "send times") for n in d["notes"])
    thr = d["error_bands"]["saturation_throughput"]
    assert thr is None or thr["covers"] is None  # never "outside" on a figure the file cannot state


def test_per_request_runs_of_two_models_are_refused_as_a_sweep_for_that_reason(tmp_path):
    a = _vllm_bench(tmp_path, True)
    other = json.loads(Path(a).read_text()) | {"model_id": "Qwen/Qwen3-8B", "request_rate": 2.0}
    b = tmp_path / "qwen.json"
    b.write_text(json.dumps(other))
    with pytest.raises(InputError) as err:  # the console entry prints it as one paragraph and exits with status 2
        CliRunner().invoke(app, ["validate", a, str(b), "--gpu", "H100"], catch_exceptions=False)
    out = str(err.value)
    # both state a request rate (1 and 2 req/s), so each has a place on a sweep's axis: refused for their models
    assert out == ("--sweep reads a knee and a saturation throughput over the load stages of one deployment; these "
                   "runs are of different models, so the sweep would mix deployments. By model: Qwen/Qwen3-8B: "
                   "qwen.json; meta-llama/Llama-3.1-8B: timed.json. Give one group's files per call.")


def test_a_latencys_rows_share_one_unit():
    # TTFT p50 9.4427 s and p90 16.85 s: the group's largest, 16.85 s, is ≥ 10 s, so every TTFT row prints in s
    # (was "9,442.7 ms" above "16.85 s"); TPOT's largest 37.3 ms keeps ms
    rows = [MetricRow("TTFT p50", "s", 9.4427, 0.0514, 0.0514 / 9.4427 - 1),
            MetricRow("TTFT p90", "s", 16.85, 0.09, 0.09 / 16.85 - 1),
            MetricRow("TPOT mean", "s", 0.0373, 0.015, 0.015 / 0.0373 - 1)]
    r = RunValidation("r", "r.json", 10, 0, "m", "g", 1, "uncalibrated", {"name": "roofline"},
                      EngineConfig(num_gpu_blocks=100, max_model_len=512), None, Comparison("r", rows, 10, 10), {},
                      None, [])
    con = Console(width=200, record=True)
    render_validation(r, con)
    out = " ".join(con.export_text().split())
    # a figure below 1 s in an s column keeps three significant figures (was "0.05 s", "0.09 s")
    assert "│ TTFT p50 │ 9.44 s │ 0.0514 s │" in out and "│ TTFT p90 │ 16.85 s │ 0.0900 s │" in out
    assert "│ TPOT mean │ 37.3 ms │ 15.0 ms │" in out


def test_a_run_folder_is_named_by_its_resolved_folders(tmp_path, monkeypatch):
    run = tmp_path / "myrun"
    shutil.copytree(LSS / "vllm", run)
    monkeypatch.chdir(tmp_path)
    # typed "myrun": was "/myrun" (its parent "" joined); the resolved path's two folders instead
    assert load_targets("myrun")[0].run.label == f"{tmp_path.name}/myrun"
    monkeypatch.chdir(run)
    assert load_targets(".")[0].run.label == f"{tmp_path.name}/myrun"  # was "/"
