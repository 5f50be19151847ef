"""What a fresh-user trial found in calibrate and validate on inference-perf stages, each pinned: a --model the user
typed wins over the model the run's record names (with a note when they differ); no output lands on a file the command
read beside its inputs (a stage's client config.yaml); the poor-fit hints suggest only flags not given; the GPU scope
reports its leave-one-out errors; a record's model found two folders above is named with why it cannot be used; the
prompt pool's note says no repeat is served from cache when prefix caching is off."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.calibration import gpu_profile_file
from kvledger.calibration.gpu_fit import GpuFit
from kvledger.cli.main import app
from kvledger.errors import InputError

STAGES = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
H100 = "NVIDIA H100 80GB SXM5"
RECORD = "meta-llama/Meta-Llama-3-8B-Instruct"  # the bundled config.yaml's server.model_name (not a bundled model)
L8 = "meta-llama/Llama-3.1-8B"
ENGINE = ["--gpu", "H100", "--engine-version", "0.11.0", "--max-model-len", "512", "--max-num-seqs", "128"]
runner = CliRunner()


def _run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


def _refused(*args: str) -> str:
    """The one-paragraph error the command ends with (the console entry prints it and exits with status 2)."""
    res = _run(*args)
    assert isinstance(res.exception, InputError), res.output
    return " ".join(str(res.exception).split())


@pytest.fixture()
def fitted_on(monkeypatch):
    """Skip the fractions' search: a fit on two runs finds 0.5/0.6, on one run 0.4/0.6 (so a leave-one-out row is
    told apart from the fit on all); the runs each fit was given are kept."""
    seen: list[list[str]] = []

    def fake(items, **kw):
        seen.append([run.label for run, _ in items])
        return GpuFit(H100, 0.5 if len(items) > 1 else 0.4, 0.6, 1.0, 1.0, 0)

    monkeypatch.setattr(gpu_profile_file, "fit_gpu_fractions", fake)
    return seen


def _sweep_layout(root: Path, model: str = RECORD) -> Path:
    """kubecon NA 2025's layout: the client config two folders above the stage files (``<sweep>/config.yaml`` over
    ``<sweep>/vllm/results/``)."""
    results = root / "vllm" / "results"
    results.mkdir(parents=True)
    for i in (2, 3):
        shutil.copy(STAGES / f"stage_{i}_lifecycle_metrics.json", results)
    (root / "config.yaml").write_text((STAGES / "config.yaml").read_text().replace(RECORD, model))
    return results


def test_a_typed_model_wins_over_the_records_in_gpu_scope_model_scope_and_validate(fitted_on):
    # was: exit 2, "model 'meta-llama/Meta-Llama-3-8B-Instruct' is not bundled" — the record's model overrode --model
    s2, s3 = (str(STAGES / f"stage_{i}_lifecycle_metrics.json") for i in (2, 3))
    # the record: the Deployment's MODEL_ID (manifests.yaml beside the stages), the client's name said beside it
    note = (f"--model {L8} replayed, as given; the run's record names meta-llama/Llama-3.1-8B-Instruct (from "
            f"{STAGES / 'manifests.yaml'} MODEL_ID; the client's config names {RECORD}, the name it sent, not the "
            f"model the engine served)")
    res = _run("calibrate", "--scope", "gpu", s2, s3, "--model", L8, *ENGINE, "--no-leave-one-out", "--json")
    assert res.exit_code == 0, res.output
    prof = json.loads(res.output)
    assert [r["model"] for r in prof["runs"]] == [f"{L8} (config of meta-llama/Meta-Llama-3.1-8B)"] * 2
    assert prof["notes"][0] == note  # once, though both stages' records name the other model
    val = _run("validate", s3, "--model", L8, *ENGINE, "--json")
    assert val.exit_code == 0, val.output
    assert json.loads(val.output)["notes"][0] == note
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.calibration.api import _record_model  # model scope: the same rule before its fit
    from kvledger.calibration.targets import load_targets

    args = SimRequestArgs(model=L8, gpu="H100")
    assert _record_model(load_targets(s2) + load_targets(s3), args) == (args, [note])


def test_no_output_replaces_a_file_read_beside_the_inputs(tmp_path):
    # was: goodput --out config.yaml --force replaced the client config it had just read beside the stage file
    results = _sweep_layout(tmp_path, L8)
    stage = str(results / "stage_2_lifecycle_metrics.json")
    shutil.copy(STAGES / "config.yaml", results / "config.yaml")  # the nearest client config: beside the stage
    (results.parent / "manifests.yaml").write_text("kind: Deployment\n")
    before = (results / "config.yaml").read_text()
    for args in (["goodput", stage, "--slo", "tpot=50ms", "--out", str(results / "config.yaml"), "--force"],
                 ["calibrate", "--scope", "gpu", stage, "--gpu", "H100", "--out", str(results / "config.yaml"),
                  "--force"]):
        assert "is also an input of this command (given, or read beside a given file" in _refused(*args)
    assert (results / "config.yaml").read_text() == before
    # the sweep's config two folders above is read only when none lies nearer: then it is the one protected
    (results / "config.yaml").unlink()
    assert "is also an input" in _refused("goodput", stage, "--slo", "tpot=50ms", "--out",
                                          str(tmp_path / "config.yaml"), "--force")
    from kvledger.evidence.sidecars import implicit_inputs

    # manifests.yaml one folder up is read (kubecon's layout: the Deployment's launch flags, evidence.k8s_manifests)
    assert sorted(implicit_inputs([stage])) == sorted([tmp_path.resolve() / "config.yaml",
                                                       (results.parent / "manifests.yaml").resolve()])


def test_the_poor_fit_hints_suggest_only_flags_not_given():
    # kubecon `vllm` stage 0 (TTFT −56.3% in-sample), as test_gpu_fit's poor fit; kubecon's manifests pass 512
    from kvledger.accounting.gpu_profile import run_facts
    from kvledger.ledgers.profile_band import fit_quality

    runs = [run_facts({"label": "stage_0", "model": "M", "tp": 1, "saturated": None, "ttft_mean_rel_error": -0.563,
                       "tpot_mean_rel_error": 0.131, "throughput_rel_error": -0.001})]
    given = fit_quality(runs, True, False, {"max_model_len": 512, "engine_version": "0.11.0"})
    assert [h.split(":")[0] for h in given["hints"]] == ["--fit-frontend"]  # was: all three, both flags given
    rec = {"max_model_len": (512, "run/manifests.yaml")}
    other = fit_quality(runs, True, True, {"max_model_len": "1024", "engine_version": None}, recorded=rec)
    assert other["hints"][0] == ("--max-model-len as launched: 1024 was given, the runs' record (run/manifests.yaml) "
                                 "states 512 (it sets vLLM's default token budget)")
    assert other["hints"][1].startswith("--engine-version as the server was launched") and len(other["hints"]) == 2
    # a flag the runs' record states was applied by the replay: not asked for again; no other dataset is quoted
    applied = fit_quality(runs, True, True, {}, recorded={**rec, "engine_version": ("0.11.0", "run/manifests.yaml")})
    assert applied["hints"] == [] and "kubecon" not in str(fit_quality(runs, True, False))


def _gpu_fit_of(stages: tuple[int, int], tmp_path: Path):
    """(result, written profile) of ``calibrate --scope gpu`` on two of the bundled kubecon stages (the fit patched)."""
    s_a, s_b = (str(STAGES / f"stage_{i}_lifecycle_metrics.json") for i in stages)
    out = tmp_path / "g.json"
    res = _run("calibrate", "--scope", "gpu", s_a, s_b, "--model", L8, *ENGINE, "--out", str(out))
    assert res.exit_code == 0, res.output
    return res, json.loads(out.read_text())


def test_the_gpu_scope_reports_each_runs_leave_one_out_error(fitted_on, tmp_path):
    # was: --leave-one-out (the default) printed and wrote nothing for --scope gpu
    res, prof = _gpu_fit_of((2, 3), tmp_path)
    s2 = str(STAGES / "stage_2_lifecycle_metrics.json")
    loo = prof["leave_one_out"]
    # the fit on both, then one fit without each: stage 2 priced by the fit on stage 3 alone, and back
    n2, n3 = "data/inference-perf/stage_2", "data/inference-perf/stage_3"  # a stage file by its two folders
    assert fitted_on == [[n2, n3], [n3], [n2]]
    assert [(r["run"], r["fitted_on"], r["flops_fraction"]) for r in loo] == [(n2, [n3], 0.4), (n3, [n2], 0.4)]
    assert "leave-one-out: each run under the fractions fitted on the others" in res.output
    assert "data/inference-perf/stage_2 0.400/0.600" in res.output
    # the same fractions price the same replay: with the fit patched to 0.4 for every set, the held-out errors are
    # the in-sample ones
    fitted_on.clear()
    # one run on stage 2 alone: its text on stdout, its profile (the --json document) in --out's file
    one = _run("calibrate", "--scope", "gpu", s2, "--model", L8, *ENGINE, "--out", str(tmp_path / "one.json"))
    assert one.exit_code == 0, one.output
    fitted = json.loads((tmp_path / "one.json").read_text())["runs"][0]
    assert fitted["ttft_mean_rel_error"] == loo[0]["ttft_mean_rel_error"]
    # each held-out row says whether the replay saturated, as the fitted rows do (the ⚠ on its latencies)
    assert "saturated" in loo[0] and loo[0]["saturated"] == fitted["saturated"]
    assert loo[0]["model"].startswith(L8) and loo[0]["tp"] == 1 and "label" not in loo[0]
    assert "leave-one-out: none — it needs two runs or more" in one.output


def test_a_records_model_two_folders_up_is_named_and_why_it_cannot_be_used(tmp_path):
    # was: "the run's record names no model; pass --model" though <sweep>/config.yaml names server.model_name
    stage = str(_sweep_layout(tmp_path) / "stage_3_lifecycle_metrics.json")
    said = _refused("validate", stage, "--gpu", "H100")
    assert (f"model {RECORD} from {tmp_path.resolve() / 'config.yaml'} server.model_name (no --model given), but "
            f"model '{RECORD}' is not bundled") in said


def test_the_pool_note_says_no_repeat_is_cached_with_prefix_caching_off(tmp_path):
    stage = str(_sweep_layout(tmp_path, L8) / "stage_3_lifecycle_metrics.json")
    res = _run("validate", stage, *ENGINE, "--no-enable-prefix-caching", "--json")
    assert res.exit_code == 0, res.output
    notes = json.loads(res.output)["notes"]
    assert notes[0].startswith(f"model {L8} from {tmp_path.resolve() / 'config.yaml'} server.model_name")
    pool = [n for n in notes if "shared_prefix pool of 100 whole prompts" in n]
    # was: "…shared, so prefix caching serves a repeat" with prefix caching off
    assert len(pool) == 1 and pool[0].endswith("shared, but prefix caching is off in the replayed engine, so the "
                                               "pool is not reused from cache: each repeat is prefilled again")


def test_a_saturated_held_out_run_is_flagged_under_the_leave_one_out_table():
    # was: the leave-one-out table printed a saturated run's latency errors with no ⚠ (the fitted-run table had one)
    import io

    from rich.console import Console

    from kvledger.report.calibration_view import error_table, saturated_runs_warning

    rows = [{"run": "calm", "ttft_mean_rel_error": -0.05, "saturated": None},
            {"run": "queued", "ttft_mean_rel_error": 2.5, "throughput_rel_error": 0.04,
             "saturated": {"sides": ["simulated"], "notes": []}}]
    con = Console(file=io.StringIO(), width=200, emoji=False)
    con.print(error_table("leave-one-out", rows, "run"))
    saturated_runs_warning(rows, con, "run", " left out")
    out = con.file.getvalue()
    queued = next(line for line in out.splitlines() if "queued" in line and "+250" in line)
    calm = next(line for line in out.splitlines() if "calm" in line)
    assert "⚠" in queued and "⚠" not in calm
    assert queued.count("⚠") == 1  # on its one latency error, not on the missing ones (—) nor on throughput
    # only its replay queued: the fit on the others predicts a queue the measured run did not have (a real miss)
    assert ("WARNING: the prediction saturates where the measured run did not (⚠), for run(s) left out: queued;") in out


def test_a_stage_that_fell_behind_is_flagged_saturated_in_both_tables(fitted_on, tmp_path):
    # was: a stage file holds no records, so only the closed-loop replay was checked for a growing queue (it cannot
    # grow one) and kubecon's stage 4 printed its latency errors without ⚠. Its load summary: 148.89 req/s requested,
    # 117.04 achieved by the client (79% < 95%): saturated on the measured side, validate's rule
    res, prof = _gpu_fit_of((3, 4), tmp_path)
    fitted = {r["label"]: r["saturated"] for r in prof["runs"]}
    held = {r["run"]: r["saturated"] for r in prof["leave_one_out"]}
    s3, s4 = "data/inference-perf/stage_3", "data/inference-perf/stage_4"
    for sat in (fitted[s4], held[s4]):
        assert "measured" in sat["sides"]
        assert sat["notes"][0].startswith("measured: the stage was at saturation (client achieved 117 and engine "
                                          "served ")
        assert "of 148.9 req/s requested; below it needs ≥ 95% and ≥ 90%)" in sat["notes"][0]
    # stage 3: 111.92 requested, 111.92 achieved — the measured side kept up (the replay at the fixture's slow 0.5/0.6
    # fractions does not, and says so as its own side)
    assert "measured" not in (fitted[s3] or {"sides": []})["sides"]
    warned = [line for line in res.output.splitlines() if line.startswith("WARNING: saturated run(s)")]
    assert [w.split(" (⚠")[0] for w in warned] == ["WARNING: saturated run(s)", "WARNING: saturated run(s) left out"]
    assert all(s4 in w.split(";")[0] for w in warned)
    assert not any(s3 in w for w in warned)  # it kept up: not a saturated run
    missed = [line for line in res.output.splitlines() if line.startswith("WARNING: the prediction saturates")]
    assert missed and all(f"{s3}; the " in m and "predicts a queue that the measured run did not "
                          "have: its capacity is underestimated" in m for m in missed)
