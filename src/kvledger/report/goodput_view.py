"""Terminal view of ``kvledger goodput``: one row per run with its sources, the SLO boundary across runs, and a
simulator-driven search's probes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvledger.report.figure import fmt  # four significant figures, no exponent (a capacity found to ~1%)
from kvledger.report.goodput_rows import (
    LEGEND,
    best_answer,
    fmt_or_na,
    goodput_table,
    run_name,
    single_answer,
    tool_goodput_text,
)
from kvledger.report.probe_cells import probe_attainment, probe_verdict, target_words
from kvledger.report.run_warnings import is_warning, run_warnings
from kvledger.report.validation_figures import fmt_rate

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_boundary import SimBoundary
    from kvledger.analyses.serving.sim_ledgers import SimulatedRun
    from kvledger.ledgers.boundary import BoundaryResult
    from kvledger.ledgers.goodput import GoodputResult

__all__ = ['boundary_text', 'bracket_text', 'print_goodput', 'print_search', 'print_sources', 'single_answer',
           'best_answer', 'FIXED_RATE_NO_BAND', 'no_band_line']


#: why a simulated run at a given rate prints no band on its goodput (``goodput --simulate`` without ``--target``)
FIXED_RATE_NO_BAND = ("error band: none on goodput at an offered rate — it is that rate times the attainment, so what "
                      "is uncertain is whether the latencies meet the SLO: `kvledger simulate` prints the run's mean "
                      "TTFT and TPOT with their 80% bands, and `--target` the SLO capacity with its band")


def no_band_line(run: Any) -> str:
    """Why a simulated run (its records) has no goodput band; a burst's (``ledgers.burst_read``): a drain, no rate."""
    from kvledger.ledgers.burst_read import all_at_once, read_burst

    if (b := read_burst(run) if all_at_once(run) else None) is None:
        return FIXED_RATE_NO_BAND
    what = ("the engine's drain of a queue it could not run at once" if b.saturated else
            f"one batch of {b.num_requests:,} requests draining, set by the burst's size, not the capacity")
    return (f"error band: none on goodput of a burst (every request at t = 0; {b.facts()}) — it is good requests ÷ "
            f"first arrival → last finish, {what}: `kvledger simulate` prints the run's bands, and `--target` the "
            "SLO capacity with its band")


def _rate(x: float | None) -> str:
    """A probe's rate (req/s) to 4 significant figures: 0.003125, not 0.00, at a rate below 0.005 req/s."""
    return "n/a" if x is None else fmt_rate(x)


_AXIS_UNITS = {"request_rate": " req/s", "concurrency": " concurrent users", "max_num_seqs": " max_num_seqs"}


def boundary_text(b: BoundaryResult) -> str:
    """'SLO boundary on AXIS for attainment ≥ T: VALUE UNIT (… per GPU)' of a boundary across measured runs."""
    unit = _AXIS_UNITS.get(b.axis, "")
    return (f"SLO boundary on {b.axis} for attainment ≥ {b.target:.0%}: "
            + (f"{b.boundary_value:g}{unit}" if b.boundary_value is not None else "none (the lowest value already "
               "misses)")
            + (f" ({b.boundary_per_gpu:g}{unit} per GPU)" if b.boundary_per_gpu is not None else "")
            )


def bracket_text(b: BoundaryResult, results: list[GoodputResult] | None = None) -> str:
    """Where the boundary lies between the measured values: "" when no measured value above it misses. ``results``
    (the runs, by label) give the bracket of an estimated next point, whose miss is then said to be bounded only."""
    if b.boundary_value is None or b.first_failing_value is None or b.first_failing_value <= b.boundary_value:
        return ""
    unit = _AXIS_UNITS.get(b.axis, "")
    nxt = next((p for p in b.points if p.value == b.first_failing_value), None)
    res = {r.run_label or r.source: r for r in results or []}.get(nxt.label) if nxt is not None else None
    hi = res.attainment_upper if res is not None and nxt.estimate else None
    if hi is not None and f"{hi:.1%}" != f"{nxt.attainment:.1%}":
        how = (f"the next measured, whose attainment is only bounded, [{nxt.attainment:.1%}, {hi:.1%}]: "
               + ("even its upper bound misses" if hi < b.target else "its lower bound misses, so the boundary may "
                  "lie at or above it"))
    else:
        how = "the next measured, which misses"
    return (f"the measured runs bracket it: between {b.boundary_value:g}{unit} (the last that meets) and "
            f"{b.first_failing_value:g}{unit} ({how}); a run in between would narrow it")


def _point_attainment(p: Any, res: GoodputResult | None, target: float) -> str:
    """A point's attainment and verdict: an estimate shows its bracket [lower, upper]; the lower bound decides."""
    hi = res.attainment_upper if res is not None and p.estimate else None
    if hi is None or f"{hi:.1%}" == f"{p.attainment:.1%}":  # no bracket, or both ends print alike
        return (f"attainment {'≥' if p.estimate and hi is None else ''}{p.attainment:.1%} "
                f"{'meets' if p.meets_target else 'misses'}")
    verdict = ("meets (its lower bound does)" if p.meets_target else f"misses (even its upper bound is under "
               f"{target:.0%})" if hi < target else "counted as missing (its lower bound misses; the upper would meet)")
    return f"attainment in [{p.attainment:.1%}, {hi:.1%}] {verdict}"


def _shared_notes(results: list[Any]) -> list[str]:
    """The notes every run carries (the same reader, the same files' layout): printed once, not once per run."""
    if len(results) < 2:
        return []
    return [n for n in results[0].notes if all(n in r.notes for r in results[1:]) and not is_warning(n)]


def _nothing_measured(results: list[Any]) -> dict[int, str]:
    """Run number → its note of each run with requests of which none completed (``no_request_completed``)."""
    from kvledger.ledgers.notes import nothing_measured

    return {k: nothing_measured(r.num_requests, r.num_failed, simulated=r.simulated)
            for k, r in enumerate(results, start=1) if r.no_request_completed}


def print_goodput(results: list[GoodputResult], boundary: BoundaryResult | None, slo_text: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, emoji=False)
    if boundary is not None:  # the answer first; each run's point is listed at the end
        n = len(boundary.points)
        con.print(f"[bold]answer:[/] {escape(boundary_text(boundary))} across {n} measured "
                  f"run{'s' if n != 1 else ''} (each run's attainment at the end)")
        if bracket_text(boundary, results):
            con.print(f"  {escape(bracket_text(boundary, results))}")
    empty = _nothing_measured(results)
    if boundary is None and len(results) == 1 and not empty:  # one run: its goodput is the answer
        con.print(escape(single_answer(results[0])))
    elif boundary is None and len(results) > len(empty):  # several runs: the best one's goodput
        con.print(escape(best_answer(results, empty)))
    for k, line in empty.items():  # before the table, whose zeros for such a run are not a measurement
        run = f"run {run_name(k, results[k - 1])}: " if len(results) > 1 else ""  # only that run of several
        con.print(f"[bold yellow]warning[/]: {escape(run + line)}")
    for line in run_warnings(results):  # what the reader found missing, before the figures that rest on it
        con.print(f"[bold yellow]warning[/]: {escape(line)}")
    con.print(f"SLO: {escape(slo_text)}" + (f"; target {target_words(boundary.target)}" if boundary else ""))
    con.print(goodput_table(results))
    con.print(escape(LEGEND))
    shared = _shared_notes(results)
    if shared:
        con.print(f"\n[bold]notes for all {len(results)} runs[/]")
        for note in shared:
            con.print(f"  - {escape(note)}")
    for k, r in enumerate(results, start=1):
        con.print(f"\n[bold]#{k} "
                  f"{escape(Path(r.file).name)}{escape(' [' + r.run_label + ']') if r.run_label else ''}[/] "
                  f"({r.source_format}): "
                  f"duration {fmt_or_na(r.duration_s, ',.3f')} s, {escape(r.duration_source)}"
                  + ("; SLO misses among completed: " + ", ".join(f"{k} {v}" for k,
                                                                  v in r.num_missed.items()) if r.num_missed else ""))
        if r.tool_goodput:
            con.print(f"  {escape(tool_goodput_text(r.tool_goodput))}")
        if k in empty:  # its note is the warning above the table
            con.print("  - no request completed: nothing measured (the warning above the table)")
        for note in r.notes:
            if note not in shared and note != empty.get(k) and not is_warning(note):
                con.print(f"  - {escape(note)}")
    if boundary is not None:
        b = boundary
        by_label = {r.run_label or r.source: r for r in results}  # a point's label (boundary._point)
        bracket = bracket_text(b, results)
        con.print(f"\n{escape(boundary_text(b))}" + (f"; {escape(bracket)}" if bracket else ""))
        for p in b.points:
            con.print(f"  {b.axis} {p.value:g}: {_point_attainment(p, by_label.get(p.label), b.target)} "
                      f"({escape(p.label)})")
        for note in b.notes:
            con.print(f"  - {escape(note)}")


def _blocked(sb: SimBoundary) -> bool:
    """No capacity, and the requests the engine refuses alone keep every load under the target."""
    return sb.boundary.boundary_value is None and sb.rejections is not None and sb.rejections.blocks(sb.target)


def _answer(sb: SimBoundary) -> str:
    """The search's first line: the SLO capacity (with ``--seeds``, its range over the seeds), per replica and GPU."""
    from rich.markup import escape

    from kvledger.report.seed_spread_view import capacity_range_text

    b = sb.boundary
    unit = {"request_rate": " req/s", "concurrency": " concurrent users", "max_num_seqs": " max_num_seqs"}[sb.axis]
    seeds = "" if sb.seed_spread is None else escape(capacity_range_text(sb.seed_spread, unit))
    if b.boundary_value is None:
        why = (escape(sb.rejections.text(sb.target)) if _blocked(sb) else  # refusals alone miss it: said first
               escape(sb.idle_edge.note) if getattr(sb, "idle_edge", None) is not None else
               f"the lowest value probed already misses {sb.target:.0%}")
        return f"[bold]answer: no SLO capacity[/] on {sb.axis} — {why}" + (f" ({seeds})" if seeds else "")
    per = [f"{fmt(sb.boundary_per_replica, 4)} per replica, {fmt(sb.boundary_per_gpu, 4)} per GPU"] if (
        sb.boundary_per_gpu is not None) else []
    per = f" ({'; '.join(([seeds] if seeds else []) + per)})" if seeds or per else ""
    return (f"[bold]answer: SLO capacity[/] on {sb.axis} for attainment ≥ {sb.target:.0%}: "
            f"{fmt(b.boundary_value, 4)}{unit}{per}{_goodput_there(sb)}")


def _goodput_there(sb: SimBoundary) -> str:
    """The answer's goodput at the capacity: the probe's first arrival → last finish, then the good rate sustained
    (rate × attainment) that cost and search price (``ledgers/sustained_rate.py``); a session workload's steady state
    (``session_spec.steady_goodput``'s note among the notes) first, as search judges it, the whole probe beside it."""
    from kvledger.analyses.serving.session_spec import STEADY_NOTE
    from kvledger.analyses.serving.work_bounds import bound_clause

    b, good = sb.boundary, sb.goodput_at_boundary_req_per_s
    if good is None:
        return ""
    whole = f"{good:.3f} good req/s ({sb.goodput_at_boundary_req_per_s_per_gpu:.3f} per GPU)"
    share = next((p.attainment for p in b.points if p.value == b.boundary_value), None)
    if sb.axis != "request_rate" or share is None:
        return f"; goodput there {whole}"
    bound = sb.capacity_bound_req_per_s  # where it caps the rate found: cost and search size on it, not there
    priced = ("" if bound is None else f"; cost and search: {bound_clause(bound)} (the warning below)")
    steady = b.boundary_value * share
    if any(n.startswith(STEADY_NOTE) for n in sb.notes):  # sessions: the steady state is the figure, as in search
        return (f"; goodput there {steady:.3f} good req/s at the steady state ({b.boundary_value:g} turns/s × "
                f"{share:.1%} within the SLO; {steady / sb.num_gpus:.3f} per GPU), the figure this answer gives"
                + (", as search and cost price it" if bound is None else priced)
                + f"; {whole} over the probe's first arrival → last finish, its sessions' ramp-up and drain included")
    return (f"; goodput there {whole} over the probe's first arrival → last finish, {steady:.3f} sustained at that "
            f"rate ({b.boundary_value:g} × {share:.1%} within the SLO" + (", what cost prices)" if bound is None else
                                                                           ")" + priced))


def _units(sb: Any) -> str:
    """"8 GPUs = 1 replica × DP 8 × TP 1": the deployment's GPUs in cost's words (``unit_layout``: DP, PP)."""
    from kvledger.analyses.serving.unit_layout import unit_layout

    lay = unit_layout(sb.first_run.setup) if sb.first_run is not None else f"TP {sb.provenance.tp}"
    gpus, reps = sb.num_gpus, sb.replicas
    return f"{gpus} GPU{'' if gpus == 1 else 's'} = {reps:,} replica{'' if reps == 1 else 's'} × {lay}"


def print_search(sb: SimBoundary, slo_text: str) -> None:
    """The probes of a simulator-driven boundary search, the boundary, and the simulation's sources."""
    from rich import box
    from rich.console import Console
    from rich.markup import escape

    from kvledger.analyses.serving.notes import CAPACITY_WARNINGS
    from kvledger.analyses.serving.sim_boundary import SEARCH_AXES
    from kvledger.analyses.serving.work_bounds import BOUND_NOTE_START
    from kvledger.report.tables import LedgerTable as Table
    from kvledger.units import fmt_plain

    con = Console(highlight=False, emoji=False)
    first, _, rest = slo_text.partition("\n")
    b = sb.boundary
    con.print(_answer(sb))
    band = sb.error_band
    if band:
        con.print(f"[bold]error band[/]: {escape(band.text)} — {escape(band.source)}")
    if (sized := sb.sized_error_band) is not None:  # the bound caps the rate found: cost's and search's band of it
        con.print(f"[bold]error band[/] of the {fmt_plain(sized.value)} req/s cost and search size on (the capacity "
                  f"bound): 80% band {fmt_plain(sized.low)}–{fmt_plain(sized.high)} req/s")
    for n in sb.notes:  # a boundary probe that never reached steady state, or a sample unlike its trace: said above
        if n.startswith((*CAPACITY_WARNINGS, BOUND_NOTE_START)):  # the table, not only in the notes; as cost says
            con.print(f"[bold]warning[/]: {escape(n.removeprefix('not steady: '))}")
        elif sb.seed_spread is not None and n == sb.seed_spread.note:  # the draw moves the answer: said here
            con.print(f"[bold]seed spread[/]: {escape(n)}")
    con.print(f"SLO: {escape(first)}; target attainment {target_words(sb.target)}; search on {sb.axis}, "
              f"{sb.num_requests_per_probe:,} requests per probe" + (f"\n{escape(rest)}" if rest else ""))
    short = {"request_rate": "rate/s", "concurrency": "users", "max_num_seqs": "seqs"}[sb.axis]
    units = _units(sb)
    t = Table(title=f"probes ({units})", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("#", short, "offered/s", "attain", "good/s", "done/s", "per GPU", "target"):
        t.add_column(col, justify="right", no_wrap=True)
    for pr in sb.probes:
        t.add_row(f"{pr.order}{ {'bracket': 'b', 'bisection': 's'}.get(pr.phase, 'c') }", f"{pr.value:g}",
                  _rate(pr.offered_rate_req_per_s), probe_attainment(pr),
                  _rate(pr.goodput_req_per_s), _rate(pr.throughput_req_per_s), _rate(pr.goodput_req_per_s_per_gpu),
                  probe_verdict(pr))
    con.print(t)
    con.print(f"#: probe order, b = bracketing (doubling/halving), s = bisection, c = check of the top; {short}: "
              f"{escape(SEARCH_AXES[sb.axis])}; "
              "offered/s: requests ÷ their arrival span (open loop); attain: good ÷ all requests; good/s, done/s: "
              "goodput and completed req/s "
              "of the whole deployment; per GPU: good/s ÷ GPUs; good tok/s per probe in --json"
              + ("; lo–hi* (or one value*, where the two round alike): stopped early, its miss decided (see the "
                 "notes): attainment between the two" if any(
                  pr.stopped_early for pr in sb.probes) else "")
              + ("; queue grew: its queue still growing at the last arrival, a load the engine does not sustain — a "
                 "miss whatever its attainment" if any(pr.queue_grew for pr in sb.probes) else "")
              + ("; too short: over half its requests still in the system at its last arrival, too short to show the "
                 "load — a miss whatever its attainment" if any(pr.too_short for pr in sb.probes) else ""))
    said = {sb.seed_spread.note if sb.seed_spread is not None else None,  # printed above the table
            sb.rejections.text(sb.target) if _blocked(sb) else None}  # the answer (_answer)
    for note in b.notes + [n for n in sb.notes if n not in said
                           and not n.startswith((*CAPACITY_WARNINGS, BOUND_NOTE_START))]:  # printed above
        con.print(f"  - {escape(note)}")
    print_sources(sb.first_run, "sources (first probe; the searched value varies)")


def print_sources(sim: SimulatedRun, title: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, emoji=False)
    con.print(f"[bold]{escape(title)}[/]")
    for k, line in enumerate(sim.source_lines(), start=1):
        con.print(f"  [{k}] {escape(line)}")

