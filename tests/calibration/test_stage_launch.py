"""A stage file's launch record (inference-sim/training's ``exp-config.yaml``): validate replays the stage on the model,
TP and scheduler limits it states, and refuses a malformed one cleanly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.stage_launch import fixed_output_tokens, stage_launch
from kvledger.calibration.sweep import read_stage, stage_run
from kvledger.calibration.validate import validate_file
from kvledger.errors import FormatError

STAGE = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"
RECORD = """model: meta-llama/Llama-2-70b-hf
tensor_parallelism: 4
max_model_len: 4096
max_num_batched_tokens: 2048
max_num_seqs: 128
app: inference-perf
"""


def _experiment(tmp_path: Path, record: str) -> Path:
    """<exp>/exp-config.yaml and <exp>/results/stage_0_lifecycle_metrics.json, as inference-sim/training lays out."""
    (tmp_path / "results").mkdir()
    (tmp_path / "exp-config.yaml").write_text(record, encoding="utf-8")
    return Path(shutil.copy(STAGE, tmp_path / "results" / STAGE.name))


def test_validate_reads_tp_and_limits_from_the_launch_record(tmp_path):
    stage = _experiment(tmp_path, RECORD)
    launch = stage_launch(stage)
    assert launch.model == "meta-llama/Llama-2-70b-hf"
    assert launch.engine_kwargs == {"tensor_parallel_size": 4, "max_model_len": 4096, "max_num_batched_tokens": 2048,
                                    "max_num_seqs": 128}
    run = stage_run(read_stage(stage), "s0")
    assert run.measured.metadata.model == "meta-llama/Llama-2-70b-hf" and run.measured.metadata.num_gpus == 4
    # `kvledger validate` passes tp=None when --tp is not given: the record's TP 4 is taken (the 70B's 137.95 GB of
    # bf16 weights do not fit one 80 GB H100, so TP 1 would be refused), and its scheduler limits with it.
    # (~3 s: a 70B plan at TP 4 and a replay.)
    v = validate_file(str(stage), SimRequestArgs(model="meta-llama/Llama-2-70b-hf", gpu="H100", tp=None))
    assert v.tp == 4 and v.engine.max_num_seqs == 128 and v.engine.max_num_batched_tokens == 2048
    assert any("from the run's own record" in n and "tp 4" in n for n in v.notes)


def test_a_stage_without_a_record_states_nothing_and_a_bad_record_is_refused(tmp_path):
    assert stage_launch(STAGE).model is None and stage_launch(STAGE).engine_kwargs == {}
    bad = _experiment(tmp_path, "tensor_parallelism: four\n")
    with pytest.raises(FormatError, match="tensor_parallelism must be a positive integer"):
        stage_launch(bad)
    (tmp_path / "exp-config.yaml").write_text("[1, 2", encoding="utf-8")
    with pytest.raises(FormatError, match="cannot read the launch record as YAML"):
        stage_launch(bad)


def test_ignore_eos_fixes_the_generated_output_length(tmp_path):
    # the bundled kubecon client config beside the stage: ignore_eos true, shared_prefix.output_len 64
    assert fixed_output_tokens(STAGE) == 64
    stage = _experiment(tmp_path, RECORD)
    assert fixed_output_tokens(stage) is None  # no config.yaml beside this copy: the client's counts stand
    (stage.parent / "config.yaml").write_text("server:\n  ignore_eos: false\ndata:\n  shared_prefix:\n"
                                              "    output_len: 64\n", encoding="utf-8")
    assert fixed_output_tokens(stage) is None


def test_a_sweeps_one_client_config_two_folders_up_fixes_the_output_length(tmp_path):
    # kubecon NA 2025's layout: <sweep>/config.yaml (ignore_eos, output_len 64) ran every launch configuration,
    # <sweep>/<launch>/results/stage_k_….json. The bundled stage (E2E mean 0.48323 s, TTFT mean 0.03332 s, counted
    # output mean 62.35) then gets TPOT (0.48323 − 0.03332)/(64 − 1) = 7.141 ms, not /(62.35 − 1) = 7.333 ms
    cfg = (STAGE.parent / "config.yaml").read_text(encoding="utf-8")
    (tmp_path / "vllm" / "results").mkdir(parents=True)
    stage = Path(shutil.copy(STAGE, tmp_path / "vllm" / "results" / STAGE.name))
    (tmp_path / "config.yaml").write_text(cfg, encoding="utf-8")
    assert fixed_output_tokens(stage) == 64
    assert read_stage(stage).stats["tpot"]["mean"] == pytest.approx((0.48322820 - 0.03331899) / 63, rel=1e-6)
    # the nearest config decides: one in the launch folder without ignore_eos leaves the counted lengths standing
    (tmp_path / "vllm" / "config.yaml").write_text("server:\n  ignore_eos: false\n", encoding="utf-8")
    assert fixed_output_tokens(stage) is None
    # three folders up is not the stage's client: nothing is read from there
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    assert fixed_output_tokens(Path(shutil.copy(STAGE, deep / STAGE.name))) is None
