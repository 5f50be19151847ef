"""A GPU-scope fit against no profile at all: calibrate compares the fit with the uncalibrated default on the fit's
own objective, says plainly when the default does as well, and marks the profile so that every command using it
warns; the written profile prices exactly as the fit did (full precision, no rounding)."""

from __future__ import annotations

import io
import json

import numpy as np
from rich.console import Console

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.gpu_fit import DEFAULT_MIN_GAIN, GpuFit, default_objective, fit_gpu_fractions, roofline_with
from kvledger.calibration.gpu_profile_file import gpu_profile_dict
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.records import RunMetadata, RunRecords
from kvledger.report.gpu_fit_verdict import default_verdict

MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100"


def _workload(n: int, rate: float = 12.0, seed: int = 3) -> list[RequestSpec]:
    rng = np.random.default_rng(seed)
    t = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    return [RequestSpec(f"r{i}", float(t[i]), int(rng.integers(200, 3000)), int(rng.integers(20, 300)))
            for i in range(n)]


def _run_at(ff: float, bf: float):
    """A run the roofline itself generated at (ff, bf), priced flat (the two fractions alone), with its setup."""
    reqs = _workload(n=60)
    blank = MeasuredRun("synthetic", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192,
                                      gemm_efficiency="flat"), blank)
    truth = replay(blank, setup.config, roofline_with(setup, ff, bf)).records
    return MeasuredRun("synthetic", "synthetic", reqs, truth), setup


def test_a_run_the_default_prices_exactly_gets_a_fit_not_better_than_the_default_and_the_profile_says_so():
    # measured = the replay at the flat default (0.7, 0.8): every statistic's log ratio is ln 1 = 0, so the default's
    # objective is exactly 0; the fit starts there (0.7/0.8) and no move can go below 0, so its objective is 0 too:
    # 0 < 0 × (1 − 1%) is false, the fit does not beat the default
    run, setup = _run_at(0.7, 0.8)
    items = [(run, setup)]
    assert default_objective(items) == 0.0
    fit = fit_gpu_fractions(items)
    assert (fit.objective, fit.objective_default, fit.beats_default) == (0.0, 0.0, False)
    prof = gpu_profile_dict(fit, [], ["synthetic"])
    prof["fit_quality"] = {"beats_default": fit.beats_default}
    out = io.StringIO()
    assert default_verdict(prof, Console(file=out, width=400)) is False
    assert "the default prices these runs as well as this fit" in out.getvalue()
    assert "this profile is not recommended" in out.getvalue()


def test_a_fit_that_moves_off_the_default_beats_it_on_the_same_objective():
    # truth at 0.45/0.65 (flat): the default 0.7/0.8 prices its prefills 0.7/0.45 − 1 = 56% fast and its decodes
    # 0.8/0.65 − 1 = 23% fast, so its objective is well above the fit's (which lands within 5% of the truth:
    # test_gpu_fit.test_the_gpu_fit_recovers_known_fractions), by far more than 1% of it
    run, setup = _run_at(0.45, 0.65)
    fit = fit_gpu_fractions([(run, setup)])
    assert fit.objective_default > 10 * fit.objective and fit.beats_default
    out = io.StringIO()
    prof = gpu_profile_dict(fit, [], ["synthetic"])
    prof["fit_quality"] = {"beats_default": True}
    assert default_verdict(prof, Console(file=out, width=400)) is True
    assert "the fit prices these runs better" in out.getvalue()


def test_beats_default_needs_a_clear_gain():
    # the trial's single Llama-2-7B stage: 0.03646 fitted against 0.06449 uncalibrated: 0.03646 < 0.06449 × 0.99 =
    # 0.06384, a clear gain; 0.0640 against 0.0645: 0.0640 < 0.0645 × 0.99 = 0.063855 is false, no clear gain
    assert DEFAULT_MIN_GAIN == 0.01

    def fit(obj: float, default: float | None) -> GpuFit:
        return GpuFit("H100", 0.68, 0.75, 0.05, obj, 1, objective_default=default)

    assert fit(0.03646, 0.06449).beats_default
    assert not fit(0.0640, 0.0645).beats_default
    assert fit(0.0640, None).beats_default  # an older fit, not compared: nothing said against it


def test_the_written_profile_keeps_the_fit_at_full_precision():
    # rounding 0.68061234 to 4 decimals (0.6806) made validate on the fit's own run differ from calibrate's in-sample
    # errors (TTFT −16.5% against −16.0% on the trial's stage): the fractions and host terms are written as fitted
    f = GpuFit("H100", 0.68061234567, 0.75384615384, 0.05, 0.03, 1, host_step_s=0.00012345678, host_seq_s=1.23456789e-6)
    prof = json.loads(json.dumps(gpu_profile_dict(f, [], ["x"])))
    assert (prof["flops_fraction"], prof["bandwidth_fraction"]) == (0.68061234567, 0.75384615384)
    assert (prof["host_step_s"], prof["host_seq_s"]) == (0.00012345678, 1.23456789e-6)


def test_a_profile_marked_not_recommended_warns_wherever_it_prices(tmp_path):
    from kvledger.accounting.gpu_profile import load_gpu_profile
    from kvledger.analyses.serving.profile_scope import poor_profile_warning
    from kvledger.analyses.serving.sim_setup import prepare

    run, setup = _run_at(0.45, 0.65)
    prof = gpu_profile_dict(GpuFit(setup.gpu_name, 0.45, 0.65, 0.05, 0.0, 1, objective_default=0.0), [], ["x"])
    prof["recommended"] = False
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(prof))
    assert load_gpu_profile(path).recommended is False
    info: dict = {}
    poor_profile_warning(load_gpu_profile(path), info)
    assert len(info["warnings"]) == 1 and "not recommended" in info["warnings"][0]
    sim = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(path)))
    assert any("not recommended" in w for w in sim.cost_info["warnings"])
    prof["recommended"] = True  # and a profile that beats the default, or an older one that does not say, is quiet
    path.write_text(json.dumps(prof))
    del prof["recommended"]
    (tmp_path / "old.json").write_text(json.dumps(prof))
    assert load_gpu_profile(path).recommended and load_gpu_profile(tmp_path / "old.json").recommended


def test_validate_warns_above_its_figures_when_the_profile_is_not_recommended(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    stage = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / \
        "stage_0_lifecycle_metrics.json"
    prof = gpu_profile_dict(GpuFit("NVIDIA H100 80GB SXM5", 0.45, 0.65, 0.05, 0.0, 1, objective_default=0.0), [],
                            ["x"])
    prof["recommended"] = False
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(prof))
    res = CliRunner().invoke(app, ["validate", str(stage), "--gpu", "H100", "--model", MODEL, "--gpu-profile",
                                   str(path)])
    first = " ".join(res.output.split("predicted vs measured")[0].split())  # above the figures, as simulate's
    assert "WARNING: GPU profile" in first and "not recommended" in first


def test_search_warns_under_its_header_when_the_profile_is_not_recommended(tmp_path):
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    # the reason the file gives (its recommended_note) is the one said, in the text and in --json's notes
    prof = gpu_profile_dict(GpuFit("NVIDIA H100 80GB SXM5", 0.45, 0.65, 0.05, 0.0, 1, objective_default=0.0), [],
                            ["x"])
    prof["recommended"], prof["recommended_note"] = False, "its FLOP fraction was set by TTFT alone"
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(prof))
    args = ["search", MODEL, "--gpus", "H100", "--tp", "1", "--prompt-lengths", "fixed:256", "--output-lengths",
            "fixed:32", "--num-requests", "60", "--slo", "ttft=500ms,tpot=50ms", "--rate", "5", "--gpu-profile",
            str(path)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    said = text.find("warning: GPU profile")
    assert 0 < said < text.find("winner:")  # under the header, before the winner
    assert "not recommended — its FLOP fraction was set by TTFT alone" in text[said:]
    doc = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert any(n.startswith("warning: GPU profile") and "not recommended" in n for n in doc["notes"])
