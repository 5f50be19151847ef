"""``kvledger validate FILE --model M --gpu G [--step-cost …] [--slo …]``: replay a measured run and print predicted vs measured with the error of each figure."""

from __future__ import annotations

import json

import typer

from kvledger.cli.calib_opts import CALIB_ENGINE, Gpu, MaxPaddings, Model, engine_args
from kvledger.cli.flag_groups import EngineFlags, with_groups

__all__ = ["register"]


@with_groups(engine=CALIB_ENGINE)
def validate(
    file: str = typer.Argument(..., help="A measured run with per-request times (as for `kvledger calibrate`), or an inference-perf stage report (aggregates: compared stage to stage on a synthetic workload like it)."),
    model: Model = ..., gpu: Gpu = ..., engine: EngineFlags = EngineFlags(), max_paddings: MaxPaddings = None,
    step_cost: str = typer.Option("roofline", "--step-cost", help="roofline, calibrated, calibrated:KEY, or a PROFILE.json from `kvledger calibrate`."),
    client_concurrency: int | None = typer.Option(None, "--client-concurrency", help="Aggregate-only stage files: the client's cap on requests in flight (inference-perf: num_workers × worker_max_concurrency); a stage whose client fell behind its rate is replayed as a closed loop of that many users."),
    seed: int = typer.Option(0, "--seed", help="Aggregate-only stage files: seed of the synthetic workload."),
    slo: str | None = typer.Option(None, "--slo", help="Also compare goodput under these SLOs, e.g. ttft=200ms,tpot=50ms."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
) -> None:
    """Replay a measured run through the simulator: TTFT, ITL, TPOT, E2E (mean, p50, p90, p99), throughput and goodput, predicted vs measured."""
    from kvledger.calibration.api import validate_file
    from kvledger.ledgers.slo import parse_slo

    args = engine_args(model, gpu, engine, step_cost=step_cost)
    result = validate_file(file, args, parse_slo(slo) if slo else None, max_paddings=max_paddings,
                           client_concurrency=client_concurrency, seed=seed)
    if as_json:
        from kvledger.accounting.calibration_profile import dump_profile

        typer.echo(dump_profile(result), nl=False)
        return
    from rich.console import Console

    from kvledger.report.calibration_view import render_validation

    render_validation(json.loads(json.dumps(result, default=str)), Console())


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
