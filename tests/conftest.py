"""Suite-wide settings.

- The suite runs without the on-disk store of simulations and reports (kvledger.analyses.serving.sim_cache): each test
  computes what it checks; the store's own tests turn it on in a temporary folder.
- Property tests (hypothesis) draw the same examples on every run ("derandomize"), so a run on CI checks what a run
  here checked; `HYPOTHESIS_PROFILE=explore pytest ...` draws fresh random examples to hunt for new failures (each one
  found becomes a named regression test).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

os.environ["KVLEDGER_NO_CACHE"] = "1"


def _subprocess_bytecode_in_a_temporary_folder() -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set, the ``python -m kvledger`` processes some tests start compile every
    module they import again (0.15–0.5 s CPU each): they write their bytecode in one temporary folder instead
    (``PYTHONPYCACHEPREFIX``), removed at exit, so the clone still gets no ``__pycache__`` and each later process reads
    what the first compiled. This process is not changed (its setting was read at start)."""
    import atexit
    import shutil
    import tempfile

    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    folder = tempfile.mkdtemp(prefix="kvledger-tests-pyc-")
    atexit.register(shutil.rmtree, folder, True)
    os.environ["PYTHONPYCACHEPREFIX"] = folder
    del os.environ["PYTHONDONTWRITEBYTECODE"]


_subprocess_bytecode_in_a_temporary_folder()

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


def _whole_app_command_built_once() -> None:
    """typer's CliRunner turns the app into a click command on every ``invoke`` (``typer.testing._get_command``): for
    kvledger's whole app (every command and its options) that is ~25 ms a call, some 3,000 calls a run. The installed
    program builds it once per process; so do the tests, for ``kvledger.cli.main.app`` only (built once and kept, never
    changed after): any other app (a test's own, ``build_app(command)``) is built on each call as before."""
    import typer.testing

    build = getattr(typer.testing, "_get_command", None)
    if build is None:  # another typer: its runner as it comes
        return
    built: list = []

    def get_command(app):
        from kvledger.cli import main

        if app is not main.__dict__.get("app"):
            return build(app)
        if not built or built[0][0] is not app:
            built[:] = [(app, build(app))]
        return built[0][1]

    typer.testing._get_command = get_command


_whole_app_command_built_once()


@pytest.fixture
def cli_entry(monkeypatch, capsys):
    """Run kvledger's console entry point (``kvledger.cli.main.run``, as the installed command does) on ``argv``:
    returns (exit status, stdout, stderr)."""
    from kvledger.cli.main import run

    def call(*argv: str) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["kvledger", *argv])
        with pytest.raises(SystemExit) as exit_:
            run()
        out, err = capsys.readouterr()
        return exit_.value.code, out, err

    return call


@pytest.fixture
def format_refusal(tmp_path):
    """Write ``text`` to ``name`` in a temporary folder, have ``read`` (a reader taking the path) refuse it with a
    FormatError, and return the error's message: the shape of every "this file cannot be read, and here is why" test
    (the benchmark readers' and the trace readers')."""
    from kvledger.errors import FormatError

    def call(read, text: str, name: str = "run.json") -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        with pytest.raises(FormatError) as err:
            read(path)
        return str(err.value)

    return call


@pytest.fixture
def cli_json():
    """``cli_run.cli_json`` (tests/cli's helper: the ``--json`` document of a command that exited 0, strict JSON) for
    test folders that cannot import it by module name: tests/cli is put on ``sys.path`` (appended, as pytest's rootdir
    insertion does for tests/cli's own modules, so ``cli_run`` is the same module there and here)."""
    helpers = str(Path(__file__).resolve().parent / "cli")
    if helpers not in sys.path:
        sys.path.append(helpers)
    from cli_run import cli_json as json_of

    return json_of
