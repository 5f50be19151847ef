"""Running the real console entry point in a test (the one that turns a KvLedgerError into exit status 2)."""

from __future__ import annotations

import sys

import pytest


def console(monkeypatch, capsys, *args) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``kvledger ARGS`` run in-process."""
    from kvledger.cli.main import run

    monkeypatch.setattr(sys, "argv", ["kvledger", *args])
    with pytest.raises(SystemExit) as e:
        run()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err
