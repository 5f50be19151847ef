"""The rich table every terminal view uses: left-titled, columns that fold rather than cut a number."""

from __future__ import annotations

__all__ = ["table"]


def table(title: str, *cols: str):
    """A left-titled rich table with folding columns."""
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold", expand=False)
    for c in cols:
        t.add_column(c, overflow="fold")
    return t
