"""The ``kvledger`` program ends a plain simulate without the interpreter's teardown (``cli/main.py : _exit_now``), only
when nothing else is registered to run at exit, and writes the same bytes as the in-process entry point."""

from __future__ import annotations

import subprocess
import sys

ARGS = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "30", "--json"]


def _program(prelude: str, entry: str) -> subprocess.CompletedProcess:
    code = (f"import sys; sys.argv = ['kvledger', *{ARGS!r}]\n{prelude}\n"
            f"from kvledger.cli.main import {entry}\n{entry}()\n"
            "sys.stderr.write('after the entry point')\n")  # run() returns here; main() does not (os._exit)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_main_ends_a_plain_simulate_at_once_with_the_same_output_as_run():
    fast, slow = _program("", "main"), _program("", "run")
    assert fast.returncode == 0 and slow.returncode == 0, fast.stderr + slow.stderr
    assert fast.stdout == slow.stdout  # the JSON document, flushed before the exit
    assert fast.stdout.startswith('{\n  "summary": {\n    "num_requests": 30,')
    assert "after the entry point" not in fast.stderr  # the process ended inside main()
    assert slow.stderr.endswith("after the entry point")


def test_an_exit_handler_keeps_the_normal_exit():
    # a handler registered before the command (as a wrapper or plug-in would) must still run: main() returns instead
    proc = _program("import atexit; atexit.register(lambda: sys.stderr.write(' | handler ran'))", "main")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.endswith("after the entry point | handler ran")
    assert proc.stdout.startswith('{\n  "summary": {\n    "num_requests": 30,')
