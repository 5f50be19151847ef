"""``kvledger goodput FILE... --slo ttft=200ms,tpot=50ms``: goodput of benchmark or simulation runs under latency SLOs.

Reads any supported benchmark output (format auto-detected) or a kvledger records file,
prints one row per run (a file may hold several) with where each number came from, and
optionally the SLO boundary across the runs (``--target 0.9``). ``--json`` prints one JSON
object per run, one per line (a single run is a single JSON object), plus a final
``{"boundary": ...}`` line with ``--target``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]


def _fmt(x: Any, spec: str = ",.3f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


_LEGEND = ("#: run (details below); req: all requests; fail: failed; good: completed and every SLO met; attain: good ÷ req; "
           "good/s: goodput, req/s; done/s: completed req/s; good tok/s: output tokens of good requests per s; "
           "mult: done/s ÷ good/s, the effective-cost multiplier (what you pay for ÷ what is usable). ≥/≤: bounds of an estimate")


def _rows(results: list[Any]) -> Any:
    from rich.table import Table

    t = Table(title="Goodput under the SLO", title_justify="left")
    for col in ("#", "req", "fail", "good", "attain", "good/s", "done/s", "good tok/s", "mult"):
        t.add_column(col, justify="right", no_wrap=True)
    for k, r in enumerate(results, start=1):
        good = f"≥{r.num_good} ≤{r.num_good_upper}" if r.estimate and r.num_good_upper is not None else str(r.num_good)
        att = f"≥{r.attainment:.1%}" if r.estimate else f"{r.attainment:.1%}"
        if r.effective_cost_multiplier is None:
            mult = "∞" if r.num_completed else "n/a"
        else:
            mult = ("≤" if r.estimate else "") + f"{r.effective_cost_multiplier:.2f}×"
        t.add_row(str(k), str(r.num_requests), str(r.num_failed), good, att, _fmt(r.goodput_req_per_s), _fmt(r.throughput_req_per_s),
                  _fmt(r.goodput_output_tok_per_s, ",.1f"), mult)
    return t


def _print_human(results: list[Any], boundary: Any, slo_text: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False)
    con.print(f"SLO: {escape(slo_text)}")
    con.print(_rows(results))
    con.print(escape(_LEGEND))
    for k, r in enumerate(results, start=1):
        con.print(f"\n[bold]#{k} {escape(Path(r.file).name)}{escape(' [' + r.run_label + ']') if r.run_label else ''}[/] ({r.source_format}): "
                  f"duration {_fmt(r.duration_s, ',.3f')} s, {escape(r.duration_source)}"
                  + ("; SLO misses among completed: " + ", ".join(f"{k} {v}" for k, v in r.num_missed.items()) if r.num_missed else ""))
        if r.tool_goodput:
            con.print(f"  tool-reported goodput (its SLO is not in the file): {escape(json.dumps(r.tool_goodput))}")
        for note in r.notes:
            con.print(f"  - {escape(note)}")
    if boundary is not None:
        b = boundary
        con.print(f"\n[bold]SLO boundary[/] on {b.axis} for attainment ≥ {b.target:.0%}: "
                  + (f"{b.boundary_value:g}" if b.boundary_value is not None else "none (the lowest value already misses)")
                  + (f" ({b.boundary_per_gpu:g} per GPU)" if b.boundary_per_gpu is not None else ""))
        for p in b.points:
            con.print(f"  {b.axis} {p.value:g}: attainment {'≥' if p.estimate else ''}{p.attainment:.1%} {'meets' if p.meets_target else 'misses'} ({escape(p.label)})")
        for note in b.notes:
            con.print(f"  - {escape(note)}")


def _write(out: Path, text: str, force: bool) -> None:
    from kvledger.errors import InputError

    if out.exists() and not force:
        raise InputError(f"{out} already exists; refusing to overwrite it (pass --force)")
    out.write_text(text, encoding="utf-8")


def register(app: typer.Typer) -> None:
    """Add the ``goodput`` command to ``app``."""

    @app.command("goodput")
    def goodput_command(
        files: list[Path] = typer.Argument(..., help="benchmark output files or kvledger records files", show_default=False),
        slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'; keys ttft, tpot, e2e, itl (max gap), itl_mean, itl_p99"),
        json_out: bool = typer.Option(False, "--json", help="JSON for scripts: one object per run, one per line"),
        format: str | None = typer.Option(None, "--format", help="force a reader (one of the format names listed above) instead of auto-detection"),
        target: float | None = typer.Option(None, "--target", help="attainment target in (0, 1] for the SLO-boundary search across the runs, e.g. 0.9"),
        axis: str = typer.Option("request_rate", "--axis", help="load axis for --target: request_rate, concurrency or max_num_seqs"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON to this file (refuses to overwrite without --force)"),
        force: bool = typer.Option(False, "--force", help="allow --out to overwrite an existing file"),
    ) -> None:
        """Goodput under latency SLOs: req/s and tok/s that met every SLO, attainment, effective-cost multiplier.

        Formats read: vllm-bench-serve, sglang-bench-serving, aiperf-jsonl, aiperf-json, aiperf-csv,
        genai-perf-raw, genai-perf-json, guidellm, llmperf-individual, llmperf-summary,
        inference-perf-lifecycle, inference-perf-per-request, kvledger-records. Files with only
        percentiles give a bounded estimate, marked as such: in JSON, "estimate" is true, num_good,
        attainment and goodput_req_per_s are lower bounds and num_good_upper/attainment_upper the upper ones.
        """
        from kvledger.evidence import read_runs
        from kvledger.ledgers.boundary import boundary_from_sweep
        from kvledger.ledgers.goodput import goodput
        from kvledger.ledgers.slo import parse_slo

        the_slo = parse_slo(slo)
        runs = [run for f in files for run in read_runs(f, format=format)]
        results = [goodput(run, the_slo) for run in runs]
        boundary = boundary_from_sweep(runs, the_slo, target, axis) if target is not None else None
        lines = [json.dumps(r.to_dict()) for r in results]
        if boundary is not None:
            lines.append(json.dumps({"boundary": boundary.to_dict()}))
        text = "\n".join(lines) + "\n"
        if out is not None:
            _write(out, text, force)
        if json_out:
            typer.echo(text, nl=False)
        else:
            _print_human(results, boundary, the_slo.describe())
