"""Output to a file or pipe is not wrapped at 80 columns (cli/main.py ``_pipe_width``): rich found no terminal and
wrapped there, breaking paragraphs and table rows mid-line ("page size\\nhalves"); $COLUMNS is honoured when set."""

from __future__ import annotations

import os
import subprocess
import sys

PLAN = ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100"]


def _run(*argv: str, columns: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH")}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([sys.executable, "-m", "kvledger.cli.main", *argv], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, env=env, timeout=120)


def test_piped_output_keeps_each_line_whole():
    out = _run(*PLAN, "--verbose").stdout
    # the fp8 fix (its why under --verbose) is one line (it was cut after "page size" at 80 columns), and so is the
    # concurrency line
    fix = next(line for line in out.splitlines() if "--kv-cache-dtype fp8:" in line)
    assert "page size halves, blocks double" in fix and fix.endswith("55.00 GiB KV per GPU")
    assert any(line.startswith("  concurrency (per replica): 2,048 tokens") and line.endswith("3.36–3.47x)")
               for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) > 80


def test_columns_is_honoured_and_help_panels_keep_a_terminal_width():
    out = _run(*PLAN, "--verbose", columns="60").stdout
    fix = next(line for line in out.splitlines() if "--kv-cache-dtype fp8:" in line)
    assert len(fix) <= 60 and not fix.endswith("55.00 GiB KV per GPU")  # wrapped at the user's 60 columns, as asked
    helps = _run("plan", "--help").stdout.splitlines()
    assert max(len(line) for line in helps) <= 80  # typer's panels stretch to the width: kept at 80 with no terminal


def test_the_width_is_set_only_while_a_command_runs(monkeypatch):
    # tests run commands in-process (main.run): the environment must come back as it was
    from kvledger.cli.main import PIPE_COLUMNS, _pipe_width

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("TERMINAL_WIDTH", raising=False)
    with _pipe_width():  # pytest's captured stdout is not a terminal
        assert os.environ["COLUMNS"] == str(PIPE_COLUMNS) and os.environ["TERMINAL_WIDTH"].isdigit()
    assert "COLUMNS" not in os.environ and "TERMINAL_WIDTH" not in os.environ
