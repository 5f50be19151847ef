"""How the build-or-buy answer prints first: the verdict and both bills, what it rests on, the other API rows, the
secondary per-request line and the effective-cost rule; then the monthly bills itemised (rented, bought, API)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvledger.ledgers.amounts import usd_text
from kvledger.ledgers.error_band import scope_words

if TYPE_CHECKING:
    from kvledger.ledgers.cost_summary import CostReport

__all__ = ["print_answer", "print_bills", "print_no_answer", "report_answer_lines", "capacity_band_clause",
           "not_steady_lines", "sized_capacity", "sized_run_figures"]


def print_answer(con: Any, rep: CostReport) -> None:
    """The answer block: at most a handful of lines, before any detail."""
    from rich.markup import escape

    from kvledger.ledgers.decision_notes import effective_cost_line, rests_on_line

    first, *rest = rep.headline
    con.print(f"[bold]{escape(first)}[/]")
    for line in rest:  # a warning in it (a capacity only bounded below) as the report's other warnings
        warn = line.startswith("  WARNING: ")
        con.print(f"  [bold red]WARNING:[/] {escape(line.removeprefix('  WARNING: '))}" if warn else escape(line))
    d = rep.decision
    if d is not None:
        con.print(escape("  " + rests_on_line(d)))
        if d.rests_on:
            con.print(escape("  rests on: " + "; ".join(d.rests_on)))
        others = [a for a in d.apis if a is not d.primary]
        if others:
            con.print(escape("  other API rows (monthly): " + ", ".join(
                f"{a.price.key} {usd_text(a.bill.total_usd)}" + ("" if a.same_model else " (another model)")
                + ("" if a.price.confidence == "high" else f" [{a.price.confidence or 'unstated'} confidence]")
                for a in others)))
    con.print(escape("  " + effective_cost_line(rep.sticker)))
    if rep.secondary:  # none where there is no API to compare a request's cost with
        con.print(escape("  " + rep.secondary))


def print_no_answer(d: dict[str, Any]) -> None:
    """``cost``'s output where it cannot give one answer (``analyses.serving.cost_unbounded``: no request, or as few as
    none, met the SLO): what it can say, the figures at the upper bound, the warnings and how to get an answer."""
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False, emoji=False)
    con.print(f"[bold]answer: none — {escape(d['no_answer'])}[/]")
    if d["at_upper_bound"] is not None:
        con.print(escape("  " + d["at_upper_bound"]["text"]))
    for note in d["notes"]:
        warn = note.startswith("WARNING: ")
        con.print(("  [bold red]WARNING:[/] " if warn else "  ") + escape(note.removeprefix("WARNING: ")))
    con.print(escape("  " + d["fix"]))


def print_bills(con: Any, rep: CostReport, table: Any, sources: list[str]) -> None:
    """The decision's monthly bills itemised: rented, bought (when priced), the API row compared; with no API row, the
    self-hosted month alone (``ledgers.self_host_only``: its sizing, rented and bought bills)."""
    from rich.markup import escape

    d = rep.decision
    month = getattr(rep, "month", None)
    if d is None and month is not None:
        con.print(f"\n[bold]monthly bills for the volume[/] ({escape(month.volume.how)})")
        con.print(escape(f"  {month.sizing}"))
        for bill in (month.rent, month.buy):
            if bill is not None:
                con.print(table(bill, sources, 2))
        return
    if d is None:
        return

    con.print(f"\n[bold]monthly bills for the volume[/] ({escape(d.volume.how)})")
    con.print(table(d.self_host, sources, 2))  # USD per month: to the cent
    if d.buy is not None:
        con.print(table(d.buy, sources, 2))
    con.print(table(d.primary.bill, sources, 2))


def report_answer_lines(cost: dict[str, Any]) -> list[str]:
    """What ``kvledger report`` prints before where it wrote: the verdict line (as ``cost`` opens) and the SLO
    capacity it is priced at, from ``cost --simulate --json`` (``cost``)."""
    cs = cost["simulation"]["capacity_search"]
    first = (cost.get("headline") or [f"answer: {cost['verdict']}"])[0]
    good, share, whose = sized_run_figures(cs)
    n, e = cost["inputs"]["num_gpus"], (cost.get("break_even_volume") or {}).get("engine_replicas_per_unit", 1) or 1
    gpus = f"{n} GPU{'' if n == 1 else 's'}"
    unit = gpus if e == 1 else f"{gpus}: {e} replicas × {n // e} GPU{'s' if n // e > 1 else ''}"  # --replicas
    from kvledger.units import fmt_plain  # 4 significant digits, as the capacity band's text (the JSON keeps all)

    return [first, f"SLO capacity: {fmt_plain(sized_capacity(cs))} req/s{capacity_band_clause(cs)} per deployment "
                   f"unit ({unit}), "
                   f"{good:.2f} good req/s there, "
                   f"{share:.1%} of requests within the SLO (target ≥ {cs['target']:.0%}{whose})",
            *not_steady_lines(cs)]


def capacity_band_clause(cs: dict[str, Any], caveat: bool = True) -> str:
    """ " (80% band 11.43–21.22 req/s, uncalibrated roofline)" from a capacity search's ``error_band``, or "" without
    one (no measured run stands for the regime, or an older JSON); with ``caveat``, the band's ``elsewhere`` too
    ("measured on … only, not on …: its width a floor for the error there, …": ``Band.on_gpu``) where it has one."""
    b = cs.get("error_band")
    if not b:
        return ""
    where = f", {b['elsewhere']}" if caveat and b.get("elsewhere") else ""
    return f" (80% band {b['low']:.4g}–{b['high']:.4g} req/s, {scope_words(b['regime'])}{where})"


def sized_capacity(cs: dict[str, Any]) -> float:
    """The req/s a capacity search's JSON sizes and prices on: the rate found, or the deployment's capacity bound
    where that caps it (``sized_on_req_per_s``, written only then)."""
    return cs.get("sized_on_req_per_s") or cs["slo_capacity_req_per_s"]


def sized_run_figures(cs: dict[str, Any]) -> tuple[float, float, str]:
    """(good req/s sustained, share of requests within the SLO, the run the share is of) at the rate
    ``sized_capacity`` gives: that rate × the share of the probe at the rate found, or, where the capacity bound caps
    it, of the run at the bound (``attainment_at_sized_rate``), with "; a run at that rate, not the probe at the R req/s
    found" to say so ("" otherwise). Good req/s is the rate × the share, what a replica fed that rate serves within the
    SLO (``ledgers/sustained_rate.py``), not the probe's goodput over first arrival → last finish, whose drain tail
    reads as lost time and moves with the probe's length."""
    if cs.get("attainment_at_sized_rate") is None:
        share = cs["attainment_at_boundary"]
        return sized_capacity(cs) * share, share, ""
    share = cs["attainment_at_sized_rate"]
    return (sized_capacity(cs) * share, share,
            f"; a run at that rate, not the probe at the {cs['slo_capacity_req_per_s']:g} req/s found")


def not_steady_lines(cs: dict[str, Any]) -> list[str]:
    """``warning: …`` when the probe at the capacity had not reached steady state (its ``not steady`` note), when
    the probes replayed a sample unlike their trace (``unrepresentative sample``), or when the capacity is sized on
    the deployment's capacity bound, below the rate found (``work_bounds.bound_note``)."""
    from kvledger.analyses.serving.notes import CAPACITY_WARNINGS
    from kvledger.analyses.serving.work_bounds import BOUND_NOTE_START

    return [f"warning: {n.removeprefix('not steady: ')}" for n in cs.get("notes", [])
            if n.startswith((*CAPACITY_WARNINGS, BOUND_NOTE_START))]
