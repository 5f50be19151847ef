"""A reader that stops reading (``kvledger plan … | head -1``): the command ends quietly with the status it had.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError; rich and click catch it and raise
``SystemExit(1)``, which made every ``| head`` a failure. The signal's default action is not restored instead
(a process killed by SIGPIPE, status 141): a write to a closed network socket (a Hub download, the web app's
client going away) would then kill the process too, and ``set -o pipefail`` scripts would fail whenever the
reader closed before the last line, by timing. What the reader took was the output it wanted: nothing on stderr
(as ripgrep, fd and git's pagers do), and the status the answer has: 0, or the one the command declared before
writing it (``will_end_with``: 3 for a plan that does not fit, 1 for a crashed server's log, so that
``plan … | head -1`` under ``set -o pipefail`` does not read "does not fit" as a success), or the one it was already
ending with (an error whose ``--json`` object could not be written keeps its code).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn

from kvledger.errors import KvLedgerError

__all__ = ["closed_by_reader", "status_before", "reader_gone", "will_end_with", "declared_status"]

_DECLARED = [0]  # the status the running command declared for its answer before writing it (will_end_with)


def will_end_with(code: int) -> None:
    """Declare, before the output is written, the status the command ends with once it is (its answer's: 3 for
    "nothing can start", 1 for an answer a script must not take as complete); a reader that stops reading then leaves
    the command with that status, not 0."""
    _DECLARED[0] = code


def declared_status() -> int:
    """The status the running command declared for its answer (``will_end_with``), else 0."""
    return _DECLARED[0]


def closed_by_reader(err: BaseException | None) -> bool:
    """Whether ``err`` is a write to a closed pipe (EPIPE), raised itself or as the context of rich's or click's
    ``SystemExit(1)``."""
    if isinstance(err, SystemExit):
        return err.code == 1 and closed_by_reader(err.__context__)
    return isinstance(err, OSError) and err.errno == errno.EPIPE and err.filename is None


def status_before(err: BaseException) -> int:
    """The status the command was ending with when the pipe broke: a ``SystemExit``'s code or a kvledger error's
    exit code being handled, else the one it declared for its answer (``will_end_with``; 0 if none)."""
    ctx = err.__context__
    if isinstance(ctx, SystemExit) and not closed_by_reader(ctx):
        return ctx.code if isinstance(ctx.code, int) else 1
    if isinstance(ctx, KvLedgerError):  # its --json object was being written (main._run_command)
        return getattr(ctx, "exit_code", 2)
    return declared_status()


def reader_gone(code: int) -> NoReturn:
    """Point stdout at the null device (the interpreter's last flush of the unwritten output then cannot fail and
    print "Exception ignored …") and exit with ``code``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # no real descriptor behind stdout (a test's capture)
        pass
    finally:
        os.close(devnull)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - as click's PacifyFlushWrapper: nothing more to write
    sys.exit(code)
