"""Output locations for the commands: the checks and atomic writes of :mod:`kvledger.outputs`, under their CLI name,
with every file a reader takes in beside the inputs (``kvledger.evidence.sidecars``: a stage file's client
config.yaml, its manifests.yaml, its launch record…) counted among the inputs, so that no output replaces one, even
with --force. ``paths_in`` gathers every path a command was given (its arguments and its flag groups' fields, its
output locations left out), so that a command passes all it reads, not the few it thinks of."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kvledger import outputs as _out
from kvledger.evidence.sidecars import implicit_inputs
from kvledger.outputs import write_atomic, write_bytes_atomic, write_text_atomic

__all__ = ["prepare_output_file", "prepare_output_dir", "write_atomic", "write_bytes_atomic", "write_text_atomic",
           "with_implicit", "paths_in", "OUTPUT_FIELDS", "refuse_lone_force", "refuse_suffix", "prepare_json_out"]

#: the flag-group fields that name what a command writes (every other path a command is given is something it reads)
OUTPUT_FIELDS = frozenset({"out", "png", "csv_out", "ledger", "plot"})


def paths_in(*values: object) -> list[Path | str]:
    """Every str or Path among ``values``, in lists and tuples, and in the fields of flag groups (dataclasses) but
    their output locations (``OUTPUT_FIELDS``): the candidates for the inputs of a command (the checks keep those that
    are files)."""
    import dataclasses

    out: list[Path | str] = []
    for v in values:
        if isinstance(v, (str, Path)):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            out += paths_in(*v)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            out += paths_in(*(getattr(v, f.name) for f in dataclasses.fields(v) if f.name not in OUTPUT_FIELDS))
    return out


def with_implicit(inputs: Iterable[Path | str | None]) -> list[Path | str | None]:
    """``inputs`` and the files beside them a reader takes in unnamed (``evidence.sidecars.implicit_inputs``)."""
    inputs = list(inputs)
    return [*inputs, *implicit_inputs(inputs)]


def prepare_output_file(out: Path, *, force: bool, inputs: Iterable[Path | str | None] = (),
                        flag: str = "--out", default: bool = False) -> None:
    """:func:`kvledger.outputs.prepare_output_file` with the implicit inputs counted (module docstring)."""
    _out.prepare_output_file(out, force=force, inputs=with_implicit(inputs), flag=flag, default=default)


def prepare_output_dir(out: Path, names: Iterable[str], *, force: bool, inputs: Iterable[Path | str | None] = (),
                       flag: str = "--out") -> None:
    """:func:`kvledger.outputs.prepare_output_dir` with the implicit inputs counted (module docstring)."""
    _out.prepare_output_dir(out, names, force=force, inputs=with_implicit(inputs), flag=flag)


def refuse_lone_force(force: bool, outputs: dict[str, object]) -> None:
    """Refuse --force when none of the command's ``outputs`` (flag → its value, None when not given) was given:
    --force only lets them overwrite an existing file, so alone it would be silently ignored.

    Raises:
        InputError: one paragraph naming the flags.
    """
    from kvledger.errors import InputError

    if not force or any(v is not None for v in outputs.values()):
        return
    flags = list(outputs)
    named = flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} or {flags[-1]}"
    raise InputError(f"--force lets {named} overwrite an existing file, but no {named} was given, so this command "
                     f"writes no file and --force would do nothing: give {named} with it, or drop --force")


def refuse_suffix(out: Path, suffixes: tuple[str, ...], writes: str, *, flag: str = "--out", hint: str = "") -> None:
    """Refuse ``out`` unless its suffix (any case) is one of ``suffixes``, the names of what is written there: a JSON
    profile under ``prof.csv`` is a file no CSV reader opens (a fresh-user trial). ``writes`` says what the command
    writes; ``hint`` follows the names asked for.

    Raises:
        InputError: one paragraph naming what is written and the suffixes it takes.
    """
    from kvledger.errors import InputError

    if out.suffix.lower() in suffixes:
        return
    what = f"a {out.suffix} file" if out.suffix else "a file without a suffix"
    raise InputError(f"{flag} {str(out)[:120]}: {writes}, not {what}; give a name ending in {' or '.join(suffixes)}"
                     f"{hint}. Nothing was run.")


def prepare_json_out(out: Path, document: str, *, force: bool, inputs: Iterable[Path | str | None] = (),
                     lines: bool = False) -> None:
    """:func:`prepare_output_file` for an --out that takes ``document`` (e.g. "goodput's results") as JSON (JSON Lines
    with ``lines``), then its suffix (:func:`refuse_suffix`: .json, or .jsonl / .ndjson), an input named as the output
    refused first."""
    prepare_output_file(out, force=force, inputs=inputs)
    if lines:
        refuse_suffix(out, (".jsonl", ".ndjson"), f"{document} is written there as JSON Lines (--json-lines)")
    else:
        refuse_suffix(out, (".json",), f"{document} is written there as one JSON document")
