"""``kvledger experiment NAME``: run one of the seed's comparisons on the simulator and print it as a table."""

from __future__ import annotations


import typer

from kvledger.report.progress import working
from kvledger import strict_json

__all__ = ["register"]


PERCENT_COLUMNS = ("prefix_cache_hit_rate", "token_state_share", "kv_usage_mean")
"""Columns holding a fraction of 1 (hit rate, shares of KV memory), printed as % like every other command (JSON keeps fractions)."""


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


def experiment(
    name: str = typer.Argument(..., help="batching, kv-waste, budget or prefix-cache."),
    quick: bool = typer.Option(False, "--quick", help="Fewer requests: a first look in seconds."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
) -> None:
    """Run a comparison from the seed claims (continuous vs static batching, KV waste, the token-budget seesaw,
    prefix caching and routing) and print it with its setup and the published expectation."""
    from kvledger.dynamics.experiments import run_experiment

    with working(f"running experiment {name}"):
        res = run_experiment(name, quick=quick)
    if as_json:
        typer.echo(strict_json.dumps(res.to_dict(), indent=2))
        return
    from rich.console import Console
    from kvledger.report.tables import LedgerTable as Table

    console = Console()
    table = Table(title=f"{res.name}: {res.title}", show_edge=False)
    for c in res.columns:
        table.add_column(c, justify="left" if c in ("policy", "router", "kv_allocation") else "right")
    for row in res.rows:
        table.add_row(*(_fmt(row[c], c) for c in res.columns))
    console.print(table)
    for line in res.setup:
        console.print(f"[dim]setup: {line}[/]")
    if res.expectation:
        console.print(f"published: {res.expectation}")


def register(app: typer.Typer) -> None:
    app.command("experiment")(experiment)
