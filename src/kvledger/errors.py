"""Errors meant for the user: each carries a complete, actionable message and no traceback is shown for them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: the kvledger command being run ("validate", "calibrate"), so that a message raised deep in a reader names the
#: command the user ran rather than another one. Set only through :func:`command_named`, which restores it on leaving:
#: two commands run in one process (the web app, the tests) never see each other's name
COMMAND: ContextVar[str | None] = ContextVar("kvledger_command", default=None)


@contextmanager
def command_named(name: str) -> Iterator[None]:
    """Within the block, :func:`running` names ``kvledger <name>``; on leaving it (normally or by an error) the name
    before it is back. Each thread, and each ``contextvars`` context, holds its own."""
    token = COMMAND.set(name)
    try:
        yield
    finally:
        COMMAND.reset(token)


def running(default: str = "validate") -> str:
    """``kvledger <command>`` as the user ran it (``COMMAND``), or with ``default`` outside any command's block."""
    return "kvledger " + (COMMAND.get() or default)


class KvLedgerError(Exception):
    """Base class. ``str(err)`` is the full message the CLI prints (exit code 2)."""


class InputError(KvLedgerError):
    """A value the user gave is malformed, out of range or inconsistent with another value."""


class DoesNotFitError(InputError):
    """Nothing can start: the memory plan does not fit (the weights and the engine's own memory leave no KV cache, or
    the KV pool cannot hold one request of max_model_len). Every command exits with status 3 for it, as ``kvledger
    plan`` does for a plan that does not fit (README, "exit status")."""

    exit_code = 3


class EngineRefusalError(InputError):
    """Nothing can start: every value given is valid, but the engine release named refuses it at start-up on this GPU
    (a quantization method below its minimum compute capability, one the release lacks or has removed, a checkpoint
    its kernels do not load, bfloat16 below compute capability 8.0, a KV cache dtype no attention backend there takes,
    an architecture its model registry lacks, TensorRT-LLM off NVIDIA). Exit status 3, as for a plan that does not
    fit (README, "exit status"); a malformed or unknown value stays an InputError (exit 2). Not a DoesNotFitError: no
    memory figure or memory fix applies."""

    exit_code = 3


class NoAnswerError(KvLedgerError):
    """The input was valid and the command ran, but it cannot give one answer: the CLI exits with status 1, not 2
    (``kvledger cost`` of a run of which between 0 and N requests met the SLO: the cost per good token has no upper
    bound).

    Attributes:
        payload: what the command can say, JSON-ready (strict JSON: bounds it cannot give are null, with why), or None.
    """

    exit_code = 1

    def __init__(self, message: str, payload: dict | None = None) -> None:
        self.payload = payload
        super().__init__(message)


class UnknownNameError(KvLedgerError):
    """A model, GPU, engine, trace or policy name that is not in the catalog.

    Attributes:
        kind: what was looked up ("model", "GPU", ...).
        name: the name given.
        suggestions: the closest known names, best first.
    """

    def __init__(self, kind: str, name: str, known: Iterable[str], hint: str = "", *, ranked: bool = False) -> None:
        """``ranked``: ``known`` are already the suggestions, best first (a lookup that ranks its own names)."""
        self.kind, self.name = kind, name
        self.suggestions = list(known) if ranked else suggest(name, known)
        msg = f"unknown {kind} {name!r}"
        if self.suggestions:
            msg += "; did you mean: " + ", ".join(self.suggestions) + "?"
        elif hint:
            msg += "."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class ConfigError(KvLedgerError):
    """A model config or engine config that is malformed or that this tool cannot interpret.

    Attributes:
        source: the file (or hub id) the config came from.
        field: the config field at fault, or None for a syntax error.
    """

    def __init__(self, source: str, message: str, field: str | None = None) -> None:
        self.source, self.field = source, field
        where = f"{source}: field {field!r}: " if field else f"{source}: "
        super().__init__(where + message)


class FormatError(KvLedgerError):
    """A data file (trace, benchmark output) that is corrupt or of an unknown format.

    Attributes:
        path: the file.
        location: line/column or field path inside the file, when known.
    """

    def __init__(self, path: str, message: str, location: str | None = None) -> None:
        self.path, self.location = path, location
        where = f"{path}: {location}: " if location else f"{path}: "
        super().__init__(where + message)


def range_error(name: str, value: object, allowed: str) -> InputError:
    """A value outside its allowed range, in the one wording every range check uses: the flag (or setting) named,
    the value given and the range, e.g. ``--target 1.5 is out of range; allowed: (0, 1] (fraction)``."""
    return InputError(f"{name} {show_number(value)} is out of range; allowed: {allowed}")


def show_number(x: object) -> str:
    """A value as range errors show it: whole numbers with thousands separators (4,096), other floats in short form
    (0.5, 1e+09, nan, inf), anything else as ``str``."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    return f"{int(x):,}" if x.is_integer() and abs(x) < 1e16 else f"{x:g}"


def suggest(name: str, known: Iterable[str], n: int = 5) -> list[str]:
    """Closest names to ``name`` among ``known`` (case-insensitive, substring matches first)."""
    known = list(dict.fromkeys(known))
    low = {k.lower(): k for k in known}
    key = name.lower()
    subs = [k for k in known if key and (key in k.lower() or k.lower() in key)]
    import difflib  # here: only a misspelt name needs it (a few ms of every start-up otherwise)

    close = [low[m] for m in difflib.get_close_matches(key, list(low), n=n, cutoff=0.5)]
    out: list[str] = []
    for k in subs + close:
        if k not in out:
            out.append(k)
    return out[:n]
