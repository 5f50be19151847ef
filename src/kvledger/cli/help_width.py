"""Every command's ``--help`` within the console's width: an option whose spellings alone are wider (a vLLM boolean
flag and its ``--no-`` form, ``--long-prefill-token-threshold-adaptive / --no-long-prefill-token-threshold-adaptive``:
86 columns) lists its second spelling on a line of its own, as the help text already does past a wide first column."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from typer.core import TyperCommand

__all__ = ["NarrowHelpCommand", "narrow_help"]


_Context0 = TyperCommand.context_class  # typer's click context (typer 0.29 ships its own click)


class _Formatter(_Context0.formatter_class):
    """click's formatter, but a first column wider than the line splits at its " / " (the flag, then its negation)."""

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        out: list[tuple[str, str]] = []
        for first, second in rows:
            if self.current_indent + len(first) > self.width and " / " in first:
                on, off = first.split(" / ", 1)
                out += [(f"{on} /", ""), (f"  {off}", second)]  # an empty second column ends the line (click)
            else:
                out.append((first, second))
        super().write_dl(out, col_max, col_spacing)


class _Context(_Context0):
    formatter_class = _Formatter


class NarrowHelpCommand(TyperCommand):
    """typer's command, its help written by ``_Formatter``."""

    context_class: Any = _Context


def narrow_help(cls: Any) -> Any:
    """The command class a registered command gets: ``NarrowHelpCommand`` in place of typer's default."""
    return NarrowHelpCommand if cls in (None, TyperCommand) else cls
