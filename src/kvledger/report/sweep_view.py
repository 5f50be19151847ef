"""Terminal rendering of ``kvledger validate --sweep`` (``SweepValidation``): the step cost once, per stage the
measured mean TTFT, TPOT and throughput, the errors and the 80% band of the simulated latency, then the knee and the
saturation throughput on both sides, with the band's source."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from kvledger.calibration.judged_band import band_covers
from kvledger.calibration.sweep_bands import BEHIND, SERVED
from kvledger.report.knee_view import KNEE_MARK, KNEE_MEANING, knee_shown, side_lines
from kvledger.report.sweep_table import LATENCY, axis_unit, column_tops, head, levels, sweep_tables
from kvledger.report.validation_figures import (
    BAND_MARKS_NOTE,
    band_source_line,
    band_span,
    biased_line,
    fmt_error,
    fmt_rate,
    step_cost_line,
    step_cost_source,
    warnings_first,
)

if TYPE_CHECKING:
    from kvledger.calibration.validate import SweepValidation

__all__ = ["render_sweep", "band_span", "knee_resolution", "column_tops"]

_NOTE_WORDS = {"the measured stage": f"measured at saturation (its client achieved < {BEHIND:.0%} of the requested "
                                     f"rate or its engine served < {SERVED:.0%} of what a server keeping up "
                                     "completes)",
               "the simulated queue": "the simulated queue grew"}


def _band_lines(r: SweepValidation) -> list[str]:
    """Where the bands come from (each source once, with the figures it stands for) and which figures have none."""
    b = r.bands
    if b is None:
        return []
    firsts = {"TTFT mean": next((x for x in b.ttft_mean if x is not None), None),
              "TPOT mean": next((x for x in b.tpot_mean if x is not None), None),
              "saturation throughput": b.saturation_throughput}
    out = [x for x in (biased_line(firsts), band_source_line(firsts, b.regime)) if x is not None]
    medians = [head(m) for m in r.compared_latency if m is not None and m not in LATENCY]
    if medians:
        out.append(f"no band on {' or '.join(medians)}: the files state no mean, and the bands were measured on mean "
                   "TTFT and TPOT; the error compares the simulated median with the measured one")
    unbanded: dict[str, list[str]] = {}
    for level, note in zip(levels(r), b.stage_notes):
        if note is not None:
            why = next((w for k, w in _NOTE_WORDS.items() if note.startswith(k)), note)
            if r.clients is not None and note.startswith("a closed loop of"):  # every stage's, once
                why = ("each a closed loop: its clients, not a request rate, set its load and throughput; the bands "
                       "were measured on open-loop stages (latency below saturation, throughput at it)")
            unbanded.setdefault(why, []).append(level)
    for why, rates in unbanded.items():
        out.append(f"no latency band at {', '.join(rates)} {axis_unit(r)}: {why}; the bands were measured below "
                   "saturation only" if r.clients is None else f"no latency band at {', '.join(rates)} clients: {why}")
    knee: dict[str, list[str]] = {}
    for level, note in zip(levels(r), b.ttft_notes):
        if note is not None:
            knee.setdefault(note, []).append(level)
    for why, rates in knee.items():
        out.append(f"no TTFT band at {', '.join(rates)} {axis_unit(r)}: {why}")
    out.append(BAND_MARKS_NOTE)  # the band columns show: their marks said, whichever are printed
    out.append(b.knee_note)
    return out


def _bracket(rates: list[float], knee: float) -> tuple[float, float] | None:
    """The two neighbouring stage rates a knee was interpolated between (req/s), or None outside the stages."""
    below = [x for x in rates if x <= knee]
    above = [x for x in rates if x >= knee]
    return (max(below), min(above)) if below and above else None


def knee_resolution(rates: list[float], measured: float | None, simulated: float | None,
                    unit: str = "req/s") -> str | None:
    """How finely the sweep's stages resolve the two knees (each is read by linear interpolation between the stages
    that straddle it): both between the same two stages, or each between its own; None without both knees.
    ``unit``: the axis's ("req/s", or "clients" for a sweep over closed loops)."""
    if measured is None or simulated is None:
        return None

    def f(v: float) -> str:  # a stage's level: clients whole, rates to 0.01 req/s
        return f"{v:,.0f}" if unit == "clients" else f"{v:.2f}"

    ordered = sorted(rates)
    a, b = _bracket(ordered, measured), _bracket(ordered, simulated)
    if a is None or b is None:
        return None
    if a == b and a[1] > a[0]:
        return (f"both knees lie between the stages at {f(a[0])} and {f(a[1])} {unit} and are read by linear "
                f"interpolation there: the sweep resolves them only to its spacing, {f(a[1] - a[0])} {unit}, so "
                "their agreement within it is not a measure of the simulator's error")

    def where(x: tuple[float, float]) -> str:  # a knee on a stage's own rate: the first stage already past it
        if x[0] < x[1]:
            return f"between the stages at {f(x[0])} and {f(x[1])} {unit}"
        return (f"at or below the lowest stage, {f(x[0])} {unit}" if x[0] == ordered[0] else
                f"at the stage of {f(x[0])} {unit}")

    return f"the measured knee lies {where(a)}, the simulated one {where(b)}"


def _knee_lines(r: SweepValidation) -> list[str]:
    """The warning for the stages at or past their knee (``knee_view``), each stage's figures on a line of its own;
    [] when none is."""
    shown = [(level, k) for x, level in zip(r.runs, levels(r))
             if (k := knee_shown(x.at_knee, x.saturated)) is not None]
    if not shown:
        return []
    rates = ", ".join(level for level, _ in shown)
    out = [f"WARNING: stages marked {KNEE_MARK} ({rates} {axis_unit(r)}) are at or past their knee (their waits for a "
           f"first token grew through the stage, short of the saturation tests; rule: {shown[0][1]['rule']}): their "
           f"mean-latency errors {KNEE_MEANING}; TPOT and the saturation throughput below are the figures to compare."]
    for level, k in shown:
        out += [f"  {level} {axis_unit(r)}, {line}" for line in side_lines(k)]
    return out


def _knee_spacing(r: SweepValidation, km: float | None, kp: float | None) -> str:
    """"both read between the stages at A and B: …; " where both knees fall between the same two stages, whose
    spacing, not the error printed, is how well the sweep places them (``knee_resolution`` says it in full); ""."""
    rates = sorted(r.rates if r.clients is None else r.clients)
    a = _bracket(rates, km) if km is not None and kp is not None else None
    if a is None or a != _bracket(rates, kp) or not a[1] > a[0]:
        return ""
    f = fmt_rate if r.clients is None else (lambda v: f"{v:,.0f}")
    return (f"both interpolated between the stages at {f(a[0])} and {f(a[1])} {axis_unit(r)}: they agree to within the "
            f"sweep's spacing of {f(a[1] - a[0])} {axis_unit(r)}, not to the error shown; ")


def _answer_lines(r: SweepValidation) -> list[str]:
    """The sweep's answer, printed above its table: the measured and simulated knee, and the saturation throughput
    (the largest over the stages) with its band (rich markup, escaped)."""
    from kvledger.ledgers.error_band import band_text

    m, p = r.measured, r.predicted

    def knee(v: float | None) -> str:
        return "none in the sweep" if v is None else f"{v:.2f} {axis_unit(r)}"

    km, kp = (m.knee_req_per_s, p.knee_req_per_s) if r.clients is None else (m.knee_clients, p.knee_clients)
    err = "" if km is None or kp is None or not km else \
        f", error {kp - km:+.2f} {axis_unit(r)} ({fmt_error(kp / km - 1)})"
    out = [f"knee ({escape(r.knee_rule)}): measured {knee(km)}, simulated {knee(kp)}{err} "
           f"({_knee_spacing(r, km, kp)}no error band)"]
    if m.saturation_throughput_req_per_s and p.saturation_throughput_req_per_s:
        b = r.bands
        band = ("" if b is None else f" (no error band: {b.throughput_note})" if b.saturation_throughput is None
                else " " + band_text(p.saturation_throughput_req_per_s, r.runs[0].bands.get("throughput"), "{:.2f}")
                + {True: " ✓ (the measured figure lies inside its band)", False: " ✗ (the measured figure lies outside "
                   "its band)", None: ""}[band_covers(b.saturation_throughput, m.saturation_throughput_req_per_s)])
        short = b is not None and b.saturation_throughput is None and (b.throughput_note or "").startswith("no stage")
        label = "largest throughput over the stages (none past saturation)" if short else \
            "saturation throughput (largest over the stages)"
        out.append(f"{label}: measured {m.saturation_throughput_req_per_s:.2f} req/s, simulated "
                   f"{p.saturation_throughput_req_per_s:.2f} req/s{escape(band)}, error "
                   f"{fmt_error(p.saturation_throughput_req_per_s / m.saturation_throughput_req_per_s - 1)}")
    return out


def _header(r: SweepValidation) -> str:
    """What was replayed, as single-run ``validate`` says it first: the stages, the model, GPU and TP (each once, or
    every one the stages differ in; the engine's version and settings are in the notes) (rich markup, escaped)."""
    def one(values: list[str]) -> str:
        return " / ".join(dict.fromkeys(values))

    axis = "clients" if r.clients is not None else "request rates"
    return escape(f"load sweep: {len(r.runs)} stages over {axis} of {one([x.model for x in r.runs])} on "
                  f"{one([x.gpu for x in r.runs])} at TP {one([str(x.tp) for x in r.runs])}")


def render_sweep(r: SweepValidation, con: Console, verbose: bool = False) -> None:
    """A validated load sweep: the step cost that priced it (once), the answer (the knee and the saturation throughput
    on both sides), then per stage the TTFT/TPOT mean and throughput errors with the 80% band of the simulated
    latency, the warnings the table's marks point to, the bands' source, the step cost's and the notes (``verbose``:
    each stage's whole, else ``brief_notes``)."""
    con.print(_header(r))
    for line in dict.fromkeys(step_cost_line(x) for x in r.runs):  # one step cost prices every stage: said once
        con.print(line)
    for line in _answer_lines(r):  # the answer first; the knee's resolution and the bands' source under the table
        con.print(line)
    from kvledger.calibration.sweep_notes import brief_notes

    warned, rest = warnings_first(r.notes if verbose else brief_notes(r))
    for n in warned:  # what makes the comparison another run's, before its figures
        con.print(f"note: {escape(n)}")
    fitted = sum(x.in_sample for x in r.runs)
    for table in sweep_tables(r, fitted, con.width):
        con.print(table)
    if fitted:
        from kvledger.calibration.in_sample import profile_words

        scope = r.runs[0].scope
        con.print(f"IN-SAMPLE: the {profile_words(scope)} pricing this sweep was fitted on {fitted} of its "
                  f"{len(r.runs)} stages: their errors are the fit's, not a prediction's; for an out-of-sample check "
                  f"pass {'--gpu-profile none' if scope == 'gpu' else '--step-cost roofline'} or a profile fitted on "
                  "other runs")
    sides = {side for x in r.runs if x.saturated for side in x.saturated["sides"]}
    if sides:
        why = [w for side, w in (("measured", "the client fell behind the requested rate or the engine served < "
                                  f"{SERVED:.0%} of it, or of what a server keeping up completes where a stage's "
                                  "requests give the drain"),
                                 ("simulated", "the simulated queue kept growing"))
               if side in sides]
        con.print(f"WARNING: stages marked ⚠ are saturated ({'; or '.join(why)}): their latency errors are not "
                  "meaningful; throughput is the figure to compare.")
    for line in _knee_lines(r):
        con.print(escape(line))
    m, p = r.measured, r.predicted
    km, kp = (m.knee_req_per_s, p.knee_req_per_s) if r.clients is None else (m.knee_clients, p.knee_clients)
    if said := knee_resolution(r.levels, km, kp, axis_unit(r)):
        con.print(f"[dim]{escape(said)}[/]")
    for line in _band_lines(r):
        con.print(f"[dim]{escape(line)}[/]")
    for line in dict.fromkeys(step_cost_source(x) for x in r.runs):  # under the figures, once as above
        con.print(line)
    for n in rest:
        if not (fitted and n.startswith("IN-SAMPLE")):  # said per stage in the table and once above
            con.print(f"note: {escape(n)}")

