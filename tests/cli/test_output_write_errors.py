"""Output that cannot be written (a full device, a closed stdout) ends in one line on stderr and exit 1, not a
traceback (cli/main.py : _run), on the quick simulate path and on typer's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

L8 = "meta-llama/Llama-3.1-8B"
SIM = ["simulate", L8, "--gpu", "H100", "--num-requests", "30"]


def _kvledger(args: list[str], stdout) -> subprocess.CompletedProcess:
    code = f"import sys; sys.argv = ['kvledger', *{args!r}]\nfrom kvledger.cli.main import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", code], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("args", [SIM, [*SIM, "--json"],  # the quick path (quick_argv.py)
                                  ["plan", L8, "--gpu", "H100"], ["plan", L8, "--gpu", "H100", "--json"],  # typer's
                                  ["plan", "llama-3.1-8", "--gpu", "h100", "--json"]])  # an error's JSON object
def test_full_device_is_one_line_and_exit_1(args):
    # /dev/full takes the open and fails every write with ENOSPC ("No space left on device")
    with open("/dev/full", "w") as full:
        r = _kvledger(args, full)
    assert r.returncode == 1, r.stderr
    assert r.stderr.endswith("error: cannot write output: No space left on device\n"), r.stderr
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr
    if "llama-3.1-8" in args:  # the input error itself is still said on stderr, before the failed JSON
        assert r.stderr.startswith("error: unknown model 'llama-3.1-8'")


@pytest.mark.parametrize("args", [[*SIM, "--json"], ["plan", L8, "--gpu", "H100"]])
def test_closed_stdout_is_one_line_and_exit_1(args):
    # `kvledger ... >&-`: the interpreter starts with sys.stdout None (simulate used to fail with AttributeError,
    # plan to exit 0 having written nothing)
    code = (f"import os, sys; os.close(1); sys.argv = ['kvledger', *{args!r}]\n"
            "import subprocess; r = subprocess.run([sys.executable, '-c', 'from kvledger.cli.main import main; "
            "main()'] + sys.argv[1:], stdout=None, stderr=subprocess.PIPE, text=True, close_fds=False)\n"
            "sys.stderr.write(f'rc={r.returncode}\\n' + r.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, timeout=120)
    assert r.stderr.startswith("rc=1\nerror: cannot write output: stdout is closed\n"), r.stderr


def test_a_network_error_is_not_called_a_write_error(monkeypatch):
    # A ConnectionError (an OSError without a file name, e.g. a Hub download reset) must surface as itself, not as
    # "cannot write output"; a full disk (ENOSPC) on stdout is a write error.
    import errno

    from kvledger.cli import main as cli_main

    def reset() -> bool:
        raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    monkeypatch.setattr(cli_main, "_run_command", reset)
    with pytest.raises(ConnectionResetError):
        cli_main._run()

    def full() -> bool:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cli_main, "_run_command", full)
    monkeypatch.setattr(cli_main.sys, "stdout", open(os.devnull, "w"))  # noqa: SIM115 - _cannot_write replaces it
    with pytest.raises(SystemExit) as ended:
        cli_main._run()
    assert ended.value.code == 1
