"""Terminal view and figure of ``kvledger experiment``: the comparison's table with its setup and the published figure,
and a bar chart per numeric column."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvledger.analyses.serving.experiments import ExperimentResult

__all__ = ["PERCENT_COLUMNS", "render_experiment", "experiment_figure"]

PERCENT_COLUMNS = ("prefix_cache_hit_rate", "token_state_share", "kv_usage_mean")
"""Columns holding a fraction of 1 (hit rate, shares of KV memory), printed as % like every other command (JSON keeps
fractions)."""
_TEXT_COLUMNS = ("policy", "router", "kv_allocation")


def _fmt(v, column: str = "") -> str:
    if column in PERCENT_COLUMNS and isinstance(v, (int, float)) and v == v:
        return f"{v:.1%}"
    if isinstance(v, float):
        if v != v:
            return "—"
        if abs(v) >= 100:
            return f"{v:,.0f}"
        return f"{v:.3g}" if abs(v) < 1 else f"{v:,.2f}"
    return str(v)


def render_experiment(res: ExperimentResult, console: Any) -> None:
    """Print the experiment's rows, its setup lines and the published expectation."""
    from kvledger.report.tables import LedgerTable as Table

    table = Table(title=f"{res.name}: {res.title}", show_edge=False)
    for c in res.columns:
        table.add_column(c, justify="left" if c in _TEXT_COLUMNS else "right")
    for row in res.rows:
        table.add_row(*(_fmt(row[c], c) for c in res.columns))
    console.print(table)
    for line in res.setup:
        console.print(f"[dim]setup: {line}[/]")
    if res.expectation:
        console.print(f"published: {res.expectation}")
    for line in res.notes or ():
        console.print(f"· {line}")


def experiment_figure(res: ExperimentResult):
    """One bar chart per numeric column (at most four), rows labelled by their text columns (column names carry the
    units)."""
    from kvledger.report.figure import new_axes

    numeric = [c for c in res.columns if c not in _TEXT_COLUMNS and all(isinstance(r[c], (int,
                                                                                          float)) for r in res.rows)]
    label_cols = [c for c in res.columns if c not in numeric] or res.columns[:1]
    labels = [" / ".join(str(r[c]) for c in label_cols) for r in res.rows]
    cols = numeric[-4:] if len(numeric) > 4 else numeric
    fig, axes = new_axes(max(1, len(cols)), width=3.0 * max(1, len(cols)), height=3.2)
    axes = axes if hasattr(axes, "__len__") else [axes]
    for ax, c in zip(axes, cols):
        scale = 100.0 if c in PERCENT_COLUMNS else 1.0
        ax.bar(range(len(labels)), [r[c] * scale for r in res.rows], color="#4c72b0")
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=6)
        ax.set_title(c + (" (%)" if scale == 100.0 else ""), fontsize=8)
    fig.suptitle(f"{res.name}: {res.title}", fontsize=9)
    return fig
