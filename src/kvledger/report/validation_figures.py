"""The figures ``kvledger validate`` prints in every view (``calibration_view``'s single run, ``sweep_view``'s load
sweep, ``calibrate``'s tables): a value in its unit, an error as a signed percentage, the step cost's line, and an
80% band's span, its ✗ and the line naming the bands' source and regime."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from kvledger.calibration.judged_band import band_covers
from kvledger.report.step_cost_view import SOURCE_BELOW

if TYPE_CHECKING:
    from kvledger.calibration.validate import RunValidation

__all__ = ["fmt_value", "fmt_rate", "fmt_error", "step_cost_line", "step_cost_source", "band_span", "outside",
           "band_source_line", "warnings_first", "BAND_MARKS_NOTE", "band_mark", "latency_scale"]

#: what ✓ and ✗ next to a band mean: printed wherever a band column shows
BAND_MARKS_NOTE = ("✓: the measured figure lies inside its 80% band; ✗: outside it (the simulator erred more there "
                   "than on 80% of the points behind it)")


def fmt_value(v: float | None, unit: str, beside: float | None = None) -> str:
    """A figure in its unit (latencies in ms below 10 s). ``beside``: the figure printed next to it (measured beside
    predicted), so that both take one unit, that of the larger: 14.67 s beside 9.53 s, not beside 9,533.4 ms."""
    if v is None:
        return "—"
    size = max(abs(v), abs(beside)) if beside is not None else abs(v)
    if unit == "s":
        if size < 10:
            return f"{v * 1e3:,.1f} ms"
        # in s beside a larger figure: three significant figures below 1 s (0.0271 s, not "0.03 s" beside "0.02 s")
        return f"{v:.{2 - math.floor(math.log10(abs(v)))}f} s" if 0 < abs(v) < 1 else f"{v:,.2f} s"
    if unit == "fraction":
        return f"{v:.1%}"
    if 0 < size < 1:  # a slow run (0.025 req/s): three significant figures, not "0.03 req/s" beside "0.03 req/s"
        return f"{v:.{2 - math.floor(math.log10(size))}f} {unit}"
    return f"{v:,.2f} {unit}"


def latency_scale(rows: list[Any]) -> dict[str, float]:
    """Per latency row (a comparison row in s), the largest figure measured or predicted of its latency (its metric
    less the statistic: "TTFT" of "TTFT p90"): ``fmt_value(v, "s", that)`` prints a latency's rows in one unit, not
    9,442.7 ms in one row and 16.85 s in the next.

    >>> latency_scale([type("R", (), {"metric": "TTFT p50", "unit": "s", "measured": 9.44, "predicted": None})(),
    ...                type("R", (), {"metric": "TTFT p90", "unit": "s", "measured": 16.85, "predicted": 0.09})()])
    {'TTFT p50': 16.85, 'TTFT p90': 16.85}
    """
    top: dict[str, float] = {}
    for row in rows:
        if row.unit == "s":
            g = row.metric.rsplit(" ", 1)[0]
            top[g] = max([top.get(g, 0.0), *(abs(v) for v in (row.measured, row.predicted) if v is not None)])
    return {row.metric: top[row.metric.rsplit(" ", 1)[0]] for row in rows if row.unit == "s"}


def fmt_rate(rate: float) -> str:
    """A request rate (req/s) to 4 significant figures, trailing zeros kept so that a column of them reads alike:
    1.000, 37.97, 111.9, 1,250 (a stage's requested rates, 1 and 37.97, would read "1" and "37.97" with ``:g``)."""
    if rate == 0 or rate != rate or abs(rate) == float("inf"):
        return f"{rate:g}"
    r = float(f"{rate:.4g}")  # rounded first: 9.9996 is 10.00, not 10.000
    return f"{r:,.{max(0, 3 - math.floor(math.log10(abs(r))))}f}"


def fmt_error(e: float | None) -> str:
    """predicted/measured − 1 as a signed percentage."""
    if e is None:
        return "—"
    return "+0.0%" if round(e * 100, 1) == 0 else f"{e * 100:+.1f}%"  # no "-0.0%" for an error that rounds to none


def step_cost_line(r: RunValidation) -> str:
    """``step cost: NAME (priced by: SCOPE; its source under the figures)`` of a validated run (rich markup,
    escaped): what single-run ``validate`` prints under its header and ``validate --sweep`` once above its table;
    the source is ``step_cost_source(r)``, under the figures."""
    # a calibration named as simulate names it ("gpu: GPU profile FILE (fitted on …)"), not the bare scope "gpu"
    scope = str(r.scope) if r.scope == "uncalibrated" else str(r.step_cost.get("priced_by") or r.scope)
    return f"step cost: {escape(str(r.step_cost.get('name')))} (priced by: {escape(scope)}; {SOURCE_BELOW})"


def step_cost_source(r: RunValidation) -> str:
    """``step cost source: SOURCE`` of a validated run (rich markup, escaped), printed under its figures."""
    return f"[dim]step cost source: {escape(str(r.step_cost.get('source', '')))}[/]"


def band_span(band: Any, unit: str, beside: float | None = None) -> str:
    """A prediction band's low–high in the table's format (``fmt_value``), the unit said once: ``8.8–48.7 ms``; "—"
    for none. ``beside``: the largest figure of its column, whose unit it takes."""
    if band is None:
        return "—"
    top = max(abs(band.high), abs(band.low), abs(beside or 0.0))
    lo, hi = fmt_value(band.low, unit, top), fmt_value(band.high, unit, top)
    tail = hi.rsplit(" ", 1)[-1]
    return f"{lo.removesuffix(' ' + tail)}–{hi}"


def outside(band: Any, measured: float | None) -> bool:
    """Whether the measured figure lies outside a ``PredictionBand`` (False without a band or a measured figure;
    ``judged_band.band_covers``: within 1e-9 of an end counts inside)."""
    return band_covers(band, measured) is False


def band_mark(band: Any, measured: float | None) -> str:
    """" ✓" when the measured figure lies inside the band, " ✗" outside, "" when either is missing (``BAND_MARKS_NOTE``
    says so under the table)."""
    covers = band_covers(band, measured)
    return "" if covers is None else " ✓" if covers else " ✗"


def band_source_line(bands: dict[str, Any], regime: str) -> str | None:
    """Where the bands come from: figure name → its ``PredictionBand`` (None: no band), each source said once with
    the figures it stands for, and the regime; None when no figure has a band."""
    sources: dict[str, list[str]] = {}
    for name, x in bands.items():
        if x is not None:
            sources.setdefault(x.source, []).append(name)
    if not sources:
        return None
    return ("bands: where a real engine's figure fell, given the simulated one, on 80% of the points behind them — "
            + "; ".join(f"{', '.join(names)}: {src}" for src, names in sources.items())
            + f" (kvledger.ledgers.error_band; regime {regime}); the percentages are errors, predicted ÷ measured − 1, "
            "so the measured figure lies in the range the band shows")


def biased_line(bands: dict[str, Any]) -> str | None:
    """"read the band, not the point" where a band excludes the prediction it stands around (its regime's errors
    share a sign, so the simulator erred that way on about 90% of the regime's points), as simulate says it; None
    when no band does."""
    biased = [f"{name} {'under' if x.low > x.predicted else 'over'}-predicted" for name, x in bands.items()
              if x is not None and not x.low <= x.predicted <= x.high]
    if not biased:
        return None
    return (f"read the band, not the point: {', '.join(biased)} (the 80% band lies wholly on one side: the simulator "
            "erred that way on this regime's measured points, so a large error inside the band is the usual one)")


def warnings_first(notes: list[str]) -> tuple[list[str], list[str]]:
    """A validation's notes split as printed: the WARNING ones (what makes the comparison another run's: above the
    figures), then the rest (under them)."""
    from kvledger.calibration.profile_frontend import FRONTEND_HEAD

    first = ("WARNING", FRONTEND_HEAD)  # and the fitted front-end latency validate added (calibration.profile_frontend)
    return [n for n in notes if n.startswith(first)], [n for n in notes if not n.startswith(first)]
