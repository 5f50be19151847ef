"""The figures ``kvledger validate`` prints in every view (``calibration_view``'s single run, ``sweep_view``'s load
sweep, ``calibrate``'s tables): a value in its unit, an error as a signed percentage, and the step cost's line."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    from kvledger.calibration.validate import RunValidation

__all__ = ["fmt_value", "fmt_error", "step_cost_line"]


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
