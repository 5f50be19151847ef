"""``kvledger report MODEL --gpu GPU --slo ... --api ...``: one self-contained HTML decision report (and ``--png DIR``, ``--json``).

The CLI only parses flags: ``kvledger.analyses.serving.decision_data.build_report_data`` builds the data
(the same objects ``plan``, ``cost --simulate``, ``goodput --simulate --target`` and ``simulate``
print with ``--json``) and ``kvledger.report`` draws it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from kvledger.cli.flag_groups import EngineFlags, GroupUse, PricingFlags, WorkloadFlags, with_groups

__all__ = ["register"]


def _check_outputs(out: Path, png: Path | None, force: bool, keys: list[str]) -> None:
    from kvledger.errors import InputError

    if not out.parent.is_dir():
        raise InputError(f"--out {out}: the folder {out.parent} does not exist")
    if out.exists() and not force:
        raise InputError(f"{out} already exists; refusing to overwrite it (pass --force, or choose another --out)")
    if png is not None:
        if png.exists() and not png.is_dir():
            raise InputError(f"--png {png} exists and is not a directory")
        taken = [k + ".png" for k in keys if (png / f"{k}.png").exists()]
        if taken and not force:
            raise InputError(f"{png} already holds {', '.join(taken)}; refusing to overwrite (pass --force)")


#: report takes the engine settings of one deployment, its workload and every pricing flag but --instance.
ENGINE = GroupUse(EngineFlags, only=(
    "tp", "engine_version", "max_model_len", "gpu_memory_utilization", "kv_cache_dtype", "max_num_seqs", "step_cost"))
WORKLOAD = GroupUse(WorkloadFlags, only=("trace", "num_requests", "seed"),
                    defaults={"trace": "azure-conv", "num_requests": 2000, "seed": 0},
                    help={"num_requests": "Requests per simulation (each probe of the capacity search, each sweep "
                                          "point).",
                          "seed": "RNG seed of the workload.",
                          "trace": "azure-conv, azure-code, mooncake, mooncake-synthetic, arxiv, or a CSV/JSONL path."})
PRICING = GroupUse(PricingFlags, only=("gpu_provider", "gpu_usd_per_hour", "utilization", "max_utilization",
                                      "batch_share", "cache_hit_rate", "cache_write_rate", "engineer_months",
                                      "engineer_usd"),
                   defaults={"utilization": 0.5})


@with_groups(workload=WORKLOAD, engine=ENGINE, pricing=PRICING)
def report(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`)."),
    slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'."),
    api: str = typer.Option(..., "--api", help="API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1'."),
    workload: WorkloadFlags = WorkloadFlags(),
    target: float = typer.Option(0.9, "--target", help="Share of requests within the SLO at the capacity, (0, 1]."),
    engine: EngineFlags = EngineFlags(),
    pricing: PricingFlags = PricingFlags(),
    data_sovereignty: str = typer.Option("not_required", "--data-sovereignty", help="required, preferred or not_required."),
    model_control: str = typer.Option("any", "--model-control", help="custom_weights, open_weights or any."),
    team_capability: str = typer.Option("some", "--team-capability", help="experienced, some or none."),
    bench: list[Path] | None = typer.Option(None, "--bench", help="Benchmark output(s) to draw as measured points on the simulation's axes (repeat)."),
    out: Path = typer.Option(Path("kvledger-report.html"), "--out", "-o", help="The HTML file to write."),
    png: Path | None = typer.Option(None, "--png", help="Also write each figure as DIR/<figure>.png."),
    as_json: bool = typer.Option(False, "--json", help="Print the data behind the figures as JSON (strict: no NaN/Infinity)."),
    force: bool = typer.Option(False, "--force", help="Allow overwriting --out and the PNG files."),
) -> None:
    """One self-contained HTML decision report: build or buy, what the engine saves, the KV bottleneck, latency and goodput against load.

    Runs the SLO-capacity search of `cost --simulate` (--num-requests per probe), a latency sweep at
    0.25–1.5 × the capacity, and static-batching and contiguous-KV runs at the capacity rate. Every
    figure has its numbers in a table beside it and its sources; the commands whose --json each
    section equals are listed at the end.
    """
    from kvledger.analyses.serving.decision_data import ReportRequest
    from kvledger.report.figure import png_of
    from kvledger.report.html_report import SECTIONS, render_html, report_figures
    from kvledger.report.jsonout import strict_json

    keys = [k for _, _, ks in SECTIONS for k in ks]
    _check_outputs(out, png, force, keys)
    settings = {k: v for k, v in dataclasses.asdict(engine).items() if v is not None}
    w, p = workload, pricing
    req = ReportRequest(model=model, gpu=gpu, slo=slo, api=api, trace=w.trace, num_requests=w.num_requests, seed=w.seed,
                        target=target, engine=settings, utilization=p.utilization, max_utilization=p.max_utilization,
                        gpu_provider=p.gpu_provider, gpu_usd_per_hour=p.gpu_usd_per_hour, batch_share=p.batch_share,
                        cache_hit_rate=p.cache_hit_rate, cache_write_rate=p.cache_write_rate,
                        data_sovereignty=data_sovereignty, model_control=model_control, team_capability=team_capability,
                        engineer_months_per_month=p.engineer_months, engineer_usd_per_month=p.engineer_usd,
                        bench_files=tuple(str(b) for b in bench or ()))
    data = _build(req, quiet=as_json)
    figures = report_figures(data)
    out.write_text(render_html(data, figures), encoding="utf-8")
    if png is not None:
        png.mkdir(parents=True, exist_ok=True)
        for f in figures:
            (png / f"{f.key}.png").write_bytes(png_of(f.fig))
    if as_json:
        typer.echo(strict_json(data))
    else:
        typer.echo(f"wrote {out} ({len(figures)} figures)" + (f" and {len(figures)} PNG files in {png}" if png else ""))


def _build(req: Any, quiet: bool) -> dict[str, Any]:
    from kvledger.analyses.serving.decision_data import build_report_data

    if quiet:
        return build_report_data(req)
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True,
                  console=Console(stderr=True)) as bar:
        task = bar.add_task("report")
        return build_report_data(req, progress=lambda stage: bar.update(task, description=f"report: {stage}"))


def register(app: typer.Typer) -> None:
    """Add ``report`` to the app."""
    app.command("report")(report)
