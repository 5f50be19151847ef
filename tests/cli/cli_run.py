"""Running a kvledger command in-process for the CLI tests: its result, or the message of the error it ends with."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError

MODEL = "meta-llama/Llama-3.1-8B"
_runner = CliRunner()


def run_cli(*args: str):
    """The command's result (exceptions propagate), at a 250-column console so lines are not wrapped."""
    return _runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "250"})


def refused(*args: str) -> str:
    """The message of the error the command ends with (the console entry prints it and exits with status 2)."""
    with pytest.raises(KvLedgerError) as err:
        run_cli(*args)
    return str(err.value)
