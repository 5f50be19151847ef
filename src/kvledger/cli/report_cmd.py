"""``kvledger report MODEL --gpu GPU --slo ... --api ...``: one self-contained HTML decision report (and ``--png DIR``,
``--json``).

The CLI only parses flags: ``kvledger.analyses.serving.decision_data.build_report_data`` builds the data
(the same objects ``plan``, ``cost --simulate``, ``goodput --simulate --target`` and ``simulate``
print with ``--json``) and ``kvledger.report`` draws it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kvledger.cli import bill_opts as bo
from kvledger.cli.flag_groups import EngineFlags, option

if TYPE_CHECKING:
    from kvledger.analyses.serving.report_data import ReportData

__all__ = ["register"]


def _check_outputs(out: Path, png: Path | None, force: bool, keys: list[str], inputs: list[Any]) -> None:
    """Every file the report writes, checked before the work (kvledger.outputs): nothing is lost to a bad path."""
    from kvledger.outputs import prepare_output_dir, prepare_output_file

    prepare_output_file(out, force=force, inputs=inputs)
    if png is not None:
        prepare_output_dir(png, [f"{k}.png" for k in keys], force=force, inputs=inputs, flag="--png")


def report(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`)."),
    slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'."),
    api: str | None = typer.Option(None, "--api", help="API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1' "
                                                       "(default: the catalog rows serving the same model).",
                                                           show_default=False),
    trace: str = typer.Option("azure-conv", "--trace", help="azure-conv, azure-code, mooncake, mooncake-synthetic, "
                                                            "arxiv, or a CSV/JSONL path."),
    num_requests: int = typer.Option(2000, "--num-requests", help="Requests per simulation (each probe of the capacity "
                                                                  "search, each sweep point)."),
    seed: int = typer.Option(0, "--seed", help="RNG seed of the workload."),
    target: float = typer.Option(0.9, "--target", help="Share of requests within the SLO at the capacity, (0, 1]."),
    tp: int | None = typer.Option(None, "--tp", "--tensor-parallel-size", help="Tensor-parallel degree (default 1)."),
    engine_version: str | None = typer.Option(None, "--engine-version", help="vLLM version whose rules and defaults to "
                                                                             "apply."),
    max_model_len: str | None = typer.Option(None, "--max-model-len", help="Tokens (8192, 8K); default: from the "
                                                                           "config."),
    gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="vLLM fraction of "
        "device memory."),
    kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="auto, bf16, fp16, fp8, fp8_e4m3, "
                                                                             "fp8_e5m2."),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="Most running requests per replica."),
    step_cost: str | None = typer.Option(None, "--step-cost", help="roofline (default) or calibrated (see kvledger "
                                                                   "simulate --help)."),
    gpu_profile: str | None = option(EngineFlags, "gpu_profile"),
    wddm: bool = option(EngineFlags, "wddm", False),
    client_latency: str | None = option(EngineFlags, "client_latency"),
    utilization: float | None = typer.Option(None, "--utilization", help="Override: average load ÷ capacity over the "
                                                                         "billed hours, (0, 1] (default: the volume's "
                                                                         "realized utilization).", show_default=False),
    monthly_tokens: bo.MonthlyTokens = None, monthly_requests: bo.MonthlyRequests = None,
    monthly_input_tokens: bo.MonthlyIn = None, monthly_output_tokens: bo.MonthlyOut = None,
    peak_to_mean: bo.PeakToMean = 1.0,
    max_utilization: float = typer.Option(0.8, "--max-utilization", help="Highest utilization per replica when sizing "
                                                                         "for a monthly volume."),
    gpu_provider: str | None = typer.Option(None, "--gpu-provider", help="Rental provider (default: the cheapest row "
                                                                         "listed for the GPU, stated in the report)."),
    gpu_usd_per_hour: float | None = typer.Option(None, "--gpu-usd-per-hour", help="Your own price, USD per GPU-hour."),
    batch_share: float = typer.Option(0.0, "--batch-share", help="Share of requests sent through the API's batch "
                                                                 "endpoint."),
    cache_hit_rate: float = typer.Option(0.0, "--cache-hit-rate", help="Share of API input tokens that are "
                                                                       "prompt-cache reads."),
    cache_write_rate: float = typer.Option(0.0, "--cache-write-rate", help="Share of API input tokens written to the "
                                                                           "prompt cache."),
    engineer_months: bo.EngMonths = None, engineer_usd: bo.EngUsd = None,
    data_sovereignty: str = typer.Option("not_required", "--data-sovereignty", help="required, preferred or "
        "not_required."),
    model_control: str = typer.Option("any", "--model-control", help="custom_weights, open_weights or any."),
    team_capability: str = typer.Option("some", "--team-capability", help="experienced, some or none."),
    bench: list[Path] | None = typer.Option(None, "--bench", help="Benchmark output(s) to draw as measured points on "
                                                                  "the simulation's axes (repeat)."),
    out: Path = typer.Option(Path("kvledger-report.html"), "--out", "-o", help="The HTML file to write."),
    png: Path | None = typer.Option(None, "--png", help="Also write each figure as DIR/<figure>.png."),
    as_json: bool = typer.Option(False, "--json", help="Print the data behind the figures as JSON (strict: no "
                                                       "NaN/Infinity)."),
    force: bool = typer.Option(False, "--force", help="Allow overwriting --out and the PNG files."),
) -> None:
    """One self-contained HTML decision report: build or buy, what the engine saves, the KV bottleneck, latency and
    goodput against load.

    Runs the SLO-capacity search of `cost --simulate` (--num-requests per probe), a latency sweep at
    0.25–1.5 × the capacity, and static-batching and contiguous-KV runs at the capacity rate. Every
    figure has its numbers in a table beside it and its sources; the commands whose --json each
    section equals are listed at the end.
    """
    from kvledger.analyses.serving.decision_data import ReportRequest
    from kvledger.outputs import write_bytes_atomic, write_text_atomic
    from kvledger.report.figure import png_of
    from kvledger.report.html_report import SECTIONS, render_html, report_figures
    from kvledger.report.html_store import report_html
    from kvledger.report.jsonout import strict_json
    from kvledger.report.report_pool import report_pool

    keys = [k for _, _, ks in SECTIONS for k in ks]
    _check_outputs(out, png, force, keys, [trace, step_cost, gpu_profile, *(bench or [])])
    engine = {k: v for k, v in (("tp", tp), ("engine_version", engine_version), ("max_model_len", max_model_len),
                                ("gpu_memory_utilization", gpu_memory_utilization), ("kv_cache_dtype", kv_cache_dtype),
                                ("max_num_seqs", max_num_seqs), ("step_cost", step_cost),
                                ("gpu_profile", gpu_profile), ("wddm", wddm or None),
                                ("client_latency", client_latency)) if v is not None}
    req = ReportRequest(model=model, gpu=gpu, slo=slo, api=api, trace=trace, num_requests=num_requests, seed=seed,
                        target=target,
                        engine=engine, utilization=utilization, max_utilization=max_utilization,
                            gpu_provider=gpu_provider,
                        gpu_usd_per_hour=gpu_usd_per_hour, batch_share=batch_share, cache_hit_rate=cache_hit_rate,
                        cache_write_rate=cache_write_rate, data_sovereignty=data_sovereignty,
                            model_control=model_control,
                        team_capability=team_capability, engineer_months_per_month=engineer_months,
                        engineer_usd_per_month=engineer_usd, bench_files=tuple(str(b) for b in bench or ()),
                        monthly_tokens=monthly_tokens, monthly_requests=monthly_requests,
                        monthly_input_tokens=monthly_input_tokens, monthly_output_tokens=monthly_output_tokens,
                        peak_to_mean=peak_to_mean)
    with report_pool() as pool:  # a second process where there are two CPUs (same bytes: report/report_pool.py)
        data = _build(req, quiet=as_json, pool=pool)
        if png is None:  # the HTML alone: from the store when this data was drawn before (report/html_store.py)
            figures, html = None, report_html(data, pool)
        else:
            figures = report_figures(data)
            html = render_html(data, figures)
    pngs = [(png / f"{f.key}.png", png_of(f.fig)) for f in figures] if png is not None else []
    count = html.count('<section class="fig"')
    write_text_atomic(out, html)  # each file whole or not at all: a full disk leaves the previous report intact
    for path, data_png in pngs:
        write_bytes_atomic(path, data_png)
    if as_json:
        typer.echo(strict_json(data.to_dict()))
    else:
        from kvledger.report.decision_view import report_answer_lines

        for line in report_answer_lines(data.cost):
            typer.echo(line)
        from kvledger.analyses.serving.client_latency import client_latency_of

        got = client_latency_of(client_latency)  # simulate's note: what every TTFT and E2E gained, and from where
        if got is not None:
            typer.echo(f"note: {got.note()}")
        for m in data.measured:  # a --bench file's own TPOT set aside for the derived one (report_measured)
            for n in m.get("notes", ()):
                typer.echo(f"note: {m['file']}: {n}")
        typer.echo(f"wrote {out} ({count} figures)" + (f" and {count} PNG files in {png}" if png else ""))


def _build(req: Any, quiet: bool, pool: Any) -> ReportData:
    from rich.console import Console

    from kvledger.analyses.serving.decision_data import build_report_data

    if quiet or not Console(stderr=True).is_terminal:  # a live line on a terminal only (rich leaves a blank line)
        return build_report_data(req, pool=pool)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), transient=True,
                  console=Console(stderr=True)) as bar:
        task = bar.add_task("report")
        return build_report_data(req, progress=lambda stage: bar.update(task, description=f"report: {stage}"),
                                 pool=pool)


def register(app: typer.Typer) -> None:
    """Add ``report`` to the app."""
    app.command("report")(report)
