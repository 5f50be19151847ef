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

from kvledger.cli.dp_flags import SimDataParallelFlags
from kvledger.cli.flag_groups import GroupUse, TierFlags, with_groups
from kvledger.cli.report_flags import (
    ReportBillFlags,
    ReportEngineFlags,
    ReportOutFlags,
    ReportRunFlags,
    html_out,
    report_request,
)

if TYPE_CHECKING:
    from kvledger.analyses.serving.report_data import ReportData

__all__ = ["register"]


def _check_outputs(out: Path | None, o: ReportOutFlags, keys: list[str], inputs: list[Any]) -> None:
    """Every file the report writes, checked before the work (kvledger.outputs): nothing is lost to a bad path; an
    ``out`` the user did not give (``o.out`` None) is named as the default --out."""
    from kvledger.cli.outputs import prepare_output_dir, prepare_output_file
    from kvledger.cli.report_flags import refuse_out_suffix

    if out is not None:  # an input named as the output is refused first (kvledger.outputs), then a suffix not HTML's
        prepare_output_file(out, force=o.force, inputs=inputs, default=o.out is None)
        refuse_out_suffix(out)
    if o.png is not None:
        prepare_output_dir(o.png, [f"{k}.png" for k in keys], force=o.force, inputs=inputs, flag="--png")


_GROUPS = {"run": ReportRunFlags, "engine": ReportEngineFlags, "bill": ReportBillFlags, "outs": ReportOutFlags,
           "dp": SimDataParallelFlags}  # vLLM's DP ranks of a MoE model in lock-step, as cost --simulate (dp_flags.py)


def _tier_use() -> GroupUse:
    """simulate's tier flags, SGLang's named with the report's --engine (its --policy there)."""
    from kvledger.cli.sim_opts import TIER_HELP

    return GroupUse(TierFlags, help={k: v.replace("--policy", "--engine") for k, v in TIER_HELP.items()})


@with_groups(**{name: GroupUse(cls, first_spelling=True) for name, cls in _GROUPS.items()}, tiers=_tier_use())
def report(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`)."),
    slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'."),
    run: ReportRunFlags = ReportRunFlags(),
    engine: ReportEngineFlags = ReportEngineFlags(),
    bill: ReportBillFlags = ReportBillFlags(),
    outs: ReportOutFlags = ReportOutFlags(),
    dp: SimDataParallelFlags = SimDataParallelFlags(),
    tiers: TierFlags = TierFlags(),
) -> None:
    """One self-contained HTML decision report: build or buy, what the engine saves, the KV bottleneck, latency and
    goodput against load.

    Runs the SLO-capacity search of `cost --simulate` (--num-requests per probe), a latency sweep at
    0.25–1.5 × the capacity, and static-batching and contiguous-KV runs at the capacity rate, all with
    vLLM's memory plan and scheduler, or with --engine sglang SGLang's (its plan, pool and scheduler in every
    section; the static and contiguous runs, vLLM's presets, are then left out). KV tier flags (as simulate takes
    them) add the tiers to the plan, run the capacity's requests again with them and search the SLO capacity with
    them too, beside the one without (the cost stays on the capacity without them). Every
    figure has its numbers in a table beside it and its sources; the commands whose --json each
    section equals are listed at the end.
    """
    from kvledger.cli.outputs import paths_in
    from kvledger.cli.tier_opts import tiers_given
    from kvledger.outputs import write_bytes_atomic, write_text_atomic
    from kvledger.report.figure import png_of
    from kvledger.report.html_report import SECTIONS, TIER_SECTION, render_html, report_figures
    from kvledger.report.html_store import report_html
    from kvledger.report.report_pool import report_pool

    o = outs
    drawn = (*SECTIONS, TIER_SECTION) if tiers_given(tiers) or run.document_pool is not None else SECTIONS
    keys = [k for _, _, ks in drawn for k in ks]
    out = html_out(o)  # with --json, no HTML unless --out is given
    _check_outputs(out, o, keys, [model, gpu, *paths_in(run, engine, bill), *(o.bench or [])])
    req = report_request(model, gpu, slo, run, engine, bill, o.bench, dp, _tiers(tiers, gpu, engine.tp))
    if req.api is None:  # the report compares with an API: refuse before the simulations, as cost --simulate does
        from kvledger.catalog.api_match import require_api_row

        require_api_row(model)
    with report_pool() as pool:  # a second process where there are two CPUs (same bytes: report/report_pool.py)
        data = _as_printed(_build(req, quiet=o.as_json, pool=pool))
        if o.png is None:  # the HTML alone: from the store when this data was drawn before (report/html_store.py)
            figures, html = None, (report_html(data, pool) if out is not None else None)
        else:
            figures = report_figures(data)
            html = render_html(data, figures) if out is not None else None
    pngs = [(o.png / f"{f.key}.png", png_of(f.fig)) for f in figures] if o.png is not None else []
    count = html.count('<section class="fig"') if html is not None else len(pngs)
    if out is not None and html is not None:  # out is None only with --json
        write_text_atomic(out, html)  # each file whole or not at all: a full disk leaves the previous report intact
    for path, data_png in pngs:
        write_bytes_atomic(path, data_png)
    _print(data, o, engine.client_latency, count, out)


def _tiers(tiers: TierFlags, gpu: str, tp: int | None) -> Any:
    """The tier flags' ``TierSettings`` (None: none given), their sizes held to one node's before any work."""
    from kvledger.cli.tier_opts import check_tier_sizes, tier_settings, tiers_given

    tier = tier_settings(tiers) if tiers_given(tiers) else None
    check_tier_sizes(tier, gpu, tp or 1)
    return tier


def _print(data: ReportData, o: ReportOutFlags, client_latency: str | None, count: int, out: Path | None) -> None:
    """The data as JSON, or the answer lines, the client-latency note and what was written."""
    from kvledger.report.jsonout import strict_json

    if o.as_json:
        typer.echo(strict_json(data.to_dict()))
    else:
        from kvledger.report.decision_view import report_answer_lines

        for line in report_answer_lines(data.cost):
            typer.echo(line)
        pp = data.inputs["engine"].get("pp")
        if data.engine_savings is None and pp:  # static batching and contiguous KV are not simulated under PP
            typer.echo(f"note: --pp {pp}: vLLM's pipeline loop on {pp} stages throughout; the comparison with static "
                       "batching and contiguous KV (vLLM's presets, not simulated with pipeline stages) is left out")
        elif data.engine_savings is None:  # --engine sglang: the baselines are vLLM's presets (report_flags)
            typer.echo("note: engine sglang: SGLang's plan, pool and scheduler throughout; the comparison with static "
                       "batching and contiguous KV (vLLM's presets) is left out")
        from kvledger.analyses.serving.client_latency import client_latency_of

        got = client_latency_of(client_latency)  # simulate's note: what every TTFT and E2E gained, and from where
        if got is not None:
            typer.echo(f"note: {got.note()}")
        for m in data.measured:  # a --bench file's own TPOT set aside for the derived one (report_measured)
            for n in m.get("notes", ()):
                typer.echo(f"note: {m['file']}: {n}")
        typer.echo(f"wrote {out} ({count} figures)" + (f" and {count} PNG files in {o.png}" if o.png else ""))


def _as_printed(data: ReportData) -> ReportData:
    """``data`` as its ``--json`` prints it (dollar figures rounded, infinities written): the HTML and the figures are
    drawn from that, so they are a function of the JSON."""
    import json

    from kvledger.analyses.serving.report_data import ReportData
    from kvledger.report.jsonout import strict_json

    return ReportData.from_dict(json.loads(strict_json(data.to_dict())))


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
