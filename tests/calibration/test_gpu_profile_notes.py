"""``calibrate --scope gpu`` on inference-perf stages: the profile carries the notes ``validate`` gives on the same
stages (the client's prompt pool, its closed-loop cap, the TPOT compared), each once; the profile's label names each
run once, by its experiment folder where file names repeat."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.accounting.gpu_profile import load_gpu_profile, run_names
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration import gpu_profile_file
from kvledger.calibration.gpu_fit import GpuFit
from kvledger.calibration.gpu_profile_file import calibrate_gpu_files
from kvledger.cli.main import app

STAGES = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
H100 = "NVIDIA H100 80GB SXM5"
ARGS = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version="0.11.0", max_model_len=512,
                      max_num_seqs=128)


def _fixed_fractions(items, **kw) -> GpuFit:
    return GpuFit(H100, 0.5, 0.6, 1.0, 1.0, 0)


@pytest.fixture()
def fixed_fit(monkeypatch):
    # the notes and labels do not depend on the fractions: skip the search, price every run at 0.5/0.6
    monkeypatch.setattr(gpu_profile_file, "fit_gpu_fractions", _fixed_fractions)


def _experiment(root: Path, name: str = "vllm") -> Path:
    """A copy of the bundled stages 0 and 4 with their client config, whose model is made a bundled one (the sample
    names meta-llama/Meta-Llama-3-8B-Instruct, not bundled; the fit reads the model from the config)."""
    folder = root / name / "results"
    folder.mkdir(parents=True)
    for i in (0, 4):
        shutil.copy(STAGES / f"stage_{i}_lifecycle_metrics.json", folder)
    text = (STAGES / "config.yaml").read_text()
    (folder / "config.yaml").write_text(text.replace("meta-llama/Meta-Llama-3-8B-Instruct", "meta-llama/Llama-3.1-8B"))
    return folder


@pytest.fixture()
def exp(tmp_path) -> Path:
    return _experiment(tmp_path)


@pytest.fixture(scope="module")
def both_stages(tmp_path_factory) -> tuple[Path, dict]:
    """(an experiment folder, the profile of its stages 0 and 4 under ``fixed_fit``'s fractions): computed once for the
    tests that read that same profile."""
    folder = _experiment(tmp_path_factory.mktemp("both"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_profile_file, "fit_gpu_fractions", _fixed_fractions)
        prof = calibrate_gpu_files([str(folder / f"stage_{i}_lifecycle_metrics.json") for i in (0, 4)], ARGS)
    return folder, prof


def test_the_profile_carries_validates_client_notes_once(both_stages):
    # stage 0 (1 req/s) kept up; stage 4 (148.89 req/s requested, 117.04 achieved < 95%) fell behind, so it is replayed
    # as a closed loop of config.yaml's 44 workers × 10 = 440 users. Notes both stages give appear once.
    exp, prof = both_stages
    s4 = str(exp / "stage_4_lifecycle_metrics.json")
    notes = prof["notes"]
    assert len(notes) == len(set(notes))
    loop = [n for n in notes if "the client fell behind" in n]
    assert loop == ["the client fell behind its rate: replayed under a cap of 440 requests in flight, from "
                    f"{exp / 'config.yaml'}: load.num_workers 44 × load.worker_max_concurrency 10 (inference-perf: "
                    "each worker holds that many requests in flight at most), each request sent at its time on the "
                    "requested schedule or, with that many in flight, as one finishes (this stage: "
                    f"{exp.parent.name}/{exp.name}/stage_4, achieved 117 of 149 req/s requested)"]  # a stage's folders
    # the pool: num_unique_system_prompts 10 × num_users_per_system_prompt 10 = 100 whole prompts re-sent in turn
    assert any(n.startswith(f"{exp / 'config.yaml'}: shared_prefix pool of 100 whole prompts") for n in notes)
    assert any(n.startswith("TPOT: inference-perf's time_per_output_token") for n in notes)
    # every note validate gives on stage 4 but its engine's (KV pool, async scheduling) is in the profile
    res = CliRunner().invoke(app, ["validate", s4, "--model", ARGS.model, "--gpu", "H100", "--engine-version",
                                   "0.11.0", "--max-model-len", "512", "--max-num-seqs", "128", "--json"])
    assert res.exit_code == 0, res.output
    # (and validate's own word on its bands: this fixture is one of the files behind them, ledgers.band_members)
    said = [n for n in json.loads(res.output)["notes"] if not n.startswith(("KV pool", "async scheduling",
                                                                            "bands in sample"))]
    # aggregates-only, TPOT, the counted output length (62.86 counted against config.yaml's 64: +1.8%), pool, loop
    assert len(said) == 5 and set(said) <= set(notes)
    assert any(n.startswith("output throughput: the file's tokens/s counts") and n.endswith(
        "(this stage: 7,094.38 tokens/s, output_len mean 62.86, min 10: 64/62.86 − 1 = +1.8%)") for n in notes)


def test_the_label_names_each_run_once_and_the_text_prints_the_notes(fixed_fit, exp, tmp_path):
    out, s0 = tmp_path / "h100.json", str(exp / "stage_0_lifecycle_metrics.json")
    args = ["calibrate", "--scope", "gpu", s0, "--model", ARGS.model, "--gpu", "H100", "--engine-version", "0.11.0",
            "--max-model-len", "512", "--out", str(out)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "note: " + f"{exp / 'config.yaml'}: shared_prefix pool of 100 whole prompts" in res.output
    # a stage file by the two folders it lies in (before, "stage_0_lifecycle_metrics": every experiment's stage 0)
    assert load_gpu_profile(out).label == f"GPU profile {out} (fitted on {exp.parent.name}/{exp.name}/stage_0)"
    # the run given twice is refused (it weighed twice and was labelled "stage_0_lifecycle_metrics,
    # stage_0_lifecycle_metrics"); a profile written so before names it once (the next test)
    res = CliRunner().invoke(app, [*args[:4], s0, *args[4:-2]])  # no --out: the written file is not refused first
    assert res.exit_code != 0 and "the same file given twice" in str(res.exception)


def test_runs_of_one_file_name_are_named_by_their_experiment_folder(tmp_path):
    # a profile whose runs carry the bare file name (as calibrate wrote them before it named folders): three runs,
    # two from `vllm/results/`, one from `vllm+batch_size/results/`, all `stage_0_lifecycle_metrics`; one repeated
    name = "stage_0_lifecycle_metrics"
    runs = [{"label": name, "source": str(tmp_path / e / "results" / f"{name}.json"), "model": "M", "tp": 1,
             "ttft_mean_rel_error": t, "tpot_mean_rel_error": 0.01}
            for e, t in (("vllm", -0.5), ("vllm+batch_size", -0.25), ("vllm", -0.5))]
    assert run_names(runs) == ["vllm/stage_0", "vllm+batch_size/stage_0", "vllm/stage_0"]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 1, "gpu": H100, "flops_fraction": 0.5,
                                "bandwidth_fraction": 0.6, "runs": runs}))
    prof = load_gpu_profile(path)
    assert prof.label == f"GPU profile {path} (fitted on vllm/stage_0, vllm+batch_size/stage_0)"
    # the model and TP once, each run once: −0.5 → −50%, −0.25 → −25%, 0.01 → +1%
    assert prof.fit_error == "M TP 1: vllm/stage_0 TTFT -50%, TPOT +1%; vllm+batch_size/stage_0 TTFT -25%, TPOT +1%"
    # read once per file version: the same file gives the same object; rewritten (another size), it is read again
    assert load_gpu_profile(path) is prof
    path.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 1, "gpu": H100, "flops_fraction": 0.55,
                                "bandwidth_fraction": 0.6, "runs": runs}))
    assert load_gpu_profile(path).flops_fraction == 0.55


def test_stage_files_of_two_experiments_get_folder_labels(fixed_fit, tmp_path):
    # the same stage file name in two experiment folders (each with its client config): validate's labels, in the
    # profile too
    paths = [str(_experiment(tmp_path, e) / "stage_0_lifecycle_metrics.json") for e in ("vllm", "vllm+batch_size")]
    prof = calibrate_gpu_files(paths, ARGS)
    assert [r["label"] for r in prof["runs"]] == ["vllm/stage_0", "vllm+batch_size/stage_0"]
    assert sum("shared_prefix pool of 100" in n for n in prof["notes"]) == 2  # one per experiment's config.yaml


def test_the_profile_records_each_runs_saturation_and_whether_its_capacity_was_measured(fixed_fit, both_stages,
                                                                                      tmp_path):
    # stage 0 (1 req/s) kept up: written false, not null (null is an older file's "not said", which profile_band
    # counts as not measured and says so); stage 4 fell behind its rate (117 of 149 req/s requested, under 95%:
    # sweep_bands.below_saturation) so its measured side is saturated, and its throughput measured the capacity
    exp, both = both_stages
    s0 = str(exp / "stage_0_lifecycle_metrics.json")
    assert both["runs"][0]["saturated"] is False and "measured" in both["runs"][1]["saturated"]["sides"]
    assert both["fit_quality"]["capacity_unmeasured"] is False
    below = calibrate_gpu_files([s0], ARGS)
    assert below["fit_quality"]["capacity_unmeasured"] is True
    (tmp_path / "p.json").write_text(json.dumps(below))
    assert [r["saturated"] for r in load_gpu_profile(str(tmp_path / "p.json")).runs] == [False]  # as --gpu-profile
