"""The ``kvledger`` command: registers each sub-command and turns user errors into clear messages.

Each command module exposes ``register(app)``; heavy imports happen inside the command
body so that ``kvledger plan`` starts fast. The console entry point (:func:`main`) imports and
registers only the command it is asked to run (typer builds every registered command's options
before dispatching, and each command module pulls in its own analyses): ``kvledger simulate …``
never imports the code of ``search``, ``report`` or ``ui``. Anything else (``--help``, ``--version``,
no command, an unknown one) gets the whole app, so the help lists every command and a misspelt name
gets click's own message. ``from kvledger.cli.main import app`` gives the whole app, built on first use.
A plain ``kvledger simulate`` line is read without typer at all (``quick_argv.py``: typer, pydantic and rich are
not imported); any other simulate line goes through typer as before. typer is imported only where an app is built.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import gc
import importlib
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

from kvledger.cli.broken_pipe import closed_by_reader, declared_status, reader_gone, status_before, will_end_with
from kvledger.cli.error_lines import json_error, say_error, usage_error
from kvledger.errors import KvLedgerError, command_named
from kvledger.report.widths import PIPE_COLUMNS  # re-exported: the width of a console on a pipe or file

__all__ = ["COMMANDS", "PIPE_COLUMNS", "app", "build_app", "main", "run"]  # noqa: F822 - app is built on first access (__getattr__)

# Command name → the kvledger.cli module whose register(app) adds it, in the order `kvledger --help` lists them.
COMMANDS: dict[str, str] = {
    "plan": "plan_cmd", "models": "catalog_cmd", "gpus": "catalog_cmd", "prices": "catalog_cmd",
    "goodput": "goodput_cmd", "cost": "cost_cmd", "fp8-kv": "fp8_kv_cmd", "spec-decode": "spec_decode_cmd",
    "offload": "offload_cmd",
    "simulate": "simulate_cmd", "experiment": "experiment_cmd", "kv-eviction": "kv_eviction_cmd",
    "doctor": "doctor_cmd", "disagg": "disagg_cmd", "calibrate": "calibrate_cmd", "validate": "validate_cmd",
    "search": "search_cmd", "report": "report_cmd", "ui": "ui_cmd",  # f-report: the HTML report and the web app
}


def _version(value: bool) -> None:
    if value:
        import typer

        from kvledger import __version__

        typer.echo(f"kvledger {__version__}")
        raise typer.Exit()


def _main_callback() -> Any:
    """The app's callback (``--version``), made with typer when an app is built (typer is imported only then)."""
    import typer

    def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                           help="Show the version and exit.")) -> None:
        """The KV-cache ledger and the serving/cost ledger for LLM inference."""

    return _main


def build_app(command: str | None = None) -> Any:
    """The typer app with every command, or with only ``command`` (a key of :data:`COMMANDS`).

    Every command's numeric options are checked against their ranges (kvledger/cli/limits.py)
    before the command runs.
    """
    import typer

    application = typer.Typer(
        name="kvledger",
        help="The KV-cache ledger and the serving/cost ledger for LLM inference.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        rich_markup_mode=None,
    )
    application.callback()(_main_callback())
    modules = dict.fromkeys(COMMANDS.values()) if command is None else [COMMANDS[command]]
    for name in modules:
        importlib.import_module(f"kvledger.cli.{name}").register(application)
    if command is not None:  # a module may register several commands (catalog_cmd: models, gpus, prices)
        application.registered_commands = [i for i in application.registered_commands if i.name == command]

    from kvledger.cli.help_width import narrow_help
    from kvledger.cli.limits import SELF_CHECKED, checked

    for info in application.registered_commands:
        info.cls = narrow_help(info.cls)  # --help within the console's width (help_width.py)
        if info.name not in SELF_CHECKED and not getattr(info.callback, "range_checked", False):
            info.callback = checked(info.name or info.callback.__name__, info.callback)
    for info in application.registered_commands:  # a message raised deep in a reader names the command being run
        info.callback = _named(info.name or info.callback.__name__, info.callback)
    return application


def _named(command: str, fn: Any) -> Any:
    """``fn`` run inside :func:`kvledger.errors.command_named` (``command``): the name is set for its body only, so
    that two commands run in one process (tests, the web app) cannot see each other's."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with command_named(command):
            return fn(*args, **kwargs)

    return wrapper


def __getattr__(name: str) -> Any:
    """``app``: the whole app (every command), built on first use and kept."""
    if name == "app":
        globals()["app"] = full = build_app()
        return full
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The ``kvledger`` program (pyproject's console script, ``python -m kvledger.cli.main``): :func:`run`, and after a
    plain ``simulate`` read by the quick path (its output written and flushed) the process ends at once when nothing
    is registered to run at exit (:func:`_exit_now`)."""
    if _run():
        _exit_now()


def run() -> None:
    """Run the app (the entry point before :func:`main`; tests call it in-process): a KvLedgerError prints its message
    and exits with status 2 (a NoAnswerError with 1: the command ran but cannot answer; a DoesNotFitError or an
    EngineRefusalError with 3: nothing can start, the memory plan does not fit or the engine refuses it on this GPU).
    With ``--json`` an error (ours, or a usage error click finds) is also written to stdout as a JSON object
    (``error_lines.json_error``).

    OpenBLAS runs one thread (``OPENBLAS_NUM_THREADS=1`` unless set): see the comment below. When the
    command is done its objects are frozen out of the garbage collector (``gc.freeze``): the
    interpreter's last full collection at exit then skips them instead of walking every object the
    imports made (about 20 ms after ``simulate``'s); nothing is left to run but the exit.
    """
    _run()


def _exit_now() -> None:
    """End the process with status 0 without the interpreter's teardown (``os._exit``), which frees every object and
    module one by one: 10-35 ms after a simulate of the Azure conversation trace on the 2-core development machine
    (docs/performance.md §2.8). Only when that teardown has nothing else to do: no ``atexit`` handler registered
    (a plain simulate registers none) and no other thread; stdout and stderr are flushed first, and a failed flush
    (a closed pipe) leaves the exit to the interpreter, which reports it as before."""
    import atexit
    import threading

    pending = getattr(atexit, "_ncallbacks", None)  # CPython's count of registered handlers; elsewhere: no shortcut
    if pending is None or pending() or threading.active_count() > 1:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the normal exit reports it
        return
    os._exit(0)


def _run() -> bool:
    """:func:`run`'s body; True when a plain ``simulate`` finished by the quick path (quick_argv.py). Output that
    cannot be written (stdout closed, a full disk: ``> /dev/full``) ends in one line on stderr and exit 1; a reader
    that stops reading (``| head -1``) ends it quietly with the answer's status (broken_pipe.py)."""
    if sys.stdout is None:  # started with stdout closed (`>&-`): there is nowhere to put the output
        _cannot_write("stdout is closed")
    try:
        try:
            with _pipe_width():
                return _run_command()
        finally:  # a write the buffer held back fails here, not in the interpreter's exit
            sys.stdout.flush()
    except SystemExit as ended:  # rich's and click's exit 1 on a broken pipe: the reader stopped reading
        if closed_by_reader(ended):
            reader_gone(declared_status())
        raise
    except BrokenPipeError as err:
        reader_gone(status_before(err))
    except OSError as err:
        # only what a write to stdout raises: a named file (opening or reading an input) or a network error (a
        # ConnectionError that is not a broken pipe) is not ours to word as "cannot write output"
        if (err.filename is not None or err.errno not in _WRITE_ERRNOS
                or (isinstance(err, ConnectionError) and not isinstance(err, BrokenPipeError))):
            raise
        _cannot_write(err.strerror or str(err))
    return False


#: errno values a write to stdout fails with: a full disk or quota, a closed pipe or descriptor, an I/O error
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EPIPE, errno.EBADF, errno.EIO})


def _cannot_write(reason: str) -> NoReturn:
    """Exit 1 with "error: cannot write output: <reason>" on stderr (when stderr can take it); stdout is pointed at
    the null device first, so that the interpreter's final flush of the unwritten output does not fail again."""
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - as click's PacifyFlushWrapper: nothing more to write
    try:
        if sys.stderr is not None:
            sys.stderr.write(f"error: cannot write output: {reason}\n")
            sys.stderr.flush()
    except (OSError, ValueError):  # stderr full or closed as well: the exit status says it
        pass
    sys.exit(1)




@contextlib.contextmanager
def _pipe_width() -> Iterator[None]:
    """Output to a file or a pipe is not wrapped. Without a terminal rich wraps at 80 columns (or at the width of the
    terminal stdin or stderr is on), which broke numbers and table rows mid-line in a saved report. While a command
    runs with stdout not a terminal, every console is $COLUMNS wide when the user set it, else :data:`PIPE_COLUMNS`;
    typer's help and usage-error panels, which stretch to the console's width, keep the width of stderr's terminal,
    else 80 (typer's own $TERMINAL_WIDTH, honoured when set). The environment is restored afterwards (tests run
    commands in-process)."""
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "TERMINAL_WIDTH")}
    if sys.stdout is not None and not sys.stdout.isatty() and not (saved["COLUMNS"] or "").strip().isdigit():
        try:
            panel = os.get_terminal_size(2).columns
        except (OSError, ValueError):  # stderr is no terminal either
            panel = 80
        os.environ.setdefault("TERMINAL_WIDTH", str(panel))
        os.environ["COLUMNS"] = str(PIPE_COLUMNS)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _run_command() -> bool:
    """The command itself (see :func:`_run`)."""
    # No command does BLAS work (no matrix products, no linear algebra), but numpy's OpenBLAS starts a pool of
    # threads when numpy is imported: 40-50 ms of a `kvledger` start on this 2-core machine (more with more
    # cores). One thread, unless the user asked for more; set before anything imports numpy.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    will_end_with(0)  # no status carried over from a command run before in this process (an embedding, a test)
    argv = sys.argv[1:]
    as_json = "--json" in argv[: argv.index("--")] if "--" in argv else "--json" in argv
    from kvledger.cli.token_flags import print_suffix_notes

    print_suffix_notes(argv)  # "8k = 8,000 tokens (vLLM's rule …)": a lowercase suffix is said before the command runs
    try:
        if argv[:1] == ["simulate"]:
            # No garbage collection while a plain simulate runs (the simulator turns it off for its loop already):
            # the imports and the setup make tens of thousands of objects but no garbage cycles, and the collections
            # they set off cost 10-20 ms of CPU here (docs/performance.md §2.6).
            gc.disable()
            try:
                from kvledger.cli.quick_argv import run_simulate_quick

                with command_named("simulate"):  # its messages name simulate's flags (--policy), as typer's path
                    done = run_simulate_quick(argv[1:])  # a plain line, read without typer (quick_argv.py)
            finally:
                gc.enable()
            if done:
                return True
        import typer

        application = build_app(argv[0] if argv and argv[0] in COMMANDS else None)
        # click's own handling prints a usage error as a four-line block on stderr only: caught, it is said in one
        # line as every other error is (and in JSON too with --json)
        try:
            code = application(standalone_mode=False, prog_name="kvledger")
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except typer.TyperException as err:  # click's usage errors (typer's vendored click): exit code 2
            if not hasattr(err, "show"):
                raise
            usage_error(err, as_json)
        if isinstance(code, int) and not isinstance(code, bool):  # typer.Exit(code): its status, as standalone
            sys.exit(code)
    except KvLedgerError as err:  # exit 2 (bad input), 1 where the command ran and cannot answer (NoAnswerError), 3
        # where nothing can start (DoesNotFitError, EngineRefusalError): the error's exit_code
        code = getattr(err, "exit_code", 2)
        will_end_with(code)  # kept when stderr or stdout is a pipe whose reader has gone (`2>&1 | head -0`)
        say_error(str(err))
        if as_json:  # after stderr's line, so that the message is said even when stdout cannot take the JSON
            json_error(str(err), code, type(err).__name__, getattr(err, "payload", None))
        sys.exit(code)
    finally:
        gc.freeze()
    return False


if __name__ == "__main__":
    main()
