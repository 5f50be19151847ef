"""``kvledger goodput FILE...|--simulate MODEL --slo ttft=200ms,tpot=50ms``: goodput of benchmark or simulation runs under latency SLOs.

Reads any supported benchmark output (format auto-detected) or a kvledger records file,
prints one row per run (a file may hold several) with where each number came from, and
optionally the SLO boundary across the runs (``--target 0.9``). With ``--simulate MODEL
--gpu GPU`` it simulates the run instead (``kvledger simulate``'s flags), and ``--target``
then searches the boundary by driving the simulator (``kvledger.analyses.sim_boundary``).
``--json`` prints one JSON object per run (or probe), one per line (a single run is a single
JSON object), plus a final ``{"boundary": ...}`` line with ``--target``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from kvledger.report.progress import working
from kvledger import strict_json

from kvledger.cli import sim_opts as so

__all__ = ["register"]


def _fmt(x: Any, spec: str = ",.3f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


_LEGEND = ("#: run (details below); req: all requests; fail: failed; good: completed and every SLO met; attain: good ÷ req; "
           "good/s: goodput, req/s; done/s: completed req/s; good tok/s: output tokens of good requests per s; "
           "mult: done/s ÷ good/s, the effective-cost multiplier (what you pay for ÷ what is usable). ≥/≤: bounds of an estimate")


def _rows(results: list[Any]) -> Any:
    from kvledger.report.tables import LedgerTable as Table

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
            con.print(f"  tool-reported goodput (its SLO is not in the file): {escape(strict_json.dumps(r.tool_goodput))}")
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


def _write(out: Path, text: str) -> None:
    from kvledger.strict_json import write_text_atomic

    write_text_atomic(out, text)  # the location was checked before the work (prepare_output_file)


def _print_search(sb: Any, slo_text: str) -> None:
    """The probes of a simulator-driven boundary search, the boundary, and the simulation's sources."""
    from rich.console import Console

    from kvledger.analyses.sim_boundary import SEARCH_AXES
    from rich.markup import escape
    from kvledger.report.tables import LedgerTable as Table

    con = Console(highlight=False)
    first, _, rest = slo_text.partition("\n")
    con.print(f"SLO: {escape(first)}; target attainment ≥ {sb.target:.0%}; search on {sb.axis}, "
              f"{sb.num_requests_per_probe:,} requests per probe" + (f"\n{escape(rest)}" if rest else ""))
    short = {"request_rate": "rate/s", "concurrency": "users", "max_num_seqs": "seqs"}[sb.axis]
    t = Table(title=f"probes ({sb.num_gpus} GPU(s) = {sb.replicas} replica(s) × TP {sb.num_gpus // sb.replicas})", title_justify="left")
    for col in ("#", short, "offered/s", "attain", "good/s", "done/s", "good/s/GPU", "target"):
        t.add_column(col, justify="right", no_wrap=True)
    for pr in sb.probes:
        t.add_row(f"{pr.order}{ {'bracket': 'b', 'bisection': 's'}.get(pr.phase, 'c') }", f"{pr.value:g}", _fmt(pr.offered_rate_req_per_s, ",.2f"), f"{pr.attainment:.1%}",
                  _fmt(pr.goodput_req_per_s), _fmt(pr.throughput_req_per_s), _fmt(pr.goodput_req_per_s_per_gpu),
                  "meets" if pr.meets_target else "misses")
    con.print(t)
    con.print(f"#: probe order, b = bracketing (doubling/halving), s = bisection, c = check of the top; {short}: {escape(SEARCH_AXES[sb.axis])}; "
              "offered/s: requests ÷ their arrival span (open loop); attain: good ÷ all requests; good/s, done/s: goodput and completed req/s "
              "of the whole deployment; good tok/s per probe in --json")
    b = sb.boundary
    if b.boundary_value is None:
        con.print(f"[bold]SLO boundary[/] on {sb.axis}: none — the lowest value probed already misses {sb.target:.0%}")
    else:
        per = (f" ({sb.boundary_per_replica:g} per replica, {sb.boundary_per_gpu:g} per GPU)" if sb.boundary_per_gpu is not None else "")
        at = (f"; goodput there {sb.goodput_at_boundary_req_per_s:.3f} good req/s ({sb.goodput_at_boundary_req_per_s_per_gpu:.3f} per GPU)"
              if sb.goodput_at_boundary_req_per_s is not None else "")
        con.print(f"[bold]SLO boundary[/] on {sb.axis} for attainment ≥ {sb.target:.0%}: {b.boundary_value:g}{per}{at}")
    for note in b.notes + sb.notes:
        con.print(f"  - {escape(note)}")
    _print_sources(sb.first_run, "sources (first probe; the searched value varies)")


def _print_sources(sim: Any, title: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False)
    con.print(f"[bold]{escape(title)}[/]")
    for k, line in enumerate(sim.source_lines(), start=1):
        con.print(f"  [{k}] {escape(line)}")


def _simulated(model: str, gpu: str | None, params: dict[str, Any], the_slo: Any, target: float | None, axis: str,
               bounds: tuple[float | None, float | None, float | None]) -> tuple[list[str], Any]:
    """(JSON lines, what to print) for --simulate: one run, or the boundary search with --target."""
    from kvledger.analyses.sim_boundary import PROBE_NUM_REQUESTS, search_sim_boundary
    from kvledger.analyses.sim_ledgers import simulate_run
    from kvledger.cli.sim_opts import sim_request
    from kvledger.ledgers.goodput import goodput

    if target is None:
        args, synthetic = sim_request(model, gpu, params)
        with working("simulating"):
            sim = simulate_run(args, synthetic)
        res = goodput(sim.run, the_slo)
        return [strict_json.dumps({**res.to_dict(), "simulation": sim.provenance()})], (res, sim)
    args, synthetic = sim_request(model, gpu, params, num_requests_default=PROBE_NUM_REQUESTS)
    lo, hi, tol = bounds
    with working(f"searching the SLO boundary on {axis} (one simulation per probe)"):
        sb = search_sim_boundary(args, the_slo, target, axis, lo=lo, hi=hi, tol=tol, synthetic=synthetic)
    lines = [strict_json.dumps({**g.to_dict(), "probe": {"axis": sb.axis, "value": pr.value, "order": pr.order, "phase": pr.phase}})
             for g, pr in zip(sb.goodputs, sb.probes)]
    d = sb.to_dict()
    boundary = {**d.pop("boundary"), **{k: d.pop(k) for k in ("boundary_per_replica", "boundary_per_gpu", "goodput_at_boundary_req_per_s",
                                                              "goodput_at_boundary_req_per_s_per_gpu", "num_requests_per_probe")}}
    lines.append(strict_json.dumps({"boundary": boundary, "probes": d.pop("probes"), "simulation": d.pop("provenance"), "notes": d["notes"]}))
    return lines, sb


def _from_files(files: list[Path], fmt: str | None, params: dict[str, Any], the_slo: Any, target: float | None,
                axis: str) -> tuple[list[str], Any]:
    """(JSON lines, (results, boundary)) for benchmark or records FILEs; the boundary across them with --target."""
    from kvledger.cli.sim_opts import reject_sim_flags
    from kvledger.evidence import read_runs
    from kvledger.ledgers.boundary import boundary_from_sweep
    from kvledger.ledgers.goodput import goodput

    reject_sim_flags(params)
    runs = [run for f in files for run in read_runs(f, format=fmt)]
    results = [goodput(run, the_slo) for run in runs]
    boundary = boundary_from_sweep(runs, the_slo, target, {"rate": "request_rate"}.get(axis, axis)) if target is not None else None
    lines = [strict_json.dumps(r.to_dict()) for r in results]
    if boundary is not None:
        lines.append(strict_json.dumps({"boundary": boundary.to_dict()}))
    return lines, (results, boundary)


def register(app: typer.Typer) -> None:
    """Add the ``goodput`` command to ``app``."""

    @app.command("goodput")
    def goodput_command(
        ctx: typer.Context,
        files: Optional[list[Path]] = typer.Argument(None, help="benchmark output files or kvledger records files; or use --simulate", show_default=False),
        slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'; keys ttft, tpot, e2e, itl (max gap), itl_mean, itl_p99"),
        json_out: bool = typer.Option(False, "--json", help="JSON for scripts: one object per run, one per line"),
        format: str | None = typer.Option(None, "--format", help="force a reader (one of the format names listed above) instead of auto-detection"),
        target: float | None = typer.Option(None, "--target", help="attainment target in (0, 1], e.g. 0.9: the SLO boundary across the FILEs, or searched by simulation with --simulate"),
        axis: str = typer.Option("request_rate", "--axis", help="load axis for --target: request_rate (or rate), concurrency or max_num_seqs"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON to this file (refuses to overwrite without --force)"),
        force: bool = typer.Option(False, "--force", help="allow --out to overwrite an existing file"),
        gpu: str | None = typer.Option(None, "--gpu", help="[--simulate] the GPU to simulate: a catalog name (H100, H200, ...) or a GPU file", show_default=False),
        lo: float | None = typer.Option(None, "--lo", help="[--simulate --target] lowest value to search (default: found by halving from 1 req/s or 1 user; 1 for max_num_seqs)", show_default=False),
        hi: float | None = typer.Option(None, "--hi", help="[--simulate --target] highest value to search (default: found by doubling; the engine default for max_num_seqs)", show_default=False),
        tol: float | None = typer.Option(None, "--tol", help="[--simulate --target] bisection resolution (default: 1 % of the bracket's top for the rate; 1 for concurrency and max_num_seqs)", show_default=False),
        simulate: so.Simulate = None, trace: so.Trace = None, rate: so.Rate = None, rate_scale: so.RateScale = None,
        num_requests: so.NumRequests = None, seed: so.Seed = None, concurrency: so.Concurrency = None,
        think_time: so.ThinkTime = None, prompt_lengths: so.PromptLengths = None, output_lengths: so.OutputLengths = None,
        arrival_cv: so.ArrivalCv = None, tp: so.Tp = None, replicas: so.Replicas = None, router: so.Router = None,
        engine_version: so.EngineVersion = None, max_model_len: so.MaxModelLen = None,
        gpu_memory_utilization: so.GpuMemUtil = None, kv_cache_dtype: so.KvCacheDtype = None, block_size: so.BlockSize = None,
        max_num_batched_tokens: so.MaxNumBatchedTokens = None, max_num_seqs: so.MaxNumSeqs = None,
        num_gpu_blocks_override: so.NumGpuBlocksOverride = None, prefix_caching: so.PrefixCaching = None,
        chunked_prefill: so.ChunkedPrefill = None, policy: so.Policy = None,
        prefix_caching_policy: so.PrefixCachingPolicy = None, scheduling_policy: so.SchedulingPolicy = None,
        batching: so.Batching = None, kv_allocation: so.KvAllocation = None, async_scheduling: so.AsyncScheduling = None, step_cost: so.StepCost = None,
        cpu_overhead: so.CpuOverhead = None,
    ) -> None:
        """Goodput under latency SLOs: req/s and tok/s that met every SLO, attainment, effective-cost multiplier.

        Formats read: vllm-bench-serve, sglang-bench-serving, aiperf-jsonl, aiperf-json, aiperf-csv,
        genai-perf-raw, genai-perf-json, guidellm, llmperf-individual, llmperf-summary,
        inference-perf-lifecycle, inference-perf-per-request, kvledger-records. Files with only
        percentiles give a bounded estimate, marked as such: in JSON, "estimate" is true, num_good,
        attainment and goodput_req_per_s are lower bounds and num_good_upper/attainment_upper the upper ones.

        Instead of FILEs, `--simulate MODEL --gpu GPU` simulates the run with `kvledger simulate`'s
        workload and engine flags (marked [--simulate]; the whole trace unless --num-requests). With
        --target it searches the SLO boundary by driving the simulator: the largest --axis value
        (request_rate, concurrency or max_num_seqs) whose attainment meets the target, by doubling or
        halving to a bracket then bisection (--lo/--hi/--tol), every probe the same seeded workload of
        2,000 requests unless --num-requests; each probe is listed with attainment, goodput and throughput,
        and the boundary per replica and per GPU.
        """
        from kvledger.errors import InputError
        from kvledger.ledgers.slo import parse_slo
        from kvledger.report.slo_text import slo_block

        if bool(files) == (simulate is not None):
            raise InputError("give either benchmark FILEs or --simulate MODEL (with --gpu), not " + ("both" if files else "neither"))
        the_slo = parse_slo(slo)
        if out is not None:
            from kvledger.cli.outputs import prepare_output_file

            prepare_output_file(out, force=force, inputs=[Path(f) for f in files or []])
        if simulate is not None:
            if format is not None:
                raise InputError("--format applies to FILEs, not to --simulate")
            lines, shown = _simulated(simulate, gpu, ctx.params, the_slo, target, axis, (lo, hi, tol))
        else:
            given = [f for f, v in (("--gpu", gpu), ("--lo", lo), ("--hi", hi), ("--tol", tol)) if v is not None]
            if given:
                raise InputError(f"{', '.join(given)} apply to a --simulate run or search, not to FILEs")
            lines, shown = _from_files(files, format, ctx.params, the_slo, target, axis)
        text = "\n".join(lines) + "\n"
        if out is not None:
            _write(out, text)
        if json_out:
            typer.echo(text, nl=False)
        elif simulate is None:
            _print_human(*shown, slo_block(the_slo))
        elif target is None:
            res, sim = shown
            _print_human([res], None, slo_block(the_slo))
            _print_sources(sim, "sources of the simulated run")
        else:
            _print_search(shown, slo_block(the_slo))
