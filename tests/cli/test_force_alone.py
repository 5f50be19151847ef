"""--force only lets a command's output flags overwrite an existing file: given without any of them it would do nothing,
so every command with --force and no default output refuses it (a new user's `simulate --force` without --out was
silently accepted). `report` is not among them: its --out has a default file."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

runner = CliRunner()
MODEL = "meta-llama/Llama-3.1-8B"
AIPERF = "tests/evidence/data/aiperf/run1_profile_export.jsonl"


def _refused(*args: str) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with status 2)."""
    with pytest.raises(KvLedgerError) as err:
        runner.invoke(app, list(args), catch_exceptions=False)
    return str(err.value)


@pytest.mark.parametrize("argv, named", [
    (["simulate", MODEL, "--gpu", "H100", "--num-requests", "10"], "--out"),
    (["goodput", AIPERF, "--slo", "ttft=1s"], "--out or --plot"),
    (["cost", AIPERF, "--slo", "ttft=1s", "--gpu", "H100", "--num-gpus", "1"], "--out"),
    (["calibrate", "--scope", "gpu", AIPERF, "--gpu", "H100"], "--out"),
    (["search", MODEL, "--slo", "ttft=1s"], "--ledger, --csv or --plot"),
    (["experiment", "batching", "--quick"], "--plot"),
    (["fp8-kv", MODEL, "--gpu", "H100"], "--plot"),
    (["spec-decode", MODEL, "--gpu", "H100", "-k", "4", "--acceptance", "0.7"], "--plot"),
])
def test_force_without_an_output_is_refused(argv, named):
    msg = _refused(*argv, "--force")
    assert msg == (f"--force lets {named} overwrite an existing file, but no {named} was given, so this command "
                   f"writes no file and --force would do nothing: give {named} with it, or drop --force")


def test_force_with_out_still_runs(tmp_path):
    res = runner.invoke(app, ["simulate", MODEL, "--gpu", "H100", "--num-requests", "10", "--out",
                              str(tmp_path / "run"), "--force"])
    assert res.exit_code == 0, res.output


def test_the_console_entry_s_quick_path_refuses_it_too():
    # a plain simulate line is read without typer (cli/quick_argv.py); both paths run cli/simulate_run.run_simulate
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", MODEL, "--gpu", "H100", "--force"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr
    assert p.stderr.startswith("error: --force lets --out overwrite an existing file, but no --out was given")
