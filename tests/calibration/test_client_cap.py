"""Stages whose client fell behind its rate: the cap on requests in flight defaults to the client config's
(inference-perf: load.num_workers × load.worker_max_concurrency), a flag overrides it, the replay is paced on the
requested schedule under it, and with neither the stage is
replayed at the achieved rate with a warning that it is not comparable. Copies of the bundled kubecon vllm+batch_size
stages (tests/evidence/data/inference-perf) and their config.yaml."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kvledger.calibration.stage_launch import client_concurrency_cap
from kvledger.calibration.sweep import read_stage, stage_comparison
from kvledger.calibration.targets import load_targets
from kvledger.records import RunMetadata, RunRecords

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"


def _copy(tmp_path: Path, k: int, config: str | None = None) -> Path:
    """stage_k beside the bundled config.yaml (``config``: other text instead; "": none at all)."""
    stage = Path(shutil.copy(DATA / f"stage_{k}_lifecycle_metrics.json", tmp_path))
    if config is None:
        shutil.copy(DATA / "config.yaml", tmp_path)
    elif config:
        (tmp_path / "config.yaml").write_text(config, encoding="utf-8")
    return stage


def test_the_cap_comes_from_the_client_config_and_a_flag_overrides_it(tmp_path):
    # stage 4 asked for 148.89 req/s and achieved 117.04 (117.04 / 148.89 = 0.786 < 0.95): the client fell behind.
    # config.yaml's load: num_workers 44, worker_max_concurrency 10 → 44 × 10 = 440 requests in flight at most
    stage = _copy(tmp_path, 4)
    assert client_concurrency_cap(stage).users == 440
    run = load_targets(str(stage))[0].run
    assert run.concurrency == 440 and run.paced
    # paced on the requested schedule: the stage's 8,933 requests (none failed) over 8,933 / 148.89 = 60.00 s, not
    # the 76.32 s it took to send them
    assert max(r.arrival_s for r in run.requests) == pytest.approx(8933 / 148.89)
    note = run.measured.metadata.extra["client_loop"]
    assert "replayed under a cap of 440 requests in flight" in note and "on the requested schedule" in note
    assert "config.yaml: load.num_workers 44 × load.worker_max_concurrency 10" in note
    flagged = load_targets(str(stage), client_concurrency=50)[0].run
    assert flagged.concurrency == 50 and "(--client-concurrency)" in flagged.measured.metadata.extra["client_loop"]
    # the note travels with the stage's comparison (what validate and calibrate print)
    st = read_stage(stage)
    assert note in stage_comparison("s4", st, RunRecords([], RunMetadata("x", "x")), run).notes


def test_the_default_per_worker_limit_and_an_unknown_worker_count(tmp_path):
    # worker_max_concurrency unset: inference-perf's default 100 per worker → 3 × 100 = 300
    (tmp_path / "a").mkdir()
    stage = _copy(tmp_path / "a", 4, "load:\n  num_workers: 3\n")
    cap = client_concurrency_cap(stage)
    assert cap.users == 300 and "inference-perf's default" in cap.source
    # num_workers unset: its default is the client machine's CPU count, which no file records → no cap
    (tmp_path / "b").mkdir()
    assert client_concurrency_cap(_copy(tmp_path / "b", 4, "load:\n  worker_max_concurrency: 10\n")) is None


def test_a_stage_that_fell_behind_with_no_known_cap_warns(tmp_path):
    stage = _copy(tmp_path, 4, "")
    run = load_targets(str(stage))[0].run
    assert run.concurrency is None
    note = run.measured.metadata.extra["client_loop"]
    assert note.startswith("WARNING: the client fell behind its rate and no cap on its requests in flight is known")
    where = f"{tmp_path.parent.name}/{tmp_path.name}/stage_4"  # a stage file by the two folders it lies in
    assert note.endswith(f"not comparable (this stage: {where}, achieved 117 of 149 req/s requested)")


def test_a_stage_that_kept_up_is_an_open_loop_without_a_note(tmp_path):
    # stage 0: 1.0048 of 1.0 req/s achieved (≥ 95%): the cap never bound it, whatever the config says
    run = load_targets(str(_copy(tmp_path, 0)))[0].run
    assert run.concurrency is None and "client_loop" not in run.measured.metadata.extra
