"""``kvledger simulate``'s quick path: a plain simulate command line read without typer, at the console entry point.

typer (0.2x) imports pydantic and builds a pydantic ``TypeAdapter`` for each of simulate's 55 options before the
command runs: with typer's own import, about 0.1 s of CPU, a third of everything outside the simulation loop on the
Azure conversation trace (docs/performance.md §2.6). This module reads the command line of the common case itself,
from the same declarations typer reads: the flag groups' fields (``flag_groups.py``: spellings and types) and
simulate's own options (:data:`OWN`, checked against typer's command by tests/cli/test_quick_argv.py). Only the plain
forms are taken: one positional MODEL; ``--flag VALUE`` or ``--flag=VALUE`` for a value option; ``--flag`` for an
on/off one; a number written as plain decimal digits (``12``, ``0.9``); text not starting with ``-``.

Anything else returns None and the line goes to typer as before, so every help text, usage error and range error is
typer's and ``limits.checked``'s own: ``--help``, an unknown, repeated or misspelt flag, a missing value, ``--``, a
second positional, a number typer would have to interpret (``inf``, ``1e3``, ``-1``, ``007``), a value out of its
range (:mod:`kvledger.ranges`), a shell-completion request. Same line, same values as typer passes the command.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import typing
from pathlib import Path
from typing import Any

from kvledger.cli.dp_flags import SimDataParallelFlags
from kvledger.cli.flag_groups import EngineFlags, TierFlags, WorkloadFlags
from kvledger.cli.session_flags import SessionFlags

__all__ = ["OWN", "GROUPS", "parse_simulate", "run_simulate_quick"]

#: simulate's options outside the flag groups: parameter → (flags, type, default); ``...`` = required
OWN: dict[str, tuple[tuple[str, ...], type, Any]] = {
    "gpu": (("--gpu",), str, ...), "as_json": (("--json",), bool, False), "out": (("--out",), Path, None),
    "force": (("--force",), bool, False), "chrome_trace": (("--chrome-trace",), bool, False),
    "record_token_times": (("--record-token-times",), bool, False), "seeds": (("--seeds",), int, 1)}
#: simulate's flag groups, by its parameter name, in its signature's order (simulate_cmd.simulate)
GROUPS = {"workload": WorkloadFlags, "sessions": SessionFlags, "engine": EngineFlags, "tiers": TierFlags,
          "dp": SimDataParallelFlags}  # dp: vLLM's DP ranks (sim_dp.py), --pp (sim_pp.py)
_OWN_BEFORE_GROUPS = ("gpu",)  # the signature: model, gpu, the four groups, then the rest of OWN


def _base(hint: Any) -> type:
    """``int`` of ``int | None``; the type itself otherwise."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint


def _table() -> tuple[dict[str, tuple[str, type, Any]], list[tuple[str, Any]]]:
    """(flag → (parameter, type, value when the flag is given alone: True/False for on/off flags, None for a value
    option), [(parameter, default)] in the signature's order)."""
    flags: dict[str, tuple[str, type, Any]] = {}
    order: list[tuple[str, Any]] = [("model", ...)]

    def add(name: str, decls: tuple[str, ...], kind: type, default: Any) -> None:
        order.append((name, default))
        for decl in (d for d in decls if d.startswith("--")):  # a short flag (-q) is typer's to read
            on, _, off = decl.partition("/")
            flags[on] = (name, kind, True if kind is bool else None)
            if off:
                flags[off] = (name, kind, False)

    for name in _OWN_BEFORE_GROUPS:
        add(name, *OWN[name])
    for cls in GROUPS.values():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            add(f.name, f.metadata["decls"], _base(hints[f.name]), f.default)
    for name, spec in OWN.items():
        if name not in _OWN_BEFORE_GROUPS:
            add(name, *spec)
    return flags, order


def _digits(text: str, most: int) -> bool:
    """1 to ``most`` ASCII digits."""
    return 0 < len(text) <= most and text.isascii() and text.isdigit()


def _plain_int(text: str) -> bool:
    """``0`` or digits without a leading zero, at most 18 (an int64 and a float64 read them alike)."""
    return _digits(text, 18) and (text == "0" or text[0] != "0")


def _plain_float(text: str) -> bool:
    """A plain int, or one with a fraction of 1 to 17 digits (``0.9``, ``12.5``)."""
    whole, dot, frac = text.partition(".")
    return _plain_int(whole) and (not dot or _digits(frac, 17))


def _value(kind: type, text: str) -> Any:
    """The value of a value option, or None when typer should read it."""
    if not text or text.startswith("-"):
        return None
    if kind is int:
        return int(text) if _plain_int(text) else None
    if kind is float:
        return float(text) if _plain_float(text) else None
    if kind is str:
        return text
    if kind is Path:
        return Path(text)
    return None


def parse_simulate(argv: list[str]) -> dict[str, Any] | None:
    """The values typer would pass ``simulate`` (every parameter, group fields flat, in its signature's order) for the
    arguments after ``simulate``; None where the line is not one of the plain forms (typer then reads it)."""
    flags, order = _table()
    given: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if not arg.startswith("-"):
            positional.append(arg)
            continue
        name_part, eq, inline = arg.partition("=")
        spec = flags.get(name_part)
        if spec is None:
            return None  # --help, --, a short or unknown flag: typer's
        name, kind, alone = spec
        if name in given:
            return None  # repeated (typer keeps the last; its path says so)
        if alone is not None:  # an on/off flag
            if eq:
                return None
            given[name] = alone
            continue
        if not eq:
            if i >= len(argv):
                return None
            inline = argv[i]
            i += 1
        value = _value(kind, inline)
        if value is None:
            return None
        given[name] = value
    if len(positional) != 1 or positional[0] == "":
        return None
    given["model"] = positional[0]
    values = {}
    for name, default in order:
        value = given.get(name, default)
        if value is ...:
            return None  # a required option missing: typer's message
        values[name] = value
    return values


def run_simulate_quick(argv: list[str]) -> bool:
    """Run ``kvledger simulate ARGV`` when the line is a plain one and every number is in range; False (nothing done)
    when typer must read it. Ends as typer's command would: Ctrl-C exits 130, a closed stdout 1."""
    if any(k.endswith("_COMPLETE") for k in os.environ):  # a shell-completion request: typer's
        return False
    values = parse_simulate(argv)
    if values is None:
        return False
    from kvledger.ranges import range_problems

    if range_problems("simulate", values):
        return False  # typer's path reports them, with limits.checked's wording and flag names
    from kvledger.cli.simulate_run import run_simulate

    for group, cls in GROUPS.items():
        values[group] = cls(**{f.name: values.pop(f.name) for f in dataclasses.fields(cls)})
    try:
        run_simulate(**values)
    except KeyboardInterrupt:
        sys.exit(130)
    except EOFError:
        sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    except BrokenPipeError:  # the reader stopped reading (`| head -1`): quietly, with the answer's status
        from kvledger.cli.broken_pipe import declared_status, reader_gone

        reader_gone(declared_status())
    return True
