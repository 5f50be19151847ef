"""A sweep's notes, each said once: what every stage says first, then each stage's own, in stage order and named by
its rate (before, the stages' notes were pooled and sorted, so seven near-identical lines, one per stage, came in
alphabetical order with no stage named). A note that two or more stages give with only their own figures differing —
written ``… (this stage: FIGURES)`` (``stage_notes``) — is said once, with each stage's figures after it (a fresh
user's trial counted 14 near-identical notes on kubecon's seven stages)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["sweep_notes", "brief_sweep_notes", "brief_notes", "STAGE_FIGURES"]

#: how a stage note ends with the stage's own figures: ``HEAD (this stage: FIGURES)``
STAGE_FIGURES = " (this stage: "
_NUMBER = re.compile(r"(\d[\d,.]*\d|\d)")


def sweep_notes(rows: list[Any], rates: list[float], clients: bool = False) -> list[str]:
    """The notes of the stages ``rows`` (``RunValidation``, sorted by requested rate ``rates``, or by their clients
    when ``clients``): those every stage gives, once, in the order given; then the rest stage by stage, each prefixed
    ``at R req/s:`` (4 significant figures, as the table; ``at N clients:``) unless it already starts with its
    stage's run name."""
    common = [n for n in dict.fromkeys(n for r in rows for n in r.notes) if all(n in r.notes for r in rows)]
    out = list(common)
    levels = [f"{rate:,.0f} clients" if clients else f"{rate:#.4g} req/s" for rate in rates]  # as the table prints
    heads: dict[str, list[str]] = {}  # a note's head → "LEVEL: figures" of each stage giving it
    for r, level in zip(rows, levels):
        for n in r.notes:
            head, sep, figures = n.rpartition(STAGE_FIGURES)
            if sep and figures.endswith(")") and n not in common:
                heads.setdefault(head, []).append(f"{level}: {figures[:-1]}")
    for r, level in zip(rows, levels):
        for n in r.notes:
            if n in common:
                continue
            head, sep, figures = n.rpartition(STAGE_FIGURES)
            if sep and figures.endswith(")") and len(heads.get(head, ())) >= 2:
                text = f"{head} (by stage: {'; '.join(heads[head])})"
            else:
                text = n if n.startswith(r.run) else f"at {level}: {n}"
            if text not in out:
                out.append(text)
    return out


def _skeleton(note: str) -> tuple[str, ...]:
    """A note's words without its numbers: notes that differ in their figures alone share it."""
    return tuple(_NUMBER.split(note)[::2])


def _merged(notes: list[str]) -> str:
    """Notes of one skeleton as one: each number that differs between them as their values in stage order, "a/b/c"."""
    parts = [_NUMBER.split(n) for n in notes]
    return "".join(p if i % 2 == 0 else "/".join(dict.fromkeys(q[i] for q in parts))
                   for i, p in enumerate(parts[0]))


def brief_sweep_notes(rows: list[Any], rates: list[float], clients: bool = False) -> list[str]:
    """``sweep_notes`` shortened for the default output: a note several stages give is said once with the levels it
    applies to ("at 122.6, 153.0, 183.4 req/s: …"), a figure that differs between them as its values in stage order
    ("line 1/2/3"), one they give with a tail of their own figures without it ("(at …; --verbose: each stage's
    figures)"); the notes every stage gives, and one stage's own, as ``sweep_notes`` says them. ``validate --verbose``
    prints ``sweep_notes`` whole."""
    common = [n for n in dict.fromkeys(n for r in rows for n in r.notes) if all(n in r.notes for r in rows)]
    levels = [f"{rate:,.0f}" if clients else f"{rate:#.4g}" for rate in rates]
    unit = "clients" if clients else "req/s"
    groups: dict[Any, list[tuple[str, str]]] = {}  # a note's skeleton (or head) → (level, note) of each stage giving it
    for r, level in zip(rows, levels):
        for n in r.notes:
            if n not in common:
                head, sep, figures = n.rpartition(STAGE_FIGURES)
                key = ("figures", head) if sep and figures.endswith(")") else _skeleton(n)
                groups.setdefault(key, []).append((level, head if key[0] == "figures" else n))
    out = list(common)
    for key, given in groups.items():
        where = f"{', '.join(dict.fromkeys(level for level, _ in given))} {unit}"
        notes = list(dict.fromkeys(n for _, n in given))
        if key[0] == "figures":
            out.append(f"{notes[0]} (at {where}; --verbose: each stage's figures)")
        elif len(given) == 1 and any(notes[0].startswith(r.run) for r in rows):
            out.append(notes[0])  # already names its stage
        else:
            out.append(f"at {where}: {_merged(notes)}")
    return list(dict.fromkeys(out))


def brief_notes(r: Any) -> list[str]:
    """A ``SweepValidation``'s notes for the default output: those ``validate_sweep`` adds of its own (a mixed-folders
    warning) first, then the stages' notes grouped (``brief_sweep_notes``)."""
    closed = r.clients is not None
    levels = [float(x) for x in (r.clients if closed else r.rates)]
    staged = set(sweep_notes(r.runs, levels, closed))
    return [n for n in r.notes if n not in staged] + brief_sweep_notes(r.runs, levels, closed)
