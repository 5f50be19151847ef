"""validate takes the GPU from the run's record when --gpu is not given, as it takes the model (a fresh user's trial:
`kvledger validate stage_3_lifecycle_metrics.json` asked for --gpu though the manifests beside it name the node's
accelerator, which goodput and cost already read).

tests/evidence/data/inference-perf/manifests.yaml: nodeSelector cloud.google.com/gke-accelerator nvidia-h100-80gb, the
catalog's alias of nvidia_h100_sxm (NVIDIA H100 80GB SXM5); MODEL_ID meta-llama/Llama-3.1-8B-Instruct."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.validate import validate_file
from kvledger.errors import InputError

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
STAGE = str(DATA / "inference-perf" / "stage_0_lifecycle_metrics.json")


def test_the_records_gpu_replays_as_the_flag_would():
    from_record = validate_file(STAGE, SimRequestArgs(model=None, gpu=None))
    given = validate_file(STAGE, SimRequestArgs(model=None, gpu="H100"))
    assert from_record.gpu == given.gpu == "NVIDIA H100 80GB SXM5"
    assert from_record.errors == given.errors  # the same replay, figure for figure
    said = [n for n in from_record.notes if n.startswith("GPU ")]
    # nvidia-h100-80gb is a name the SXM and PCIe rows both answer to: the note says which was taken, and the other
    assert len(said) == 1 and said[0].endswith("manifests.yaml (nvidia-h100-80gb; no --gpu given); --gpu "
                                               "nvidia-h100-80gb → NVIDIA H100 80GB SXM5 (also: H100 80GB PCIe "
                                               "(--gpu h100-pcie); name one to choose)")
    assert not any(n.startswith("GPU ") for n in given.notes)  # the flag wins and needs no note


def test_a_record_without_a_gpu_asks_for_the_flag():
    # AIPerf's per-request export names the model's endpoint, not the GPU it ran on
    with pytest.raises(InputError, match=r"the run's record names no GPU; pass --gpu"):
        validate_file(str(DATA / "aiperf" / "run1_profile_export.jsonl"),
                      SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu=None))


def test_an_engine_version_nobody_named_is_said_to_be_assumed():
    # AIPerf's export names no engine version, and no --engine-version is given: the newest rules read are assumed,
    # and the notes say so (a fresh user's trial found a stage replayed under vLLM 0.33.0 with nothing saying why)
    from kvledger.accounting.vllm_rules import LATEST

    out = validate_file(str(DATA / "aiperf" / "run1_profile_export.jsonl"),
                        SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100"))
    said = [n for n in out.notes if n.startswith("WARNING: engine version:")]
    assert said == [f"WARNING: engine version: neither the run's record nor --engine-version names it: vLLM "
                    f"{LATEST}'s rules assumed (the newest read); a release's async scheduling and host time per step "
                    "can move the replayed latency by more than its band: pass --engine-version as launched"]
    # the manifests' container image names vLLM 0.11.0: no assumption to state
    assert not any("engine version:" in n for n in validate_file(STAGE, SimRequestArgs(model=None,
                                                                                                gpu=None)).notes)


def test_a_gpu_the_catalog_does_not_know_asks_for_the_flag(tmp_path):
    # a Deployment whose node accelerator is not in the catalog: the error names it and asks for --gpu
    import shutil

    for name in ("stage_0_lifecycle_metrics.json", "config.yaml", "manifests.yaml"):
        shutil.copy(DATA / "inference-perf" / name, tmp_path / name)
    m = tmp_path / "manifests.yaml"
    m.write_text(m.read_text().replace("nvidia-h100-80gb", "acme-tpu-9000"))
    with pytest.raises(InputError, match=r"the run's record names the GPU 'acme-tpu-9000', which the catalog does not "
                                         r"know; pass --gpu"):
        validate_file(str(tmp_path / "stage_0_lifecycle_metrics.json"), SimRequestArgs(model=None, gpu=None))


def test_a_replay_the_records_gpu_cannot_take_says_where_the_gpu_came_from(tmp_path):
    # the Deployment's node accelerator made a Tesla T4 (14.58 GiB CUDA total, no bf16): Llama-3.1-8B-Instruct's
    # 14.96 GiB of bf16 weights cannot be planned there; the refusal names the GPU the record gave, which the user
    # never typed
    import shutil

    for name in ("stage_0_lifecycle_metrics.json", "config.yaml", "manifests.yaml"):
        shutil.copy(DATA / "inference-perf" / name, tmp_path / name)
    m = tmp_path / "manifests.yaml"
    m.write_text(m.read_text().replace("nvidia-h100-80gb", "nvidia-tesla-t4"))
    with pytest.raises(InputError) as err:
        validate_file(str(tmp_path / "stage_0_lifecycle_metrics.json"), SimRequestArgs(model=None, gpu=None))
    assert "GPU NVIDIA Tesla T4 from " in str(err.value) and "(nvidia-tesla-t4; no --gpu given), but " in str(err.value)


def test_an_error_of_another_flag_does_not_blame_the_records_gpu():
    # a fresh-user trial: "GPU NVIDIA H100 80GB SXM5 from manifests.yaml (…), but --engine-version 'banana' is not a
    # version like 0.10.2" read as if the GPU were wrong; the flag's own error stands alone
    with pytest.raises(InputError) as err:
        validate_file(str(DATA / "inference-perf" / "stage_0_lifecycle_metrics.json"),
                      SimRequestArgs(model=None, gpu=None, engine_version="banana"))
    assert str(err.value) == "--engine-version 'banana' is not a version like 0.10.2"


def test_a_model_of_another_architecture_than_the_record_is_warned_of_first():
    # the Deployment served Llama-3.1-8B-Instruct (32 layers, 4,096 hidden, 8 KV heads × 128); Qwen3-8B has 36 layers:
    # another model than the one measured, warned of above the table (a second fresh user found one note at the
    # bottom); the base Llama-3.1-8B has the record's shape, so it keeps the plain note
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    qwen = validate_file(STAGE, SimRequestArgs(model="Qwen/Qwen3-8B", gpu=None))
    warned = [n for n in qwen.notes if n.startswith("WARNING: --model Qwen/Qwen3-8B replayed, as given")]
    assert len(warned) == 1 and warned[0].endswith(
        "another architecture (36 layers, 4,096 hidden, 8 KV heads × 128 against 32, 4,096, 8 × 128): the replay is "
        "of a model the run did not measure")
    base = validate_file(STAGE, SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu=None))
    assert any(n.startswith("--model meta-llama/Llama-3.1-8B replayed, as given") for n in base.notes)
    assert not any(n.startswith("WARNING") for n in base.notes)
    out = CliRunner().invoke(app, ["validate", STAGE, "--model", "Qwen/Qwen3-8B"], env={"COLUMNS": "400"}).output
    assert out.index("note: WARNING: --model Qwen/Qwen3-8B") < out.index("predicted vs measured")
    assert out.count("note: WARNING: --model Qwen/Qwen3-8B") == 1


def test_a_start_up_refusal_on_the_records_gpu_says_the_record_contradicts_it(tmp_path, cli_entry):
    # the record's node made a Tesla T4 (sm75) and its image vLLM 0.11.0, whose V1 engine gives a GPU below SM80
    # FLEX_ATTENTION only ("FlexAttention does not support quantized kv-cache"): an FP8 KV cache cannot start there.
    # The run did start, so the record (its GPU or version) contradicts the rule: bad input, exit 2, as for a plan
    # that does not fit the record's GPU; with --gpu T4 given the refusal stands as plan gives it, exit 3
    import shutil

    for name in ("stage_0_lifecycle_metrics.json", "config.yaml", "manifests.yaml"):
        shutil.copy(DATA / "inference-perf" / name, tmp_path / name)
    m = tmp_path / "manifests.yaml"
    m.write_text(m.read_text().replace("nvidia-h100-80gb", "nvidia-tesla-t4"))
    stage = str(tmp_path / "stage_0_lifecycle_metrics.json")
    code, _, err = cli_entry("validate", stage, "--kv-cache-dtype", "fp8")
    said = " ".join(err.split())
    assert code == 2 and "GPU NVIDIA Tesla T4 from " in said and "(nvidia-tesla-t4; no --gpu given), but " in said
    assert "vLLM 0.11.0 refuses an FP8 KV cache" in said and "FlexAttention does not support quantized kv-cache" in said
    assert said.endswith("The record is of a run that started, so it contradicts this start-up rule: check the GPU and "
                         "engine version the record names (or pass --gpu and --engine-version for the ones that ran).")
    assert "Or pass --model" not in said  # the model is not what is refused
    code, _, err = cli_entry("validate", stage, "--kv-cache-dtype", "fp8", "--gpu", "T4")
    assert code == 3 and err.startswith("error: --kv-cache-dtype fp8: vLLM 0.11.0 refuses an FP8 KV cache")
