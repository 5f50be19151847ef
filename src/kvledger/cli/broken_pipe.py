"""A reader that stops reading (``kvledger plan … | head -1``): the command ends quietly with the status it had.

Python ignores SIGPIPE, so a write to a closed pipe raises BrokenPipeError; rich and click catch it and raise
``SystemExit(1)``, which made every ``| head`` a failure. The signal's default action is not restored instead
(a process killed by SIGPIPE, status 141): a write to a closed network socket (a Hub download, the web app's
client going away) would then kill the process too, and ``set -o pipefail`` scripts would fail whenever the
reader closed before the last line, by timing. What the reader took was the output it wanted: status 0, nothing
on stderr (as ripgrep, fd and git's pagers do), unless the command was already ending with another status (an
error whose ``--json`` object could not be written keeps its code).
"""

from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn

from kvledger.errors import KvLedgerError

__all__ = ["closed_by_reader", "status_before", "reader_gone"]


def closed_by_reader(err: BaseException | None) -> bool:
    """Whether ``err`` is a write to a closed pipe (EPIPE), raised itself or as the context of rich's or click's
    ``SystemExit(1)``."""
    if isinstance(err, SystemExit):
        return err.code == 1 and closed_by_reader(err.__context__)
    return isinstance(err, OSError) and err.errno == errno.EPIPE and err.filename is None


def status_before(err: BaseException) -> int:
    """The status the command was ending with when the pipe broke: a ``SystemExit``'s code or a kvledger error's
    exit code being handled, else 0."""
    ctx = err.__context__
    if isinstance(ctx, SystemExit) and not closed_by_reader(ctx):
        return ctx.code if isinstance(ctx.code, int) else 1
    if isinstance(ctx, KvLedgerError):  # its --json object was being written (main._run_command)
        return getattr(ctx, "exit_code", 2)
    return 0


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
