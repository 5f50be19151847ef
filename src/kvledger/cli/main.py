"""The ``kvledger`` command: registers each sub-command and turns user errors into clear messages.

Each command module exposes ``register(app)``; heavy imports happen inside the command
body so that ``kvledger plan`` starts fast.
"""

from __future__ import annotations

import sys

import typer

from kvledger.errors import KvLedgerError

app = typer.Typer(
    name="kvledger",
    help="The KV-cache ledger and the serving/cost ledger for LLM inference.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)

from kvledger.cli import catalog_cmd, plan_cmd  # noqa: E402
from kvledger.cli import goodput_cmd  # noqa: E402
from kvledger.cli import cost_cmd  # noqa: E402
from kvledger.cli import fp8_kv_cmd  # noqa: E402
from kvledger.cli import spec_decode_cmd  # noqa: E402
from kvledger.cli import simulate_cmd  # noqa: E402
from kvledger.cli import experiment_cmd  # noqa: E402
from kvledger.cli import kv_eviction_cmd  # noqa: E402
from kvledger.cli import doctor_cmd  # noqa: E402
from kvledger.cli import disagg_cmd  # noqa: E402
from kvledger.cli import calibrate_cmd, validate_cmd  # noqa: E402
from kvledger.cli import search_cmd  # noqa: E402
from kvledger.cli import report_cmd, ui_cmd  # noqa: E402  (f-report: the HTML report and the web app)

plan_cmd.register(app)
catalog_cmd.register(app)
goodput_cmd.register(app)
cost_cmd.register(app)
fp8_kv_cmd.register(app)
spec_decode_cmd.register(app)
simulate_cmd.register(app)
experiment_cmd.register(app)
kv_eviction_cmd.register(app)
doctor_cmd.register(app)
disagg_cmd.register(app)
calibrate_cmd.register(app)
validate_cmd.register(app)
search_cmd.register(app)
report_cmd.register(app)
ui_cmd.register(app)


def _version(value: bool) -> None:
    if value:
        from kvledger import __version__

        typer.echo(f"kvledger {__version__}")
        raise typer.Exit()


@app.callback()
def _main(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version and exit.")) -> None:
    """The KV-cache ledger and the serving/cost ledger for LLM inference."""


def run() -> None:
    """Console entry point: run the app; a KvLedgerError prints its message and exits with status 2."""
    try:
        app()
    except KvLedgerError as err:
        from rich.console import Console
        from rich.markup import escape

        Console(stderr=True, highlight=False).print(f"[bold red]error:[/] {escape(str(err))}", soft_wrap=True)
        sys.exit(2)


# Keep this last, after every register(app): each command's numeric options are checked against their ranges
# (kvledger/cli/limits.py) before the command runs.
from kvledger.cli.limits import SELF_CHECKED, checked  # noqa: E402

for _info in app.registered_commands:
    if _info.name not in SELF_CHECKED and not getattr(_info.callback, "range_checked", False):
        _info.callback = checked(_info.name or _info.callback.__name__, _info.callback)


if __name__ == "__main__":
    run()
