"""One figure of a report: the matplotlib drawing, the table of its numbers, its axes' units and its sources; rendered
as inline SVG or PNG.

Drawings are deterministic (fixed SVG hash salt, no date in the metadata), so the same data gives
byte-identical SVG and the HTML report is reproducible.
"""

from __future__ import annotations

import functools
import io
import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["Figure", "new_axes", "svg_of", "png_of", "fmt", "plain_power"]

_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
# matplotlib's log-axis labels (ticker.LogFormatterSciNotation): $\mathdefault{[-][C\times]B^{E}}$ and $\mathdefault{X}$
_POWER = re.compile(r"^\$\\mathdefault\{(-?)(?:([\d.]+)\\times)?(\d+|e)\^\{(-?\d+)\}\}\$$")
_PLAIN = re.compile(r"^\$\\mathdefault\{(-?)([\d.]+)\}\$$")


@dataclass
class Figure:
    """A drawn figure and what the report prints beside it.

    Attributes:
        key: file-name stem (``memory_waterfall`` → ``memory_waterfall.png``).
        title, caption: heading and one paragraph saying what the figure shows and how to read it.
        fig: the matplotlib figure.
        headers, rows: the table of the numbers drawn (strings, units in the headers).
        sources: where each number came from (formula, engine rule, bundled data file, simulation).
        svg: the drawing as inline SVG once drawn (``drawn``): such a figure crosses processes without ``fig``.
    """

    key: str
    title: str
    caption: str
    fig: Any
    headers: list[str]
    rows: list[list[str]]
    sources: list[str] = field(default_factory=list)
    svg: str | None = None

    def drawn(self) -> Figure:
        """This figure with its SVG drawn and its matplotlib figure dropped (small, picklable)."""
        return replace(self, fig=None, svg=self.svg if self.svg is not None else svg_of(self.fig))


def new_axes(ncols: int = 1, width: float = 6.4, height: float = 3.6):
    """A figure with ``ncols`` axes (Agg backend, no display needed)."""
    from matplotlib.figure import Figure as MplFigure

    fig = MplFigure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def plain_power(label: str) -> str:
    """A log axis's tick label as plain text: ``$\\mathdefault{2\\times10^{3}}$`` → ``2×10³`` (the same glyphs, drawn
    without matplotlib's mathtext parser, which took about a quarter of a report's drawing time); any other label
    unchanged."""
    m = _POWER.match(label)
    if m is not None:
        sign, coeff, base, exp = m.groups()
        return f"{'−' if sign else ''}{coeff + '×' if coeff else ''}{base}{exp.translate(_SUPERSCRIPT)}"
    m = _PLAIN.match(label)
    return label if m is None else f"{'−' if m.group(1) else ''}{m.group(2)}"


@functools.cache
def _plain_formatter() -> type:
    from matplotlib.ticker import Formatter

    class PlainPowers(Formatter):
        """A log formatter's labels through ``plain_power`` (it still chooses which ticks get a label)."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def set_locs(self, locs: Any) -> None:
            self.inner.set_locs(locs)

        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_power(self.inner(x, pos))

        def get_offset(self) -> str:
            return self.inner.get_offset()

    return PlainPowers


def _plain_log_ticks(fig: Any) -> None:
    """Every log axis of ``fig`` labelled by ``plain_power`` (idempotent)."""
    from matplotlib.ticker import LogFormatterSciNotation

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(axis.get_major_formatter(), LogFormatterSciNotation):
                axis.set_major_formatter(_plain_formatter()(axis.get_major_formatter()))
            if isinstance(axis.get_minor_formatter(), LogFormatterSciNotation):
                axis.set_minor_formatter(_plain_formatter()(axis.get_minor_formatter()))


def svg_of(fig: Any) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no date; same data → same bytes)."""
    import matplotlib

    _plain_log_ticks(fig)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "kvledger", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]


def png_of(fig: Any, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    _plain_log_ticks(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return buf.getvalue()


def fmt(x: float | None, digits: int = 3) -> str:
    """A number for a table: thousands separators, ``digits`` significant figures below 1,000 (rounded first, so
    999.7 is ``1,000``), ``—`` for none."""
    if x is None:
        return "—"
    a = abs(x)
    if a >= 1000 or float(f"{a:.{digits}g}") >= 1000:  # rounded first: 999.7 is 1,000, never 1e+03
        return f"{x:,.0f}"
    if a == 0:
        return "0"
    return f"{x:.{digits}g}"
