"""What a new user's trial of the README's commands found (polish branch), each pinned."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"


def test_doctor_settings_table_says_unknown_values_without_python_none():
    # the V0 H100 log names no model and no max_model_len: the settings table printed "None" for them
    res = CliRunner().invoke(app, ["doctor", str(LOGS / "v0.8-v0engine_llama-2-7b_h100.log"), "--verbose"])
    assert res.exit_code == 0 and "None" not in res.output
    settings = res.output.split("Settings used for the ledger")[1].split("Start-up:")[0]
    assert any(line.startswith("│ model") and "│ —" in line for line in settings.splitlines())
