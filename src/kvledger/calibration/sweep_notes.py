"""A sweep's notes, each said once: what every stage says first, then each stage's own, in stage order and named by
its rate (before, the stages' notes were pooled and sorted, so seven near-identical lines, one per stage, came in
alphabetical order with no stage named). A note that two or more stages give with only their own figures differing —
written ``… (this stage: FIGURES)`` (``stage_notes``) — is said once, with each stage's figures after it (a fresh
user's trial counted 14 near-identical notes on kubecon's seven stages)."""

from __future__ import annotations

from typing import Any

__all__ = ["sweep_notes", "STAGE_FIGURES"]

#: how a stage note ends with the stage's own figures: ``HEAD (this stage: FIGURES)``
STAGE_FIGURES = " (this stage: "


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
