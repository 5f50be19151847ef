"""A number option given something that is not one (``--num-requests 1e3``, ``--rate 20req/s``): typer's converter
says "Input should be a valid integer, unable to parse string as an integer", which names neither the value nor what
to write. :func:`number_words` says it the way the project's other input errors do (``--max-model-len``'s token
counts, ``ranges``' ranges): the flag, the value as given, what the flag takes, an example and the allowed range."""

from __future__ import annotations

import re
import sys
from typing import Any

__all__ = ["number_words"]

#: typer's converter's messages → the kind of number the option takes
_KINDS = {"Input should be a valid integer": "int", "Input should be a valid number": "float"}
_LEADING = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def number_words(err: Any, argv: list[str] | None = None) -> str | None:
    """The one-line message for ``err`` where it is typer's refusal of a non-number for a number option, else None.
    ``argv``: the command line (default ``sys.argv[1:]``), where the value given is read."""
    kind = next((k for m, k in _KINDS.items() if str(getattr(err, "message", "")).startswith(m)), None)
    param, ctx = getattr(err, "param", None), getattr(err, "ctx", None)
    if kind is None or param is None or not getattr(param, "opts", None):
        return None
    flag = max(param.opts, key=len)  # the long spelling
    given = _given(param.opts, sys.argv[1:] if argv is None else argv)
    from kvledger.ranges import range_for

    rng = range_for(ctx.info_name if ctx is not None else "", param.name or "")
    example = _example(given, kind)
    if rng is not None and _outside(rng, float(example)):  # 90% for a fraction: no example rather than a wrong one
        example = None
    e_g = f", e.g. {flag} {example}" if example is not None else ""
    allowed = f"; allowed: {rng.describe()}" if rng is not None else ""
    shown = "" if given is None else f" {given!r}"
    if kind == "int":
        return f"{flag}{shown} is not a whole number: write digits only (no exponent, fraction or unit){e_g}{allowed}"
    return f"{flag}{shown} is not a number: write it without a unit or suffix{e_g}{allowed}"


def _outside(rng: Any, x: float) -> bool:
    """Whether ``x`` lies outside ``rng`` (``ranges.Range``)."""
    return (x <= rng.lo if rng.lo_open else x < rng.lo) or (x >= rng.hi if rng.hi_open else x > rng.hi)


def _given(opts: list[str], argv: list[str]) -> str | None:
    """The last value given to one of ``opts`` in ``argv`` (``--flag VALUE`` or ``--flag=VALUE``); None if not found."""
    value = None
    for i, word in enumerate(argv):
        name, eq, rest = word.partition("=")
        if name in opts:
            value = rest if eq else (argv[i + 1] if i + 1 < len(argv) else None)
    return value


def _example(given: str | None, kind: str) -> str:
    """The number ``given`` starts with, in the form the option takes (1e3 → 1000, 20req/s → 20); 1000 or 1.5 when
    it starts with none."""
    m = _LEADING.match((given or "").strip())
    if m is None:
        return "1000" if kind == "int" else "1.5"
    x = float(m.group(0)) / (100 if given.strip().endswith("%") else 1)  # 90% → 0.9
    if kind == "int":
        return str(int(x)) if x.is_integer() and abs(x) < 1e18 else "1000"
    return f"{x:g}"
