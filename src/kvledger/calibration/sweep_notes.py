"""A sweep's notes, each said once: what every stage says first, then each stage's own, in stage order and named by
its rate (before, the stages' notes were pooled and sorted, so seven near-identical lines, one per stage, came in
alphabetical order with no stage named)."""

from __future__ import annotations

from typing import Any

__all__ = ["sweep_notes"]


def sweep_notes(rows: list[Any], rates: list[float], clients: bool = False) -> list[str]:
    """The notes of the stages ``rows`` (``RunValidation``, sorted by requested rate ``rates``, or by their clients
    when ``clients``): those every stage gives, once, in the order given; then the rest stage by stage, each prefixed
    ``at R req/s:`` (4 significant figures, as the table; ``at N clients:``) unless it already starts with its
    stage's run name."""
    common = [n for n in dict.fromkeys(n for r in rows for n in r.notes) if all(n in r.notes for r in rows)]
    out = list(common)
    for r, rate in zip(rows, rates):
        for n in r.notes:
            if n in common:
                continue
            level = f"{rate:,.0f} clients" if clients else f"{rate:#.4g} req/s"  # as the sweep table prints it
            text = n if n.startswith(r.run) else f"at {level}: {n}"
            if text not in out:
                out.append(text)
    return out
