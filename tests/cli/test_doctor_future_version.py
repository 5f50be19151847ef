"""A log printed by a vLLM release further ahead than ``--engine-version`` accepts is read with the newest rules, and
says so: a log states what ran, so its version is no typo to refuse."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

from kvledger.accounting.vllm_rules import LATEST
from kvledger.evidence.vllm_log.version import rules_version

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"


def test_a_far_future_version_gets_the_newest_rules_and_the_reason():
    # 9.1.0 is past LATEST (0.33.0) by a major: `--engine-version 9.1.0` is refused as a likely typo, but a log that
    # prints it was written by that engine, so the newest rules read apply with that said.
    ver, why = rules_version("9.1.0", "v1", set())
    assert ver == LATEST and why.startswith(f"vLLM 9.1.0, newer than {LATEST}, the newest release whose code was read")


def test_doctor_reads_a_log_whose_banner_prints_a_far_future_version(tmp_path):
    text = (LOGS / "v0.18.0_banner_docker_compose.log").read_text()
    assert "0.18.0" in text
    log = tmp_path / "future.log"
    log.write_text(text.replace("0.18.0", "0.40.0"))
    out = " ".join(run_cli("doctor", str(log)).stdout.split())
    assert "vLLM 0.40.0 — printed" in out and f"ledger rules of {LATEST} (vLLM 0.40.0, newer than {LATEST}" in out


def test_engine_version_given_on_a_far_future_log_warns_not_refuses(tmp_path):
    # The log printed 0.40.0; --engine-version 0.33.0 (the newest read) is valid, so the run goes on, with the
    # warning that the flag names another release than the log's.
    text = (LOGS / "v0.18.0_banner_docker_compose.log").read_text()
    log = tmp_path / "future.log"
    log.write_text(text.replace("0.18.0", "0.40.0"))
    res = run_cli("doctor", str(log), "--engine-version", LATEST)
    out = " ".join(res.stdout.split())
    assert f"--engine-version {LATEST} is not the vLLM this log printed (0.40.0" in out
