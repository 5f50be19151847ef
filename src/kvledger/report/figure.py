"""One figure of a report: the matplotlib drawing, the table of its numbers, its axes' units and its sources; rendered
as inline SVG or PNG.

Drawings are deterministic (fixed SVG hash salt, no date in the metadata), so the same data gives
byte-identical SVG and the HTML report is reproducible.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Figure", "new_axes", "svg_of", "png_of", "fmt"]


@dataclass
class Figure:
    """A drawn figure and what the report prints beside it.

    Attributes:
        key: file-name stem (``memory_waterfall`` → ``memory_waterfall.png``).
        title, caption: heading and one paragraph saying what the figure shows and how to read it.
        fig: the matplotlib figure.
        headers, rows: the table of the numbers drawn (strings, units in the headers).
        sources: where each number came from (formula, engine rule, bundled data file, simulation).
    """

    key: str
    title: str
    caption: str
    fig: Any
    headers: list[str]
    rows: list[list[str]]
    sources: list[str] = field(default_factory=list)


def new_axes(ncols: int = 1, width: float = 6.4, height: float = 3.6):
    """A figure with ``ncols`` axes (Agg backend, no display needed)."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def svg_of(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no date; same data → same bytes)."""
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "kvledger", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def png_of(fig: Any, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a table: thousands separators, ``digits`` significant figures below 1,000, ``—`` for none."""
    if x is None:
        return "—"
    a = abs(x)
    if a >= 1000:
        return f"{x:,.0f}"
    if a == 0:
        return "0"
    return f"{x:.{digits}g}"
