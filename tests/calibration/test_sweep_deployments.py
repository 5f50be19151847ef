"""validate --sweep compares one deployment's stages (fresh-user trial: a stage of kubecon's `vllm` and one of
`vllm+eagle` gave one knee, no warning)."""

from __future__ import annotations

import shutil
from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
DEPLOYMENT = """kind: Deployment
spec:
  template:
    spec:
      containers:
      - image: vllm/vllm-openai:v0.11.0
        args: ["--max-num-seqs={seqs}", "--max-model-len=512"]
"""
ARGS = ["--sweep", "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"]


def _deployment(root: Path, name: str, stage: int, seqs: int | None) -> str:
    results = root / name / "results"
    results.mkdir(parents=True)
    if seqs is not None:
        (root / name / "manifests.yaml").write_text(DEPLOYMENT.format(seqs=seqs))
    shutil.copy(DATA / f"stage_{stage}_lifecycle_metrics.json", results)
    return str(results / f"stage_{stage}_lifecycle_metrics.json")


def test_stages_launched_by_different_manifests_are_refused(tmp_path):
    a, b = _deployment(tmp_path, "a", 0, 128), _deployment(tmp_path, "b", 1, 256)
    res = CliRunner().invoke(app, ["validate", a, b, *ARGS])
    assert isinstance(res.exception, InputError), res.output
    text = " ".join(str(res.exception).split())
    assert "--sweep compares the load stages of one deployment; these were launched by different records" in text
    assert "a/manifests.yaml (stages at" in text and "b/manifests.yaml (stages at" in text


def test_stages_from_two_folders_without_a_record_are_compared_with_a_warning(tmp_path):
    a, b = _deployment(tmp_path, "a", 0, None), _deployment(tmp_path, "b", 1, None)
    res = CliRunner().invoke(app, ["validate", a, b, *ARGS], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    assert "WARNING: the stages come from 2 folders" in " ".join(res.output.split())


def test_several_per_request_runs_are_not_a_sweep_and_the_error_says_so(tmp_path):
    # fresh-user trial: `validate RUN_A RUN_B` (no --sweep) said "--sweep needs two or more load stages …"
    run = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "aiperf" / "run1_profile_export.jsonl")
    other = str(shutil.copy(run, tmp_path / "run2_profile_export.jsonl"))  # a second run (one file twice is refused)
    res = CliRunner().invoke(app, ["validate", run, other, "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"])
    assert isinstance(res.exception, InputError), res.output
    text = " ".join(str(res.exception).split())
    assert text.startswith("--sweep (or several files) compares the load stages of one sweep")
    # run1 is placed at its 100 clients (its profile_export_aiperf.json beside it states the cap); its copy alone
    # states neither a rate nor a cap: the reason, and one at a time (no "give the sweep's other stage files")
    assert ("these files hold 1 load stage, 1 per-request run whose file states neither a request rate nor a client "
            "cap (max_concurrency), so it has no place on a sweep's axis: such a run is replayed request by request "
            "and judged on its own. Validate them one at a time (kvledger validate FILE, one file per call).") in text


def test_one_stage_file_with_sweep_says_it_is_one_stage():
    # fresh-user trial: `validate stage_2_lifecycle_metrics.json --sweep` said "0 of these are per-request runs"
    stage = str(Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
                / "stage_2_lifecycle_metrics.json")
    res = CliRunner().invoke(app, ["validate", stage, *ARGS])
    assert isinstance(res.exception, InputError), res.output
    text = " ".join(str(res.exception).split())
    assert text.endswith(f"this file holds 1 load stage: give the sweep's other stage files too, or validate it on "
                         f"its own: kvledger validate {stage} without --sweep")



def test_a_stage_given_twice_is_refused(tmp_path):
    # the same stage file twice made two rows at one rate (a fresh-user trial: two 1.000 req/s rows, -68.2% and -68.0%)
    a = str(DATA / "stage_0_lifecycle_metrics.json")
    res = CliRunner().invoke(app, ["validate", a, a, *ARGS])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == f"{a}: the same file given twice; give each stage or run once"
    link = tmp_path / "again.json"  # the same file by another path
    link.symlink_to(a)
    res = CliRunner().invoke(app, ["validate", a, str(link), *ARGS])
    assert str(res.exception) == f"{a} and {link}: the same file given twice; give each stage or run once"


def test_calibrate_refuses_a_run_given_twice():
    # a run given twice would weigh twice in the fit (validate refuses it too)
    a = str(DATA / "stage_0_lifecycle_metrics.json")
    res = CliRunner().invoke(app, ["calibrate", a, a, "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B",
                                   "--scope", "gpu"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == f"{a}: the same file given twice; give each stage or run once"
