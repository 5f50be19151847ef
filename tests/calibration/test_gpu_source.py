"""Where calibrate and validate take the GPU from without --gpu (``kvledger.calibration.gpu_source``), and a GPU
profile that fitted no client latency (fresh-user trial):

1. ``calibrate`` asked for --gpu that ``validate`` read from the same run's record: it now takes the one GPU every
   run's record names, said in a note, and refuses records naming several GPUs or none, run by run.
2. ``calibrate --help`` told a --scope gpu profile to be used with --step-cost; it is --gpu-profile's.
3. ``--client-latency profile:FILE`` of a profile fitted without --fit-frontend (frontend_s 0) added 0 ms silently.
4. ``validate --gpu-profile FILE`` on a run whose record names no GPU asked for --gpu the profile names.

The runs: three requests, 300-token prompts, 4 output tokens, TTFT 100 ms, E2E 200 ms (tests/cli/test_calibrate_cli.py
``_three_requests``), each in its own folder with a meta.json naming the model and, where a test says, the GPU as
LLMServingSim's meta.json does (``hardware.device_name``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.client_latency import client_latency_of
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
H100 = "NVIDIA H100 80GB SXM5"  # nvidia-smi's "NVIDIA H100 80GB HBM3" is this catalog row (test_recorded_gpu.py)
TRAINING = (Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "inference-sim-training"
            / "default_args" / "20260217-155451-llama-2-7b-tp1-codegen" / "results" / "stage_0_lifecycle_metrics.json")


def _run(d: Path, device: str | None) -> str:
    """The three-request run in ``d`` (module docstring), its meta.json naming ``device`` (None: no GPU); its path."""
    d.mkdir(parents=True, exist_ok=True)
    reqs = [{"request_id": f"r{i}", "input_toks": 300, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    meta = {"model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0"}
    if device:
        meta["hardware"] = {"device_name": device, "device_count": 1}
    (d / "meta.json").write_text(json.dumps(meta))
    return str(d / "requests.jsonl")


def _invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


def _refused(*args: str) -> str:
    res = _invoke(*args)
    assert isinstance(res.exception, InputError), (res.output, res.exception)
    return " ".join(str(res.exception).split())


def test_calibrate_takes_the_gpu_its_runs_records_name_and_says_so(tmp_path):
    run = _run(tmp_path / "h100", "NVIDIA H100 80GB HBM3")
    for scope in ("gpu", "model"):
        out = tmp_path / f"{scope}.json"
        res = _invoke("calibrate", run, "--scope", scope, "--no-leave-one-out", "--out", str(out))
        assert res.exit_code == 0, (res.output, res.exception)
        prof = json.loads(out.read_text())
        # the record's device name read through the catalog, as validate reads it; the note says where from
        assert prof["gpu"] == H100
        said = [n for n in prof["notes"] if n.startswith(f"GPU {H100} from ")]
        assert len(said) == 1 and said[0].endswith("(NVIDIA H100 80GB HBM3; no --gpu given)"), prof["notes"]
    # the same fit as with --gpu given: the record only named what the flag would have
    given = tmp_path / "given.json"
    assert _invoke("calibrate", run, "--scope", "gpu", "--gpu", "H100", "--no-leave-one-out", "--out",
                   str(given)).exit_code == 0
    mine, theirs = json.loads((tmp_path / "gpu.json").read_text()), json.loads(given.read_text())
    assert (mine["flops_fraction"], mine["bandwidth_fraction"]) == (theirs["flops_fraction"],
                                                                    theirs["bandwidth_fraction"])
    # fitted without --fit-frontend: frontend_s 0, marked as not fitted (issue 3 reads the mark)
    assert mine["fit"]["frontend_s"] == 0.0 and mine["fit"]["frontend_fitted"] is False


def test_calibrate_without_gpu_refuses_runs_that_name_several_gpus_or_none(tmp_path):
    h100, rtx = _run(tmp_path / "a", "NVIDIA H100 80GB HBM3"), _run(tmp_path / "b", "NVIDIA GeForce RTX 4090")
    none = _run(tmp_path / "c", None)
    for scope in ("gpu", "model"):
        text = _refused("calibrate", h100, rtx, "--scope", scope, "--no-leave-one-out")
        # each run by its label (an LLMServingSim run: its folder, here <tmp>/a) and what its record names, the
        # catalog's row beside a name it reads as another (nvidia-smi's HBM3 name: the SXM5 row)
        assert "but they name several GPUs (" in text and "/a: NVIDIA H100 80GB HBM3 (NVIDIA H100 80GB SXM5); " in text
        assert text.endswith("/b: NVIDIA GeForce RTX 4090): pass --gpu (the GPU they ran on: a catalog name, see "
                             "`kvledger gpus`, or a GPU file), and leave out the runs of the other GPUs")
        text = _refused("calibrate", h100, none, "--scope", scope, "--no-leave-one-out")
        assert "but not every one names a GPU the catalog knows (" in text and "/c: no GPU): pass --gpu" in text
        assert "leave out" not in text
    # one run naming none: validate's words
    assert _refused("calibrate", none, "--scope", "gpu").endswith("the run's record names no GPU; pass --gpu (the GPU "
                                                                  "it ran on: a catalog name, see `kvledger gpus`, "
                                                                  "or a GPU file)")
    # a --gpu the record contradicts stays refused (recorded_gpu.check_recorded_gpu)
    assert "the run's record says it ran on NVIDIA GeForce RTX 4090" in _refused(
        "calibrate", rtx, "--scope", "gpu", "--gpu", "H100")


def test_calibrate_help_pairs_each_scope_with_its_flag():
    text = " ".join(_invoke("calibrate", "--help").output.split())
    assert ("Write the profile here (JSON): a --scope gpu profile is used with --gpu-profile FILE, a --scope model "
            "one with --step-cost FILE.") in text
    assert "use it with --step-cost FILE." not in text


def _profile(tmp_path: Path, **fit) -> str:
    """The bundled H100 profile with ``fit`` set in its ``fit`` object (``None`` values removed), written to a file."""
    from importlib import resources

    prof = json.loads((resources.files("kvledger.accounting") / "data" / "gpu_profiles" / "h100-sxm.json").read_text())
    prof["fit"].update(fit)
    prof["fit"] = {k: v for k, v in prof["fit"].items() if v is not None}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(prof))
    return str(path)


def test_a_profile_that_fitted_no_client_latency_is_refused_as_one(tmp_path):
    # calibrate --scope gpu without --fit-frontend writes frontend_s 0 and frontend_fitted false; a file written
    # before the mark has the 0 alone: both are a latency nobody fitted
    for mark in ({"frontend_fitted": False}, {}):
        path = _profile(tmp_path, frontend_s=0.0, set_up_frontend_s=None, **mark)  # no set-ups: calibrate writes none
        with pytest.raises(InputError) as err:
            client_latency_of(f"profile:{path}")
        assert str(err.value) == (f"--client-latency profile:{path}: the GPU profile fitted no client latency "
                                  "(fit.frontend_s is 0.0: it was calibrated without --fit-frontend), so it would add "
                                  "nothing; re-fit it with `kvledger calibrate --scope gpu --fit-frontend --out "
                                  "FILE.json`, or give --client-latency in ms (a duration such as 21ms)")
    # the bundled H100 file keeps its latency per set-up (fit.set_up_frontend_s): the refusal says how to read it
    path = _profile(tmp_path, frontend_s=0.0)
    with pytest.raises(InputError, match=r"its set-ups' fitted latencies \(fit.set_up_frontend_s: 'inference-sim/"
                                         r"training inference-perf client'\) are read with --client-latency "
                                         r"profile:NAME --gpu-profile "):
        client_latency_of(f"profile:{path}")
    # a fit that found 0 ms is kept, and its note says 0 ms was added
    got = client_latency_of(f"profile:{_profile(tmp_path, frontend_s=0.0, frontend_fitted=True)}")
    assert got.seconds == 0.0 and got.note().startswith("client latency 0 ms added to every request's TTFT and E2E")
    assert client_latency_of("0ms") is None  # a given 0 adds nothing, as before


def test_validate_refuses_it_without_blaming_the_records_gpu(tmp_path):
    # the kubecon-like case: the GPU comes from the run's record, and the refusal is the client latency's alone
    run = _run(tmp_path / "r", "NVIDIA H100 80GB HBM3")
    path = _profile(tmp_path, frontend_s=0.0, frontend_fitted=False)
    text = _refused("validate", run, "--client-latency", f"profile:{path}")
    assert text.startswith(f"--client-latency profile:{path}: the GPU profile fitted no client latency")


def test_validate_takes_the_gpu_from_the_gpu_profile_where_nothing_else_names_it(tmp_path):
    from kvledger.calibration.validate import validate_file

    run = _run(tmp_path / "r", None)
    args = SimRequestArgs(model=None, gpu=None, gpu_profile="bundled:h100-sxm")
    got = validate_file(run, args)
    # the bundled profile's "gpu": "NVIDIA H100 80GB SXM5"; the replay is the one --gpu H100 gives, figure for figure
    assert got.gpu == H100 and got.scope == "gpu"
    assert f"GPU {H100} from --gpu-profile bundled:h100-sxm (the GPU it was fitted on; neither --gpu nor the run's " \
           "record names one)" in got.notes
    flag = validate_file(run, SimRequestArgs(model=None, gpu="H100", gpu_profile="bundled:h100-sxm"))
    assert got.errors == flag.errors and not any(n.startswith("GPU ") for n in flag.notes)
    # without a profile, the error asks for --gpu as before
    with pytest.raises(InputError, match=r"the run's record names no GPU; pass --gpu"):
        validate_file(run, SimRequestArgs(model=None, gpu=None))


def test_a_gpu_profile_of_another_gpu_than_the_record_or_the_flag_is_refused(tmp_path):
    rtx = _run(tmp_path / "rtx", "NVIDIA GeForce RTX 4090")
    assert ("--gpu-profile bundled:h100-sxm was fitted on NVIDIA H100 80GB SXM5, not NVIDIA GeForce RTX 4090" in
            _refused("validate", rtx, "--gpu-profile", "bundled:h100-sxm"))
    none = _run(tmp_path / "none", None)
    assert ("--gpu-profile bundled:rtx-4090 was fitted on NVIDIA GeForce RTX 4090, not NVIDIA H100 80GB SXM5" in
            _refused("validate", none, "--gpu", "H100", "--gpu-profile", "bundled:rtx-4090"))


@pytest.mark.skipif(not TRAINING.is_file(), reason="../shared/data/measured-runs not beside the clone")
def test_an_inference_sim_training_stage_is_validated_on_its_profiles_gpu():
    # its exp-config.yaml names the model (Llama-2-7b) and TP 1, no GPU: the bundled H100 profile names it
    res = _invoke("validate", str(TRAINING), "--gpu-profile", "bundled:h100-sxm", "--json")
    assert res.exit_code == 0, (res.output, res.exception)
    got = json.loads(res.output)
    assert (got["gpu"], got["tp"], got["model"]) == (H100, 1, "meta-llama/Llama-2-7b-hf")
    assert any(n.startswith(f"GPU {H100} from --gpu-profile bundled:h100-sxm") for n in got["notes"])
    assert "pass --gpu" in _refused("validate", str(TRAINING))
