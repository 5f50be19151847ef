"""The figures ``kvledger validate`` prints in every view (``calibration_view``'s single run, ``sweep_view``'s load
sweep, ``calibrate``'s tables): a value in its unit, an error as a signed percentage, the step cost's line, and an
80% band's span, its ✗ and the line naming the bands' source and regime."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

if TYPE_CHECKING:
    from kvledger.calibration.validate import RunValidation

__all__ = ["fmt_value", "fmt_error", "step_cost_line", "band_span", "outside", "band_source_line", "OUTSIDE_NOTE"]

#: what ✗ next to a band means
OUTSIDE_NOTE = ("✗: the measured figure lies outside its band (the simulator erred more there than on 80% of the "
                "points behind it)")


def fmt_value(v: float | None, unit: str) -> str:
    """A figure in its unit (latencies in ms below 10 s)."""
    if v is None:
        return "—"
    if unit == "s":
        return f"{v * 1e3:,.1f} ms" if abs(v) < 10 else f"{v:,.2f} s"
    if unit == "fraction":
        return f"{v:.1%}"
    return f"{v:,.2f} {unit}"


def fmt_error(e: float | None) -> str:
    """predicted/measured − 1 as a signed percentage."""
    return "—" if e is None else f"{e * 100:+.1f}%"


def step_cost_line(r: RunValidation) -> str:
    """``step cost: NAME (priced by: SCOPE) — SOURCE`` of a validated run (rich markup, escaped): what single-run
    ``validate`` prints under its header and ``validate --sweep`` once above its table."""
    sc = r.step_cost
    return (f"step cost: {escape(str(sc.get('name')))} (priced by: {escape(str(r.scope))}) — "
            f"{escape(str(sc.get('source', '')))}")


def band_span(band: Any, unit: str) -> str:
    """A prediction band's low–high in the table's format (``fmt_value``), the unit said once: ``8.8–48.7 ms``; "—"
    for none."""
    if band is None:
        return "—"
    lo, hi = fmt_value(band.low, unit), fmt_value(band.high, unit)
    tail = hi.rsplit(" ", 1)[-1]
    return f"{lo.removesuffix(' ' + tail)}–{hi}"


def outside(band: Any, measured: float | None) -> bool:
    """Whether the measured figure lies outside a ``PredictionBand`` (False without a band or a measured figure)."""
    return band is not None and measured is not None and not band.low <= measured <= band.high


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
            + f" (kvledger.ledgers.error_band; regime {regime})")
