"""What the web app's serving panel says under its answer, as ``kvledger cost`` and the HTML report say it where the
decision is stated: the answer's notes (an API row that is another model; a capacity only bounded below), the
break-even line, and what the answer rests on (the price rows' confidence, memory rules not validated on this GPU,
an uncalibrated step cost; whether the verdict holds across the capacity band).

Built from the cost JSON (``cost --simulate --json``) by the report's own functions (``html_report``), in the app's
words (``webapp_words``)."""

from __future__ import annotations

from typing import Any

__all__ = ["answer_caveats", "headline_notes", "figure_json"]


def figure_json(f: Any) -> dict[str, Any]:
    """A report figure as both panels send it: its SVG beside its title, caption, table and sources."""
    from kvledger.report.figure import svg_of

    return {"title": f.title, "caption": f.caption, "svg": svg_of(f.fig), "headers": f.headers, "rows": f.rows,
            "sources": f.sources}


def headline_notes(headline: list[str]) -> list[str]:
    """The cost headline's ``note:``, ``not priced:`` (a one-replica bill's missing spare: ``ledgers/spare_note.py``)
    and ``WARNING:`` lines (after the answer), stripped, in the order cost prints them."""
    return [line.strip() for line in headline[1:] if line.strip().startswith(("note:", "not priced:", "WARNING:"))]


def answer_caveats(cost: dict[str, Any]) -> dict[str, Any]:
    """``notes`` (the headline's notes), ``break_even`` (cost's own break-even line with a volume, else the report's
    break-even utilization and volume) and ``rests_on`` (the report's "Rests on" sentence; None without a volume:
    no decision, as neither cost nor the report says one then), each in the app's words."""
    from kvledger.report.html_report import break_even_text, rests_on_text
    from kvledger.report.webapp_words import in_app_words

    headline = cost.get("headline") or []
    line = next((h.strip() for h in headline[1:] if h.strip().startswith("break-even")), None)
    decision = cost.get("decision")
    return {"notes": [in_app_words(n) for n in headline_notes(headline)],
            "break_even": in_app_words(line or break_even_text(cost)),
            "rests_on": in_app_words(rests_on_text(decision)) if decision is not None else None}
