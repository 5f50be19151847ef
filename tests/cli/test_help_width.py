"""No line of any command's --help is wider than 80 columns at an 80-column console: an option whose spellings alone
are wider lists its --no- form on a line of its own (cli/help_width.py)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import COMMANDS, app

runner = CliRunner()


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)], ids=lambda c: c[0] if c else "kvledger")
def test_no_help_line_is_wider_than_80_columns(command):
    res = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    wide = [line for line in res.output.splitlines() if len(line) > 80]
    assert wide == []


@pytest.mark.parametrize("command", ["goodput", "cost", "simulate"])
def test_a_flag_wider_than_the_line_puts_its_negation_under_it(command):
    # "  --long-prefill-token-threshold-adaptive / --no-long-prefill-token-threshold-adaptive": 2 + 39 + 3 + 42 = 86
    # columns on one line before; now 2 + 39 + 2 = 43 and 4 + 42 = 46, the help text under them as click puts it past
    # a first column wider than 30
    lines = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"}).output.splitlines()
    at = lines.index("  --long-prefill-token-threshold-adaptive /")
    assert lines[at + 1] == "    --no-long-prefill-token-threshold-adaptive"
    assert lines[at + 2].startswith(" " * 34) and "vLLM ≥ 0.31: floor --long-" in lines[at + 2]
