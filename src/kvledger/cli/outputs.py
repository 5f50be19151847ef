"""Output locations (``--out``), checked before a command starts its work, so that no result is lost to a bad path.

A command calls :func:`prepare_output_file` or :func:`prepare_output_dir` first thing: the folder
is created and a probe file written and removed in it (the only test that also holds for root,
read-only mounts and full disks), existing files are refused without ``--force``, and with
``--force`` a warning is printed before an input file would be overwritten or a symbolic link
replaced. Writes then go through :func:`kvledger.strict_json.write_text_atomic` (temporary file
plus rename), which replaces a link itself and never writes through it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from kvledger.errors import InputError

__all__ = ["prepare_output_file", "prepare_output_dir"]


def _warn(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False).print(f"[bold yellow]warning:[/] {escape(message)}", soft_wrap=True)


def _writable_dir(folder: Path, flag: str) -> None:
    """Create ``folder`` (and parents) and prove a file can be written there, else InputError."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".kvledger-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InputError(f"{flag} {_short(folder)}: cannot write there ({err.strerror or err}); choose another location. "
                         "Nothing was run.") from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _check_target(target: Path, flag: str, force: bool, inputs: Iterable[Path], folder: Path) -> None:
    """Refuse an existing ``target`` without --force; with it, warn about an input file or a link being replaced."""
    if target.is_symlink():
        dest = Path(os.path.realpath(target))
        outside = not str(dest).startswith(str(Path(os.path.realpath(folder))) + os.sep)
        if not force:
            raise InputError(f"{flag}: {target} is a symbolic link (→ {dest}); refusing to replace it (pass --force)")
        _warn(f"{target} is a symbolic link to {dest}{' outside the output folder' if outside else ''}; "
              "--force replaces the link itself with the new file (the file it points to is left as it is)")
        return
    if target.is_dir():
        raise InputError(f"{flag} {target} is a directory; give a file name")
    if not target.exists():
        return
    if not force:
        raise InputError(f"{target} already exists; refusing to overwrite it (pass --force)")
    for inp in inputs:
        if _same_file(target, Path(inp)):
            _warn(f"--force: {target} is also an input of this command ({inp}); it will be overwritten with the results")


def prepare_output_file(out: Path, *, force: bool, inputs: Iterable[Path] = (), flag: str = "--out") -> None:
    """Check that ``out`` can be written before the work starts (see the module docstring).

    Raises:
        InputError: the folder cannot be created or written, ``out`` is a directory, or it exists (or is a
            link) and ``force`` is False.
    """
    out = Path(out)
    try:
        _check_target(out, flag, force, list(inputs), out.parent)
    except OSError as err:  # e.g. a name longer than the file system allows
        raise InputError(f"{flag} {_short(out)}: {err.strerror or err}; choose another name. Nothing was run.") from None
    _writable_dir(out.parent, flag)


def prepare_output_dir(out: Path, names: Iterable[str], *, force: bool, inputs: Iterable[Path] = (), flag: str = "--out") -> None:
    """Check that the folder ``out`` can hold the files ``names`` before the work starts.

    Raises:
        InputError: ``out`` is a file, cannot be created or written, or holds one of ``names`` (or a link by
            such a name) and ``force`` is False.
    """
    out = Path(out)
    try:
        if out.exists() and not out.is_dir():
            raise InputError(f"{flag} {out} exists and is not a directory")
        names = list(names)
        existing = [n for n in names if (out / n).exists() or (out / n).is_symlink()]
        if existing and not force:
            raise InputError(f"{out} already holds {', '.join(existing)}; refusing to overwrite (pass --force)")
        for n in existing:
            _check_target(out / n, flag, force, list(inputs), out)
    except OSError as err:  # e.g. a name longer than the file system allows
        raise InputError(f"{flag} {_short(out)}: {err.strerror or err}; choose another name. Nothing was run.") from None
    _writable_dir(out, flag)


def _short(p: Path) -> str:
    text = str(p)
    return text if len(text) <= 120 else text[:100] + f"… ({len(text):,} characters)"
