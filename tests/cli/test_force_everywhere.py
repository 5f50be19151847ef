"""Every command that writes a file the user names (--plot, --out, --ledger, --csv, --png) refuses to overwrite it
"unless --force" (kvledger/outputs.py says "pass --force"), so every such command must have --force: the fresh-user
trial found `experiment --plot` telling the user to pass a flag the command did not have."""

from __future__ import annotations

import typer.main

from kvledger.cli.main import build_app
from kvledger.errors import InputError

WRITES = {"--plot", "--out", "--ledger", "--csv", "--png"}


def test_every_command_that_writes_a_named_file_has_force():
    group = typer.main.get_command(build_app())
    missing = []
    for name, cmd in group.commands.items():
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if opts & WRITES and "--force" not in opts:
            missing.append(name)
    assert missing == [], f"commands that write a named file without --force: {missing}"


def test_experiment_plot_overwrites_with_force(tmp_path):
    from typer.testing import CliRunner

    target = tmp_path / "p.png"
    target.write_text("x")
    app = build_app("experiment")
    refused = CliRunner().invoke(app, ["experiment", "batching", "--quick", "--plot", str(target)])
    # the InputError that kvledger's entry point prints as one line with exit status 2; nothing overwritten
    assert isinstance(refused.exception, InputError) and "--force" in str(refused.exception)
    assert target.read_text() == "x"
    done = CliRunner().invoke(app, ["experiment", "batching", "--quick", "--plot", str(target), "--force"])
    assert done.exit_code == 0, done.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # the PNG signature replaced the user's "x"
