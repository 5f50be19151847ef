"""Run a kvledger command in-process as the console entry point would, and classify what the user would see.

``kvledger.cli.main.run`` prints a KvLedgerError's message and exits 2, or 3 for a DoesNotFitError (nothing can
start: every command, as ``plan`` for a plan that does not fit); typer/click usage errors exit 2. Anything else
escaping the command is a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import DoesNotFitError, KvLedgerError

__all__ = ["Outcome", "invoke", "strict_json_lines"]

_runner = CliRunner()


@dataclass
class Outcome:
    """What one command invocation showed: exit code, stdout, stderr, and the exception for a traceback."""

    code: int
    out: str
    err: str
    exception: BaseException | None = None

    @property
    def traceback(self) -> bool:
        return self.exception is not None


def invoke(args: list[str]) -> Outcome:
    """``kvledger ARGS`` in-process (a KvLedgerError → exit 2, a DoesNotFitError → 3, with its message on stderr, as
    ``main.run`` does)."""
    res = _runner.invoke(app, args)
    exc = res.exception
    if isinstance(exc, KvLedgerError):  # 3 for "does not fit", as main.run (its exit_code); 2 for the rest here
        return Outcome(3 if isinstance(exc, DoesNotFitError) else 2, res.stdout, f"error: {exc}")
    if exc is not None and not isinstance(exc, SystemExit):
        return Outcome(1, res.stdout, res.stderr, exc)
    return Outcome(res.exit_code, res.stdout, res.stderr)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


def strict_json_lines(text: str) -> list[Any]:
    """Parse ``--json`` output (one document, or one per line) refusing NaN/Infinity; raises ValueError."""
    try:
        return [json.loads(text, parse_constant=_reject_constant)]
    except json.JSONDecodeError:
        return [json.loads(line, parse_constant=_reject_constant) for line in text.splitlines() if line.strip()]
