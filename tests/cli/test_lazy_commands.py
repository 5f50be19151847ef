"""The console entry point imports and registers only the command it runs; the whole app still has every command."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from kvledger.cli.main import COMMANDS, app, build_app, run


def test_the_command_table_names_every_command_in_help_order_with_its_module():
    registered = [info.name for info in app.registered_commands]
    assert registered == list(COMMANDS)
    for info in app.registered_commands:
        body = getattr(info.callback, "__wrapped__", info.callback)  # limits.checked wraps it
        assert body.__module__ == f"kvledger.cli.{COMMANDS[info.name]}", info.name


def test_one_command_app_holds_that_command_range_checked():
    one = build_app("gpus")  # catalog_cmd registers models, gpus and prices: only gpus is kept
    assert [info.name for info in one.registered_commands] == ["gpus"]
    assert getattr(one.registered_commands[0].callback, "range_checked", False)


def test_help_and_unknown_commands_get_the_whole_app(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["kvledger", "--help"])
    with pytest.raises(SystemExit) as e:
        run()
    out = capsys.readouterr().out
    assert e.value.code == 0 and all(f"  {name} " in out for name in COMMANDS)
    monkeypatch.setattr(sys, "argv", ["kvledger", "simulat"])
    with pytest.raises(SystemExit) as e:
        run()
    assert e.value.code == 2 and "No such command 'simulat'" in capsys.readouterr().err


def _fresh_run(args: list[str], env: dict[str, str] | None = None) -> tuple[list[str], str, str]:
    """(kvledger.cli.*_cmd modules imported, OPENBLAS_NUM_THREADS, stdout) of ``kvledger ARGS`` in a new interpreter."""
    import os

    code = (f"import os, sys; sys.argv = ['kvledger', *{args!r}]\n"
            "from kvledger.cli.main import run\n"
            "try:\n    run()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kvledger.cli.') and m.endswith('_cmd')), "
            "file=sys.stderr)\n"
            "print(os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)")
    full_env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | (env or {})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full_env)
    assert proc.returncode == 0, proc.stderr
    modules, threads = proc.stderr.strip().splitlines()[-2:]
    return ast.literal_eval(modules), threads, proc.stdout


def test_a_command_imports_no_other_command_module_and_blas_gets_one_thread():
    # `kvledger gpus --json` must not import the modules of simulate, search, report or ui; OpenBLAS is asked for one
    # thread (no command does BLAS work) unless the user set OPENBLAS_NUM_THREADS.
    modules, threads, out = _fresh_run(["gpus", "--json"])
    assert modules == ["kvledger.cli.catalog_cmd"] and threads == "1"
    assert '"gpu_id": "nvidia_h100_sxm"' in out
    assert _fresh_run(["gpus", "--json"], {"OPENBLAS_NUM_THREADS": "4"})[1] == "4"
