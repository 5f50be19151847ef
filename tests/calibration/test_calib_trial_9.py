"""A fresh-user trial of calibrate and validate (the ninth): a GPU profile's fitted front-end latency applied to the
runs of its own set-up, the plain GPU fit reaching the lower optimum its own objective has, and a model-scope profile
recognising a copy of its run by content."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs"
KUBECON = RUNS / "inference-perf-kubecon-na-2025"
RTX4090 = RUNS / "llmservingsim" / "bench" / "examples" / "RTX4090" / "Llama-3.1-8B" / "vllm"
#: the trial's profile: calibrate --scope gpu --fit-frontend on kubecon vllm's stages 0 and 2 (fit.frontend_s 20.1 ms)
FF = Path(__file__).resolve().parents[1] / "fixtures" / "gpu_profiles" / "h100_kubecon_fit_frontend.json"
needs_runs = pytest.mark.skipif(not KUBECON.is_dir() or not RTX4090.is_dir(),
                                reason="../shared/data/measured-runs not beside the clone")


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``kvledger ARGV`` run in-process."""
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, list(argv))
    return res.exit_code, res.stdout, res.stderr


def _stages(*n: int) -> list[str]:
    return [str(KUBECON / "vllm" / "results" / f"stage_{i}_lifecycle_metrics.json") for i in n]


@needs_runs
def test_a_fitted_front_end_latency_is_added_to_the_runs_of_its_set_up():
    prof = json.loads(FF.read_text())
    rc, out, _ = cli("validate", "--sweep", *_stages(0, 1, 2, 3), "--gpu-profile", str(FF), "--json")
    d = json.loads(out)
    assert rc == 0 and d["profile_frontend"]["seconds"] == prof["fit"]["frontend_s"] == 0.020136824002183452
    # the fixture records its runs relative to the trial's folder: here stages 0 and 2 are known by content (IN-SAMPLE)
    # and get it; stages 1 and 3 are offered it, not added (their folder matches no fitted run's resolved from here)
    assert d["profile_frontend"]["applied_to"] == ["vllm/results/stage_0", "vllm/results/stage_2"]
    # stage 0 was fitted on: with the fit's 20.14 ms its TTFT error is the fit's own, −2.9% (the profile's runs[0]);
    # the trial, without it, read −67.6% on a stage marked IN-SAMPLE
    s0 = d["runs"][0]
    assert s0["in_sample"] and s0["client_latency"]["seconds"] == prof["fit"]["frontend_s"]
    assert s0["ttft_mean_rel_error"] == pytest.approx(prof["runs"][0]["ttft_mean_rel_error"], abs=0.005)
    assert s0["ttft_mean_rel_error"] == pytest.approx(-0.029, abs=0.005)
    # --client-latency given wins: 0ms adds nothing, and the trial's −67.6% comes back
    rc, out, _ = cli("validate", str(_stages(0)[0]), "--gpu-profile", str(FF), "--client-latency", "0ms",
                           "--json")
    d = json.loads(out)
    assert "profile_frontend" not in d and d["ttft_mean_rel_error"] == pytest.approx(-0.676, abs=0.005)


@needs_runs
def test_a_fitted_front_end_latency_is_not_added_to_another_set_up_and_says_so():
    other = KUBECON / "vllm+batch_size" / "results" / "stage_0_lifecycle_metrics.json"  # another deployment's folder
    rc, out, _ = cli("validate", str(other), "--gpu-profile", str(FF), "--json")
    d = json.loads(out)
    assert rc == 0 and d["profile_frontend"]["applied"] is False and "client_latency" not in d
    assert d["notes"][0].startswith("WARNING: the GPU profile ") and "not added to this run" in d["notes"][0]
    assert f"--client-latency profile:{FF}" in d["notes"][0]
    rc, out, _ = cli("validate", str(other), "--gpu-profile", str(FF))
    head = out.split("predicted vs measured")[0]  # said above the figures
    assert "carries a front-end latency fitted with --fit-frontend (20.14 ms" in " ".join(head.split())


@needs_runs
def test_a_model_scope_profile_knows_a_copy_of_its_run_by_content(tmp_path):
    prof = tmp_path / "m.json"
    rc, _, err = cli("calibrate", "--scope", "model", str(RTX4090), "--no-leave-one-out", "--out", str(prof))
    assert rc == 0, err
    p = json.loads(prof.read_text())
    from kvledger.ledgers.band_members import file_sha256

    assert p["runs"][0]["sha256"] == file_sha256(str(RTX4090 / "requests.jsonl"))
    # its start's cpu_overhead_s (the engine's host time) is one no step of one run moves: said held, not fitted
    assert p["fit"]["spread"]["held_at_start"] == ["cpu_overhead_s"]
    copy = tmp_path / "elsewhere" / "run"
    shutil.copytree(RTX4090, copy)
    rc, out, _ = cli("validate", str(copy), "--step-cost", str(prof), "--json")
    assert rc == 0 and json.loads(out)["in_sample"] is True


@needs_runs
def test_the_same_folder_rule_compares_resolved_folders_whole(tmp_path):
    # the profile's runs recorded by absolute path (calibrate run elsewhere than validate): stages 1 and 3 of the same
    # sweep folder get the fitted latency as held-out runs of its set-up; a run in another deployment's results/
    # folder does not (a review showed "results/" matching any inference-perf run's folder by path components)
    prof = json.loads(FF.read_text())
    for r, i in zip(prof["runs"], (0, 2)):
        r["source"] = _stages(i)[0]
    own = tmp_path / "h100ff_abs.json"
    own.write_text(json.dumps(prof))
    rc, out, _ = cli("validate", "--sweep", *_stages(0, 1, 2, 3), "--gpu-profile", str(own), "--json")
    assert rc == 0 and json.loads(out)["profile_frontend"]["applied_to"] == [
        f"vllm/results/stage_{i}" for i in range(4)]
    other = KUBECON / "vllm+batch_size" / "results" / "stage_1_lifecycle_metrics.json"
    rc, out, _ = cli("validate", str(other), "--gpu-profile", str(own), "--json")
    assert rc == 0 and json.loads(out)["profile_frontend"]["applied"] is False

