"""``kvledger goodput FILE...|--simulate MODEL --slo ttft=200ms,tpot=50ms``: goodput of benchmark or simulation runs
under latency SLOs.

Reads any supported benchmark output (format auto-detected) or a kvledger records file, prints one row per run (a file
may hold several) with where each number came from, and optionally the SLO boundary across the runs (``--target 0.9``,
the simulated search's keys, null where they do not apply: ``BoundaryFigures.of_sweep``). With ``--simulate MODEL
--gpu GPU`` it simulates the run instead (``kvledger simulate``'s flags), and ``--target`` then searches the boundary
by driving the simulator (``kvledger.analyses.serving.sim_boundary``). ``--json`` prints one JSON object per run (or
probe), one per line (a single run is a single JSON object), plus a final ``{"boundary": ...}`` line with ``--target``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli import sim_opts as so
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.dp_flags import SIM_DP, SimDataParallelFlags, refuse_dp_on_files, with_dp
from kvledger.cli.flag_groups import EngineFlags, GroupUse, TierFlags, WorkloadFlags, flag, with_groups
from kvledger.cli.goodput_sessions import GOODPUT_SESSIONS, goodput_request
from kvledger.cli.session_flags import SessionFlags
from kvledger.report.goodput_view import print_goodput as _print_human
from kvledger.report.goodput_view import print_search as _print_search
from kvledger.report.goodput_view import print_sources as _print_sources
from kvledger.report.plotfile import check_plot_path, save_plot
from kvledger.report.progress import working
from kvledger.report.step_cost_view import print_step_cost_warnings
from kvledger.report.tier_capacity_text import print_tier_capacity

__all__ = ["register"]


def _document(lines: list[str]) -> str:
    """The JSON lines as one strict JSON document: a lone run's object, else ``{"runs": [...]}`` with the boundary
    line's keys (``boundary``, ``probes``, ``simulation``, ``notes``) merged in."""
    import json

    from kvledger.api.results import goodput_document  # the Python API's kvledger.goodput builds the same

    return strict_json.dumps(goodput_document([json.loads(x) for x in lines])) + "\n"


def _simulated(model: str, gpu: str | None, groups: tuple[WorkloadFlags, EngineFlags, SessionFlags], the_slo: Any,
               target: float | None, axis: str, bounds: tuple[float | None, float | None, float | None],
               tiers: TierFlags, seeds: int = 1, dp: Any = None) -> tuple[list[str], Any]:
    """(JSON lines, what to print) for --simulate: one run (with a host tier when tier flags are given), or the boundary
    search with --target (``seeds`` > 1: per seed, the range over them); ``dp``: DP ranks (``dp_flags.with_dp``)."""
    from functools import partial

    from kvledger.analyses.serving.report_tier_capacity import search_with_tier
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS
    from kvledger.analyses.serving.sim_goodput import (
        simulated_goodput,
        simulated_goodput_search,
        simulated_goodput_with_tier,
    )
    from kvledger.cli.tier_opts import check_tier_sizes, tier_settings, tiers_given, with_hicache
    from kvledger.errors import InputError
    from kvledger.jsonable import to_jsonable

    tier = tier_settings(tiers, engine_flag="--policy") if tiers_given(tiers) else None
    if seeds != 1 and target is None:
        raise InputError("--seeds repeats the SLO-capacity search per seed: add --target (e.g. 0.9), or see one run's "
                         "figures over seeds with kvledger simulate --seeds N")
    if target is None:
        args, synthetic = goodput_request(model, gpu, groups, None, axis)  # a trace, synthetic, or sessions
        args = with_hicache(with_dp(args, dp, "the host KV tier flags" if tier is not None else None), tier)
        check_tier_sizes(tier, args.gpu, args.tp)
        with working("simulating"):
            run = (simulated_goodput(args, the_slo, synthetic) if tier is None else
                   simulated_goodput_with_tier(args, the_slo, tier, synthetic))
        return [strict_json.dumps(to_jsonable(x)) for x in run.lines()], (run.result, run.sim, run.tiers)
    args, synthetic = goodput_request(model, gpu, groups, target, axis, num_requests_default=PROBE_NUM_REQUESTS)
    args, (lo, hi, tol) = with_hicache(with_dp(args, dp, "the host KV tier flags" if tier else None), tier), bounds
    check_tier_sizes(tier, args.gpu, args.tp)
    each = f", the search once per seed ({seeds} seeds)" if seeds > 1 else ""
    with working(f"searching the SLO boundary on {axis} (one simulation per probe{each}" +
                 ("; without the KV tiers, then with them)" if tier else ")")):
        search = simulated_goodput_search if tier is None else partial(search_with_tier, tier=tier)
        found = search(args, the_slo, target, axis, lo=lo, hi=hi, tol=tol, synthetic=synthetic, seeds=seeds)
    return [strict_json.dumps(to_jsonable(x)) for x in found.lines()], found


def _from_files(files: list[Path], fmt: str | None, groups: tuple, the_slo: Any, target: float | None, axis: str,
                tiers: TierFlags) -> tuple[list[str], Any]:
    """(JSON lines, (results, boundary)) for benchmark or records FILEs; the boundary across them with --target."""
    from kvledger.analyses.serving.sim_goodput import BoundaryFigures
    from kvledger.calibration.targets import refuse_repeated
    from kvledger.cli.sim_opts import reject_sim_flags
    from kvledger.evidence import read_runs
    from kvledger.ledgers.boundary import boundary_from_sweep
    from kvledger.ledgers.goodput import goodput
    from kvledger.ledgers.load_warning import with_overload_warnings

    reject_sim_flags(*groups, tiers)
    refuse_repeated([str(f) for f in files])  # one run counted twice: a "best of 2 runs", a sweep's stage twice
    runs, key = [run for f in files for run in read_runs(f, format=fmt)], {"rate": "request_rate"}.get(axis, axis)
    if target is not None:
        from kvledger.evidence.deployment import refuse_mixed_sweep

        refuse_mixed_sweep(runs, "--target finds the SLO boundary", key)
    results = with_overload_warnings(runs, [goodput(run, the_slo) for run in runs], the_slo, target)
    boundary = None if target is None else boundary_from_sweep(runs, the_slo, target, key)
    lines = [strict_json.dumps(r.to_dict()) for r in results]
    if boundary is not None:
        lines.append(strict_json.dumps({"boundary": BoundaryFigures.of_sweep(boundary).to_dict()}))
    return lines, (results, boundary)


def _boundary_figure(shown: Any, simulated: bool) -> Any:
    """The boundary figure from a simulated search (its probes) or a file sweep (its points)."""
    from kvledger.report.judgment_figures import boundary_figure

    if simulated:
        sb = shown.search
        pts = [(p.value, p.attainment, p.goodput_req_per_s) for p in sb.probes]
        return boundary_figure(pts, sb.axis, sb.target, sb.boundary.boundary_value, measured=False)
    _results, b = shown
    return boundary_figure([(p.value, p.attainment, p.goodput_req_per_s) for p in b.points], b.axis, b.target,
                           b.boundary_value, measured=True, estimated=sum(p.estimate for p in b.points))


@dataclass(frozen=True, slots=True)
class GoodputFlags:
    """The outputs, the --target boundary and its axis, and the --simulate GPU and search bounds."""

    json_out: bool = flag("--json", default=False, help=(
        "JSON for scripts, one document: the run's object; with several runs or --target, {\"runs\": [one object "
        "per run or probe], \"boundary\": …}"))
    json_lines: bool = flag("--json-lines", default=False, help=(
        "JSON Lines instead: one object per run or probe per line, then the boundary line"))
    format: str | None = flag("--format", help=(
        "force a reader (one of the format names listed above) instead of auto-detection"))
    target: float | None = flag("--target", help=(
        "attainment target in (0, 1], e.g. 0.9: the SLO boundary across the FILEs, or searched by simulation with "
        "--simulate"))
    axis: str = flag("--axis", default="request_rate", help=(
        "load axis for --target: request_rate (or rate), concurrency or max_num_seqs"))
    out: Path | None = flag("--out", help="also write the JSON to this file (refuses to overwrite without --force)")
    force: bool = flag("--force", default=False, help="allow --out and --plot to overwrite an existing file")
    plot: Path | None = flag("--plot", help=(
        "with --target: draw attainment and goodput against the axis, the boundary marked, to FILE (.png, .svg or "
        ".pdf)"))
    gpu: str | None = flag("--gpu", help=(
        "[--simulate] the GPU to simulate: a catalog name (H100, H200, ...) or a GPU file"))
    lo: float | None = flag("--lo", help=(
        "[--simulate --target] lowest value to search (default: found by halving from 1 req/s or 1 user; 1 for "
        "max_num_seqs)"))
    hi: float | None = flag("--hi", help=(
        "[--simulate --target] highest value to search (default: found by doubling; the engine default for "
        "max_num_seqs)"))
    seeds: int = flag("--seeds", default=1, help=(
        "[--simulate --target] search once per seed, --seed to --seed+N−1 (1 to 64; about N times the time), and "
        "print the capacity's range over them; the probes shown are the first seed's"))
    tol: float | None = flag("--tol", help=(
        "[--simulate --target] bisection resolution (default: 1 % of the bracket's top for the rate; 1 for "
        "concurrency and max_num_seqs)"))


@with_groups(flags=GroupUse(GoodputFlags, first_spelling=True), workload=so.SIM_WORKLOAD, engine=so.SIM_ENGINE,
             sessions=GOODPUT_SESSIONS, tiers=so.SIM_TIERS, dp=SIM_DP)
def goodput_command(
    files: list[Path] | None = typer.Argument(None, help="benchmark output files or kvledger records files; or use "
                                                         "--simulate", show_default=False),
    slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'; keys ttft, tpot, "
                                               "e2e, itl_max (largest gap), itl_mean, itl_pQ (e.g. itl_p99)"),
    flags: GoodputFlags = GoodputFlags(),
    simulate: so.Simulate = None,
    workload: WorkloadFlags = WorkloadFlags(),
    engine: EngineFlags = EngineFlags(),
    sessions: SessionFlags = SessionFlags(),
    tiers: TierFlags = TierFlags(),
    dp: SimDataParallelFlags = SimDataParallelFlags(),  # vLLM's DP ranks of a MoE model, as simulate (dp_flags.py)
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
    from kvledger.report.slo_text import slo_block

    f = flags
    the_slo = _checked_slo(files, simulate, slo, f, (workload, engine, tiers))
    if simulate is not None:
        lines, shown = _simulated(simulate, f.gpu, (workload, engine, sessions), the_slo, f.target, f.axis,
                                  (f.lo, f.hi, f.tol), tiers, f.seeds, dp)
    else:
        refuse_dp_on_files(dp)
        lines, shown = _from_files(files, f.format, (workload, engine, sessions), the_slo, f.target, f.axis, tiers)
    if f.plot is not None:
        save_plot(_boundary_figure(shown, simulate is not None), f.plot)
    text = "\n".join(lines) + "\n" if f.json_lines else _document(lines)
    none_good = _nothing_measured(shown, simulate is not None, f.target) or _no_capacity(shown, simulate is not None,
                                                                                         f.target)
    will_end_with(1 if none_good else 0)  # kept by a reader that stops reading (`| head -1`)
    if f.out is not None:
        strict_json.write_text_atomic(f.out, text)  # the location was checked before the work (prepare_output_file)
    if f.json_out or f.json_lines:
        typer.echo(text, nl=False)
    else:
        _print(shown, simulate is not None, f.target, slo_block(the_slo))
    if none_good:
        raise typer.Exit(1)  # as simulate when no request finished: an answer a script must not take as complete


def _no_capacity(shown: Any, simulated: bool, target: float | None) -> bool:
    """Whether --target found no load meeting it (no SLO capacity): exit 1, as ``cost`` does (README, exit status)."""
    if target is None:
        return False
    b = shown.search.boundary if simulated else shown[1]
    return b.boundary_value is None


def _nothing_measured(shown: Any, simulated: bool, target: float | None) -> bool:
    """Whether a run given (a FILE's, or the one simulated run; not a search's probes) had requests of which none
    completed: its row is printed with a warning, and the command then exits 1."""
    if simulated and target is not None:
        return False
    results = [shown[0]] if simulated else shown[0]
    return any(r.no_request_completed for r in results)


def _checked_slo(files: list[Path] | None, simulate: str | None, slo: str, f: GoodputFlags, groups: tuple) -> Any:
    """The parsed SLO, once FILEs or --simulate (not both), --plot with --target, the outputs (never one of the files
    given: FILEs, the model, the trace, any file a flag names) and the flags that apply to one source only are
    checked."""
    from kvledger.cli.outputs import paths_in, refuse_lone_force
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo

    if bool(files) == (simulate is not None):
        raise InputError(
            "give either benchmark FILEs or --simulate MODEL (with --gpu), not " + ("both" if files else "neither")
        )
    the_slo = parse_slo(slo)
    from kvledger.analyses.serving.sim_boundary import normalize_axis

    normalize_axis(f.axis)  # a misspelt --axis is an error with or without --target (it has a default)
    if f.plot is not None and f.target is None:
        raise InputError("--plot draws the SLO boundary: add --target (e.g. 0.9)")
    inputs = [*(files or []), *paths_in(simulate, f.gpu, *groups)]
    refuse_lone_force(f.force, {"--out": f.out, "--plot": f.plot})
    check_plot_path(f.plot, f.force, inputs=inputs)
    if f.out is not None:
        from kvledger.cli.outputs import prepare_json_out

        prepare_json_out(f.out, "goodput's report", force=f.force, inputs=inputs, lines=f.json_lines)
    if simulate is not None and f.format is not None:
        raise InputError("--format applies to FILEs, not to --simulate")
    given = [flag for flag, v in (("--gpu", f.gpu), ("--lo", f.lo), ("--hi", f.hi), ("--tol", f.tol),
                                  ("--seeds", None if f.seeds == 1 else f.seeds)) if v is not None]
    if simulate is None and given:
        raise InputError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to a --simulate run or search, "
                         "not to FILEs")
    return the_slo


def _print(shown: Any, simulated: bool, target: float | None, slo_text: Any) -> None:
    """The tables: the FILEs' runs (and boundary), the simulated run with its sources and tiers, or the search."""
    if not simulated:
        _print_human(*shown, slo_text)
    elif target is None:
        res, sim, tier_report = shown
        print_step_cost_warnings(sim)  # first: a model-scope profile used beyond what it was fitted on
        _print_human([res], None, slo_text)
        _print_sources(sim, "sources of the simulated run")
        from kvledger.report.goodput_view import no_band_line

        print(no_band_line(sim.run))
        if tier_report is not None:
            from rich.console import Console

            from kvledger.report.sim_tiers_view import render_sim_tiers

            render_sim_tiers(tier_report, Console(emoji=False), sessions=False)
    else:
        print_step_cost_warnings(shown.search.first_run)
        _print_search(shown.search, slo_text)
        print_tier_capacity(shown.tier_capacity)  # with tier flags: the capacity without them beside


def register(app: typer.Typer) -> None:
    """Add the ``goodput`` command to ``app``."""
    app.command("goodput")(goodput_command)
