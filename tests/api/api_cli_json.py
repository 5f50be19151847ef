"""Helpers the API mirror tests share: a command's ``--json`` document in the call's terms, and an API result as the
same plain JSON."""

from __future__ import annotations

import inspect
import json

from typer.testing import CliRunner

import kvledger
from kvledger import strict_json
from kvledger.api.results import python_document
from kvledger.cli.main import app


def in_call_terms(doc: dict, call: str) -> dict:
    """A command's ``--json`` ``doc`` as the Python call ``kvledger.CALL`` returns it: its prose names the call's
    parameters where the command names its flags (``api.results.python_document``), every figure the same."""
    return python_document(doc, frozenset(inspect.signature(getattr(kvledger, call)).parameters))


def cli_json(*argv: str) -> dict:
    """``kvledger ARGV --json`` run in-process with the result cache off; its document (the command must succeed), in
    the terms of the call of the command's name (:func:`in_call_terms`)."""
    r = CliRunner().invoke(app, [*argv, "--json"], env={"KVLEDGER_NO_CACHE": "1"})
    assert r.exit_code == 0, r.output
    return in_call_terms(json.loads(r.stdout), argv[0])


def plain(d: object) -> dict:
    """``d`` written and read back as the command writes JSON (strict_json: rounded dollars, no NaN)."""
    return json.loads(strict_json.dumps(d))
