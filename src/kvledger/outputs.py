"""Output files that never lose data: every location is checked before a command's work, and written atomically.

A command calls :func:`prepare_output_file` or :func:`prepare_output_dir` first thing: the folder must exist
(an output folder itself is created when its parent exists; no other folder is: a missing one is refused, naming
it) and a probe file is written and removed in it (the only test that also holds for root, read-only
mounts and full disks); an existing file is refused without ``--force``; a file that is one of the
command's own inputs is refused even with ``--force`` (the command would destroy what it reads), and
with ``--force`` an output folder that holds an input is refused too (``--force`` replaces only the
files the command writes). Writes then go through :func:`write_text_atomic`, :func:`write_bytes_atomic`
or :func:`write_atomic` (a temporary file in the same folder, then ``os.replace``): a crash or a full
disk leaves the previous file whole, a reader never sees half a file, and a link is replaced itself,
never written through.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from kvledger.errors import InputError

__all__ = ["LOG_RECORD", "is_server_log", "prepare_output_file", "prepare_output_dir", "temp_beside", "write_atomic",
           "write_bytes_atomic", "write_text_atomic"]


def _warn(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, highlight=False, emoji=False).print(f"[bold yellow]warning:[/] {escape(message)}",
                                                             soft_wrap=True)


def _short(p: Path) -> str:
    text = str(p)
    return text if len(text) <= 120 else text[:100] + f"… ({len(text):,} characters)"


def _missing_folder(folder: Path, flag: str, target: Path) -> InputError:
    """The refusal for an output whose folder does not exist: kvledger creates no folder but an output folder itself
    (no command has an option to create others), so a typo in a path is not silently made into a tree."""
    missing = folder
    while not missing.parent.exists() and missing.parent != missing:
        missing = missing.parent
    deeper = "" if missing == folder else f" (nor does {_short(folder)} under it)"
    return InputError(f"{flag} {_short(target)}: the folder {_short(missing)} does not exist{deeper}; kvledger "
                      "creates no folder above its output: create it first, or choose another location. Nothing was "
                      "run.")


def _writable_dir(folder: Path, flag: str, *, create: bool = False, target: Path | None = None) -> None:
    """Prove a file can be written in ``folder``, else InputError; ``create``: make ``folder`` itself (an output
    folder) when its parent exists. A missing folder is refused (:func:`_missing_folder`), not created."""
    folder = Path(folder)
    container = folder.parent if create else folder  # one that is a file fails below: "cannot write there"
    if not container.exists() and not container.is_symlink():
        raise _missing_folder(container, flag, target or folder)
    try:
        folder.mkdir(exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".kvledger-probe-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise InputError(f"{flag} {_short(folder)}: cannot write there ({err.strerror or err}); choose another "
                         "location. Nothing was run.") from None


def _input_files(inputs: Iterable[Path | str | None]) -> list[Path]:
    """The inputs that are files on disk (a catalog name such as ``azure-conv`` is not a file)."""
    out = []
    for p in inputs:
        if p is None:
            continue
        try:
            if Path(p).is_file():
                out.append(Path(p))
        except (OSError, ValueError):  # a name longer than the file system allows, a NUL byte: not a file
            continue
    return out


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return False


LOG_RECORD = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR)\s+\d\d-\d\d \d\d:\d\d:\d\d")
"""A log record as Python's logging prints it in vLLM's format (level, month-day, time), e.g. "(APIServer pid=1) INFO
04-22 01:38:34 [entrypoints/utils.py:299] …"."""


def is_server_log(path: Path) -> bool:
    """Whether the first 20,000 characters of the file at ``path`` hold a log record (``LOG_RECORD``); False where it
    cannot be read as text."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return LOG_RECORD.search(fh.read(20_000)) is not None
    except OSError:
        return False


def _check_target(target: Path, flag: str, force: bool, inputs: list[Path], folder: Path,
                  default: bool = False) -> None:
    """Refuse an input as ``target`` always, an existing ``target`` without --force; with it, warn about a link.
    ``default``: ``target`` is ``flag``'s default, not given, so the refusal names it as such."""
    for inp in inputs:
        if _same_file(target, inp):
            raise InputError(f"{flag} {_short(target)} is also an input of this command (given, or read beside a given "
                             "file, as a stage file's client config.yaml is); writing there would replace what it "
                             "reads (even with --force). Choose another name. Nothing was run.")
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
    if target.exists() and force and is_server_log(target):  # --force replaces an earlier output, not a log
        raise InputError(f"{flag} {_short(target)} is a server log (its first lines are log records), not an output "
                         "of kvledger: --force replaces an earlier output, never the log being diagnosed. Choose "
                         "another name. Nothing was run.")
    if target.exists() and not force and default:  # the user gave no flag: name the default and how to change it
        raise InputError(f"{target} (the default {flag}) already exists; pass --force or {flag} PATH. Nothing was run.")
    if target.exists() and not force:
        raise InputError(f"{flag} {target} already exists; refusing to overwrite it (pass --force, or choose another "
                         "name). Nothing was run.")


def prepare_output_file(out: Path, *, force: bool, inputs: Iterable[Path | str | None] = (),
                        flag: str = "--out", default: bool = False) -> None:
    """Check that ``out`` can be written before the work starts (see the module docstring); ``default``: ``out`` is
    ``flag``'s default, which the user did not pass.

    Raises:
        InputError: the folder cannot be created or written, ``out`` is a directory or one of ``inputs``, or it
            exists (or is a link) and ``force`` is False.
    """
    out = Path(out)
    try:
        _check_target(out, flag, force, _input_files(inputs), out.parent, default)
    except OSError as err:  # e.g. a name longer than the file system allows
        raise InputError(f"{flag} {_short(out)}: {err.strerror or err}; choose another name. "
                         "Nothing was run.") from None
    _writable_dir(out.parent, flag, target=out)


def prepare_output_dir(out: Path, names: Iterable[str], *, force: bool, inputs: Iterable[Path | str | None] = (),
                       flag: str = "--out") -> None:
    """Check that the folder ``out`` can hold the files ``names`` before the work starts.

    Raises:
        InputError: ``out`` is a file, cannot be created or written, one of ``names`` there is an input, ``force`` is
            given and ``out`` holds an input, or it holds one of ``names`` (or a link by such a name) without ``force``.
    """
    out = Path(out)
    files = _input_files(inputs)
    try:
        if out.exists() and not out.is_dir():
            raise InputError(f"{flag} {out} exists and is not a directory")
        inside = [f for f in files if out.is_dir() and _same_file(Path(os.path.realpath(f)).parent, out)]
        if inside and force:
            raise InputError(f"{flag} {out} holds {inside[0].name}, an input of this command; --force replaces files "
                             "in this folder, so write the results to another folder. Nothing was run.")
        names = list(names)
        for n in names:
            if (out / n).exists() or (out / n).is_symlink():
                _check_target(out / n, flag, force, files, out)
    except OSError as err:  # e.g. a name longer than the file system allows
        raise InputError(f"{flag} {_short(out)}: {err.strerror or err}; choose another name. "
                         "Nothing was run.") from None
    _writable_dir(out, flag, create=True)


def temp_beside(path: Path) -> tuple[int, str]:
    """``mkstemp`` in ``path``'s folder, with the permissions a newly created file gets under the current umask
    (mkstemp makes it private, 0600: the renamed result would not be readable by the rest of a team)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{Path(path).name[:200]}.", suffix=".tmp", dir=Path(path).parent)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    return fd, tmp


def write_atomic(path: Path, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``; on any failure the
    temporary file is removed and ``path`` is left as it was.

    Raises:
        InputError: the file could not be written (a full disk, a folder made read-only meanwhile).
    """
    try:
        fd, tmp = temp_beside(path)
    except OSError as err:
        raise InputError(f"cannot write {_short(path)}: {err.strerror or err}") from None
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:  # a full disk, a folder made read-only during the work: say so, keep the old file
        Path(tmp).unlink(missing_ok=True)
        kept = " (the previous file is left as it was)" if path.exists() else ""
        raise InputError(f"cannot write {_short(path)}: {err.strerror or err}{kept}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``data`` to ``path`` through a temporary file and a rename (see :func:`write_atomic`)."""
    write_atomic(Path(path), lambda tmp: Path(tmp).write_bytes(data))


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` (UTF-8) to ``path`` through a temporary file and a rename (see :func:`write_atomic`)."""
    write_atomic(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
