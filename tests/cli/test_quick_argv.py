"""``kvledger simulate``'s quick path (cli/quick_argv.py): the same flags and the same values as typer's command, and
typer's own path for every line it does not take."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from kvledger.cli.main import build_app, run
from kvledger.cli.quick_argv import parse_simulate


def _typer_command():
    return typer.main.get_command(build_app("simulate")).commands["simulate"]


def _typer_values(argv: list[str]) -> dict:
    cmd = _typer_command()
    with cmd.make_context("simulate", list(argv)) as ctx:
        return dict(ctx.params)


def test_the_quick_table_holds_every_flag_of_typers_simulate_with_its_kind():
    from kvledger.cli.quick_argv import _table

    flags, order = _table()
    cmd = _typer_command()
    typer_flags = {}
    for p in cmd.params:
        for opt in p.opts:
            if opt.startswith("--"):
                typer_flags[opt] = (p.name, True if p.is_flag else None)
        for opt in getattr(p, "secondary_opts", []):
            typer_flags[opt] = (p.name, False)
    assert {f: (name, alone) for f, (name, _, alone) in flags.items()} == typer_flags
    # the parameters in the command's order (range errors are reported in it); MODEL the one positional
    assert [name for name, _ in order] == [p.name for p in cmd.params]
    assert [p.name for p in cmd.params if p.param_type_name == "argument"] == ["model"]


@pytest.mark.parametrize("argv", [
    ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--json"],
    ["m", "--json", "--gpu=H100", "--rate", "2.5", "--num-requests", "200", "--seed", "7", "--tp", "2"],
    ["--gpu", "A100", "m", "--tensor-parallel-size", "4", "--max-model-len", "8K", "--no-enable-prefix-caching",
     "--enable-chunked-prefill", "--gpu-memory-utilization", "0.85", "--out", "runs/a", "--force", "--chrome-trace"],
    ["m", "--gpu", "H100", "--workload", "chat", "--sessions", "20", "--session-rate", "0.5", "--record-token-times"],
    ["m", "--gpu", "H100", "--kv-offloading-size", "64", "--enable-hierarchical-cache", "--hicache-ratio", "2",
     "--policy", "sglang", "--no-async-scheduling", "--cpu-overhead", "2ms"],
])
def test_a_plain_line_gives_typers_values(argv):
    quick = parse_simulate(argv)
    assert quick == _typer_values(argv)


@pytest.mark.parametrize("argv", [
    ["m", "--gpu", "H100", "--help"],  # help: typer's
    ["m"],  # --gpu missing: typer's usage error
    ["m", "n", "--gpu", "H100"],  # a second positional
    ["m", "--gpu", "H100", "--gpu", "A100"],  # repeated
    ["m", "--gpu", "H100", "--seed"],  # no value
    ["m", "--gpu", "H100", "--seed", "-1"],  # a sign: typer reads it
    ["m", "--gpu", "H100", "--rate", "inf"], ["m", "--gpu", "H100", "--rate", "1e3"],
    ["m", "--gpu", "H100", "--num-requests", "007"], ["m", "--gpu", "H100", "--rate", "2."],
    ["m", "--gpu", "H100", "--num-requests", "\uff11\uff12"], ["m", "--gpu", "H100", "--rate", ".5"],
    ["m", "--gpu", "H100", "--json=1"], ["m", "--gpu", "H100", "--trace="],
    ["m", "--gpu", "H100", "--", "--json"], ["m", "--gpu", "H100", "-h"], ["m", "--gpu", "H100", "--jsn"],
])
def test_any_other_line_goes_to_typer(argv):
    assert parse_simulate(argv) is None


def test_range_errors_keep_typers_path_and_wording(monkeypatch, capsys):
    # --tp 0 parses plainly but is out of range: the quick path steps aside and limits.checked names the flag as the
    # typer path always has (its last long spelling, --tensor-parallel-size)
    monkeypatch.setattr(sys, "argv", ["kvledger", "simulate", "m", "--gpu", "H100", "--tp", "0", "--json"])
    with pytest.raises(SystemExit) as e:
        run()
    out = capsys.readouterr().out
    assert e.value.code == 2
    assert out == ('{"error": {"message": "--tensor-parallel-size 0 is out of range; allowed: [1, 1,024] GPUs", '
                   '"type": "InputError", "exit_code": 2}}\n')


def test_a_plain_simulate_imports_no_typer_and_prints_what_typer_prints(tmp_path: Path):
    # 40 requests of the Azure trace, once through the quick path and once through typer (the app's CliRunner)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    args = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "40", "--json"]
    code = (f"import sys; sys.argv = ['kvledger', *{args!r}]\n"
            "from kvledger.cli.main import run\nrun()\n"
            "import gc\n"  # collection is off while the quick path runs, and on again after it
            "mods = sorted(m for m in ('typer', 'click', 'rich') if m in sys.modules)\n"
            "sys.stderr.write(repr([gc.isenabled(), *mods]))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[-1] == "[True]"
    assert proc.stdout == CliRunner().invoke(app, args).stdout
