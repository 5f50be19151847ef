"""``kvledger experiment NAME``: run one of the seed's comparisons on the simulator and print it as a table."""

from __future__ import annotations

from pathlib import Path

import typer

from kvledger import strict_json
from kvledger.report.plotfile import check_plot_path, save_plot
from kvledger.report.progress import working

__all__ = ["register"]


def experiment(
    name: str = typer.Argument(..., help="batching, kv-waste, budget or prefix-cache."),
    quick: bool = typer.Option(False, "--quick", help="Fewer requests: a first look in seconds."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    plot: Path | None = typer.Option(None, "--plot", help="Also draw the comparison to FILE (.png, .svg or .pdf); "
                                                          "refuses to overwrite without --force."),
    force: bool = typer.Option(False, "--force", help="Allow --plot to overwrite an existing file."),
) -> None:
    """Run a comparison from the seed claims (continuous vs static batching, KV waste, the token-budget seesaw,
    prefix caching and routing) and print it with its setup and the published expectation."""
    from kvledger.analyses.serving.experiments import run_experiment
    from kvledger.cli.outputs import refuse_lone_force

    refuse_lone_force(force, {"--plot": plot})
    check_plot_path(plot, force)
    with working(f"running experiment {name}"):
        res = run_experiment(name, quick=quick)
    if plot is not None:
        from kvledger.report.experiment_view import experiment_figure

        save_plot(experiment_figure(res), plot)
    if as_json:
        typer.echo(strict_json.dumps(res.to_dict(), indent=2))
        return
    from rich.console import Console

    from kvledger.report.experiment_view import render_experiment

    render_experiment(res, Console(emoji=False))


def register(app: typer.Typer) -> None:
    app.command("experiment")(experiment)
