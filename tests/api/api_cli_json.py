"""Helpers the API mirror tests share: a command's ``--json`` document, and an API result as the same plain JSON."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger import strict_json
from kvledger.cli.main import app


def cli_json(*argv: str) -> dict:
    """``kvledger ARGV --json`` run in-process with the result cache off; its document (the command must succeed)."""
    r = CliRunner().invoke(app, [*argv, "--json"], env={"KVLEDGER_NO_CACHE": "1"})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def plain(d: object) -> dict:
    """``d`` written and read back as the command writes JSON (strict_json: rounded dollars, no NaN)."""
    return json.loads(strict_json.dumps(d))
