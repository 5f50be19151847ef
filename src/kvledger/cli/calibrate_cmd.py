"""``kvledger calibrate FILE... --model M --gpu G [engine flags] --out PROFILE.json``: fit the step cost to measured runs and write a calibration profile."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from kvledger.cli.calib_opts import CALIB_ENGINE, Gpu, MaxPaddings, Model, engine_args
from kvledger.cli.flag_groups import EngineFlags, with_groups

__all__ = ["register"]


@with_groups(engine=CALIB_ENGINE)
def calibrate(
    files: list[str] = typer.Argument(..., help="Measured runs with per-request times: any benchmark file `kvledger goodput` reads, an LLMServingSim requests.jsonl (or its folder), or a bundled DistServe run (distserve:vllm-100-1)."),
    model: Model = ..., gpu: Gpu = ..., engine: EngineFlags = EngineFlags(), max_paddings: MaxPaddings = None,
    fit_frontend: bool = typer.Option(False, "--fit-frontend/--no-fit-frontend", help="Also fit a per-request latency outside the engine (HTTP, tokenisation), added to TTFT and E2E: for client-side measurements."),
    start: str = typer.Option("roofline", "--start", help="Step cost the fit starts from (its least-squares linear form): roofline, calibrated, calibrated:KEY or a PROFILE.json."),
    leave_one_out: bool = typer.Option(True, "--leave-one-out/--no-leave-one-out", help="With several runs, also fit without each run and report its error (one extra fit per run)."),
    out: Path | None = typer.Option(None, "--out", help="Write the calibration profile here (JSON); use it with --step-cost FILE."),
    force: bool = typer.Option(False, "--force", help="Allow --out to overwrite an existing file."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile as JSON instead of tables."),
) -> None:
    """Fit the simulator's step cost to measured runs: replays their arrivals and lengths, minimises the TTFT/TPOT/E2E error, reports fit and leave-one-out errors."""
    from kvledger.accounting.calibration_profile import dump_profile
    from kvledger.calibration.api import calibrate_files
    from kvledger.errors import InputError

    if out is not None and out.exists() and not force:
        raise InputError(f"--out {out} exists; refusing to overwrite it (pass --force)")
    args = engine_args(model, gpu, engine, step_cost=start)
    profile = calibrate_files(files, args, max_paddings=max_paddings,
                              leave_one_out=leave_one_out, fit_frontend=fit_frontend)
    text = dump_profile(profile)
    if out is not None:
        out.write_text(text, encoding="utf-8")
    if as_json:
        typer.echo(text, nl=False)
        return
    from rich.console import Console

    from kvledger.report.calibration_view import render_profile

    render_profile(json.loads(text), Console(), out)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)
