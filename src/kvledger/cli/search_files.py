"""The files a search reads and writes, checked before any work, for ``kvledger search`` and ``kvledger.search`` alike:
--ledger and --resume not together, --resume an existing regular file, no two outputs naming one file, no file
overwritten without --force (nor a file the search reads, even with it: the model, the trace, every file a flag names),
a --plot the figure can be written as. The Python call has no --force: it never overwrites a file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_search_files"]


def check_search_files(ledger: Path | None, resume: Path | None, others: dict[str, Path | None], force: bool | None,
                       given: list[Any]) -> None:
    """Refuse, before any work, a search whose files would lose something (module docstring). ``others``: the other
    outputs by flag (``--csv``, ``--plot``; None where not given); ``force``: --force, None where the caller has none
    (``kvledger.search``: an existing file is never replaced, and the refusal names no flag it lacks); ``given``: the
    inputs, every str or Path named.

    Raises:
        InputError: the rule broken, naming the flags and the file.
    """
    from kvledger.cli.outputs import prepare_output_file, refuse_lone_force
    from kvledger.errors import InputError

    if ledger is not None and resume is not None:
        raise InputError("--resume FILE continues that ledger; give it alone, without --ledger")
    if resume is not None and not resume.is_file():
        what = ("is a folder" if resume.is_dir() else "is not a regular file" if resume.exists()
                else "no such file")  # a folder or /dev/null is not missing (a fresh-user trial)
        raise InputError(f"--resume {resume}: {what}; give the ledger file of the search to continue (the FILE "
                         "its --ledger wrote)")
    outputs = {"--ledger": ledger, **others}
    _refuse_same_file({"--resume": resume, **outputs})  # --resume rewrites its ledger
    refuse_lone_force(bool(force), outputs)
    for flag, p in outputs.items():  # against the files given and those read beside them (kvledger.cli.outputs)
        if p is not None and force is None and (p.exists() or p.is_symlink()):
            raise InputError(f"{flag} {p} already exists; refusing to overwrite it (the call never replaces a file: "
                             "choose another name, or continue that ledger with resume)")
        if p is not None:
            prepare_output_file(p, force=bool(force), inputs=[*given, resume], flag=flag)
    plot = others.get("--plot")
    if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
        raise InputError(f"--plot {plot}: write .png or .svg")


def _refuse_same_file(outputs: dict[str, Path | None]) -> None:
    """Two outputs naming one file (resolved: x.csv and ./x.csv), refused before any work: the last written would
    replace the other (a fresh-user trial lost its --ledger under --csv x.csv --ledger x.csv)."""
    from kvledger.errors import InputError

    seen: dict[Path, str] = {}
    for flag, p in outputs.items():
        if p is None:
            continue
        key = p.expanduser().resolve()
        if key in seen:
            raise InputError(f"{seen[key]} and {flag} both name {p}: each writes its own file, so one would replace "
                             "the other; give them different file names.")
        seen[key] = flag
