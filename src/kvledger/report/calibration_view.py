"""Terminal rendering of ``kvledger calibrate``'s profile (a dict) and ``kvledger validate``'s comparison
(``RunValidation``; a ``SweepValidation`` in ``sweep_view``), rich tables out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from kvledger.accounting.tp_comm import PCIE_ALLREDUCE_SHARE
from kvledger.calibration.fit_spread import spread_lines
from kvledger.calibration.stage_notes import FILE_TPOT
from kvledger.report.fit_tables_view import error_table, render_gpu_leave_one_out, saturated_runs_warning
from kvledger.report.gpu_fit_verdict import NOT_RECOMMENDED, default_verdict, model_default_verdict, ttft_alone_verdict
from kvledger.report.knee_view import KNEE_MARK, knee_shown, knee_warning
from kvledger.report.tables import LedgerTable as Table
from kvledger.report.validation_figures import (
    BAND_MARKS_NOTE,
    band_mark,
    band_source_line,
    band_span,
    biased_line,
    fmt_error,
    fmt_value,
    latency_scale,
    step_cost_line,
    step_cost_source,
    warnings_first,
)

if TYPE_CHECKING:
    from kvledger.calibration.sweep_bands import RunBands
    from kvledger.calibration.validate import RunValidation, SweepValidation

__all__ = ["render_profile", "render_validation", "fmt_value", "fmt_error", "error_table", "saturated_runs_warning",
           "step_cost_line"]


def _coef_table(sc: dict[str, Any]) -> Table:
    t = Table(title="fitted step cost (kvledger.calibration.fit)", title_justify="left")
    t.add_column("term")
    t.add_column("value", justify="right")
    t.add_column("unit")
    for k, unit in sc["units"].items():
        t.add_row(k, f"{sc[k]:.4g}", unit)
    if "decode_kv_byte_s" in sc:
        t.add_row("decode_kv_byte_s", f"{sc['decode_kv_byte_s']:.4g}",
                  f"s per KV byte read ({sc['kv_bytes_per_token_per_gpu']:,.0f} B per token per GPU)")
    t.add_row("overlap", str(sc["overlap"]), "CPU overhead overlaps the GPU (async scheduling)")
    return t


def render_profile(p: dict[str, Any], con: Console, out: Path | None) -> None:
    """The fitted coefficients, the fit's objective, each run's error and the leave-one-out errors."""
    con.print(f"calibration of {escape(str(p['model']))} on {escape(str(p['gpu']))} at TP {p['tp']} from "
              f"{len(p['runs'])} run(s); engine batching {p['engine']['batching']}, "
              f"{p['engine']['num_gpu_blocks']:,} KV blocks")
    con.print(_coef_table(p["step_cost"]))
    f = p["fit"]
    con.print(f"objective (Σ weighted log-ratio² of run statistics): {f['objective_start']:.4f} at the start "
              f"({escape(f['start_model'])}'s linear form) → {f['objective']:.4f} after {f['iterations']} iterations, "
              f"{f['num_replays']} replays")
    for line in spread_lines(p):  # the coefficients' folds' ranges, those held at their start (calibration.fit_spread)
        con.print(escape(line))
    con.print(error_table("error of the fitted model on each run (predicted/measured − 1)", p["runs"], "label"))
    saturated_runs_warning(p["runs"], con)
    if p["leave_one_out"]:
        con.print(error_table("leave-one-out: each run under a model fitted on the others", p["leave_one_out"], "run"))
        saturated_runs_warning(p["leave_one_out"], con, "run", " left out", "the model fitted without it")
    for n in p.get("notes", []):
        con.print(f"note: {escape(n)}")
    q = fit_quality_warning(p, con)
    model_default_verdict(p, con)
    if out is not None:
        con.print(f"profile written to {escape(str(out))}: use it with --step-cost {escape(str(out))}"
                  + (" (its poor fit widens its bands to take in the uncalibrated roofline's)"
                     if q.get("poor") else ""))


def _start(fit: dict[str, Any]) -> str:
    """The fractions the GPU fit's search started from, FLOP/s / bandwidth ("0.7/0.8", the default start)."""
    st = fit.get("start") or {}
    return f"{st.get('flops_fraction', 0.7):g}/{st.get('bandwidth_fraction', 0.8):g}"


def render_gpu_profile(p: dict[str, Any], con: Console, out: Path | None, fit_frontend: bool = False) -> None:
    """A GPU-scope profile: the fitted fractions, the objective, each run's errors under them; with ``fit_frontend``
    (calibrate --fit-frontend), the set-up's fitted front-end latency."""
    fit = p["fit"]
    con.print(f"GPU profile for {escape(p['gpu'])}: achievable FLOP/s fraction {p['flops_fraction']:.3f}, bandwidth "
              f"fraction {p['bandwidth_fraction']:.3f} (objective {fit['objective_start']:.4g} at the search's start "
              f"{_start(fit)}, not the uncalibrated default, compared below → {fit['objective']:.4g}; "
              f"{fit['num_replays']} replays)")
    for line in spread_lines(p):  # each constant's folds' range, a bound it sits at (calibration.fit_spread)
        con.print(escape(line))
    if p.get("gemm_efficiency") == "measured":
        con.print("weight matmuls at the FLOP fraction × the GPU's measured efficiency against tokens and GEMM size "
                  "(--gemm-efficiency measured; kvledger.accounting.gemm_efficiency): every run it prices uses it")
    if fit.get("flops_seen") is False:
        con.print(f"FLOP fraction not fitted: no step of these runs sees it (the objective is the same at every value "
                  f"tried; kvledger.calibration.fit_checks), so it is the uncalibrated default's, "
                  f"{p['flops_fraction']:.3f}; add a run with longer prompts to fit it")
    if p.get("host_step_s") or p.get("host_seq_s"):
        con.print(f"host time in series with each step: {p['host_step_s'] * 1e3:.3f} ms + "
                  f"{p['host_seq_s'] * 1e6:.2f} µs per sequence (fitted with --fit-host; the profile adds it to every "
                  "step of every model)")
    if p.get("allreduce_link_share") is not None:
        how = ("given by --allreduce-link-share and held in the fit" if fit.get("allreduce_link_share_given") else
               f"fitted on the TP > 1 run(s) over PCIe (kvledger.calibration.link_fit; the default rule prices "
               f"{PCIE_ALLREDUCE_SHARE:g})")
        con.print(f"TP all-reduces at {p['allreduce_link_share']:.3f} of the link's one-direction bandwidth, {how}: "
                  "the host's peer access and PCIe layout, so the profile carries it to every model on this host")
    if fit_frontend:
        con.print(f"front-end latency (the set-up's, per request, outside the engine): {fit['frontend_s'] * 1e3:.1f} "
                  "ms, fitted with the fractions (kvledger.calibration.gpu_fit, golden-section at each pair); added to "
                  "each run's TTFT and E2E below, written as fit.frontend_s, never added by the GPU profile")
    t = Table(title="each run under the fitted fractions (error = predicted/measured − 1)", title_justify="left")
    for col in ("run", "model", "TP", "TTFT mean", "TPOT mean", "E2E mean", "throughput"):
        t.add_column(col, justify="left" if col in ("run", "model") else "right")
    for r in p["runs"]:
        flag = " ⚠" if r.get("saturated") else ""
        t.add_row(escape(str(r["label"])), escape(str(r["model"])), str(r["tp"]),
                  *(fmt_error(r.get(f"{k}_rel_error")) + flag for k in ("ttft_mean", "tpot_mean", "e2e_mean")),
                  fmt_error(r.get("throughput_rel_error")))
    con.print(t)
    saturated_runs_warning(p["runs"], con)  # under its table, as the leave-one-out's is under its own
    render_gpu_leave_one_out(p, con)
    for note in p.get("notes") or []:
        con.print(f"note: {escape(str(note))}")
    # kept False: the default does as well; alone False: TTFT alone set the FLOP fraction (calibration/fit_identify)
    q, kept, alone = fit_quality_warning(p, con), default_verdict(p, con), ttft_alone_verdict(p, con)
    if out is not None:
        what = (NOT_RECOMMENDED if not kept else "not recommended: refit with --fit-frontend" if not alone else
                "any model on this GPU" if not q.get("poor") else "any model on this GPU, but its poor fit says "
                "little about other models: its bands are the uncalibrated roofline's or wider")
        con.print(f"written to {escape(str(out))}: use it with --gpu-profile {escape(str(out))} ({what})")


def fit_quality_warning(p: dict[str, Any], con: Console) -> dict[str, Any]:
    """The poor-fit warning of a profile of either scope (its ``fit_quality``: ``ledgers.profile_band.fit_quality``)
    and what to try; returns the block ({} when the profile has none)."""
    q = p.get("fit_quality") or {}
    if q.get("poor"):
        lim = ", ".join(f"{k.replace('_', ' ')} ±{v:.0%}" for k, v in q["limits"].items())
        con.print(f"[bold red]WARNING: poor fit[/] — {q['runs_within']} of {q['runs']} runs within {lim} in-sample "
                  f"({q['min_share_within']:.0%} needed); beyond: {escape('; '.join(q['beyond']))}. "
                  f"{escape(q['why'])}.")
        for h in q.get("hints", []):
            con.print(f"  try {escape(h)}")
    if q.get("latency_unmeasured"):  # ledgers.profile_band.SATURATED_ONLY
        con.print("[bold yellow]WARNING: latency not measured[/] — every run it was fitted on was saturated: only "
                  "their throughput constrained the fit, so its TTFT and TPOT bands below saturation are at least the "
                  "uncalibrated roofline's; add a run at a load the engine sustained")
    if q.get("capacity_unmeasured"):  # ledgers.profile_band.capacity_unmeasured
        con.print("[bold yellow]WARNING: capacity not measured[/] — none of the runs it was fitted on was saturated: "
                  "its saturation-throughput (capacity) bands are at least the uncalibrated roofline's; add a run "
                  "past the engine's capacity")
    return q


def saturation_warning(sat: dict[str, Any]) -> str:
    """The warning under rows of a saturated run: which side did not keep up, and what to compare instead."""
    sides = sat["sides"]
    notes = "".join(f"\n  {escape(n)}" for n in sat["notes"])
    if sides == ["simulated"]:
        return ("WARNING: the simulated run is saturated where the measured run is not (why, below): the prediction "
                "has a queue that the measured run did not have, so its capacity is underestimated; its latency "
                "errors (⚠) are a real miss, not a queue to discount." + notes)
    which = f"the {sides[0]} run is" if len(sides) == 1 else f"the {' and the '.join(sides)} runs are"
    return (f"WARNING: {which} saturated (why, below): latency errors (⚠) measure the queue, not the engine, and are "
            f"not meaningful; throughput is the figure to compare." + notes)


def render_validation(r: RunValidation | SweepValidation, con: Console, verbose: bool = False) -> None:
    """Predicted vs measured, row by row, with the step cost's source (and which calibration scope priced it) and the
    80% band of the figures the run is judged on (``RunBands``), the sweep's paragraph under the table (``verbose``:
    every stage's notes whole, ``render_sweep``)."""
    from kvledger.calibration.in_sample import profile_words
    from kvledger.calibration.validate import SweepValidation

    if isinstance(r, SweepValidation):
        from kvledger.report.sweep_view import render_sweep

        render_sweep(r, con, verbose)
        return
    c = r.comparison
    con.print(f"run {escape(r.run)} ({escape(str(r.source))}): {c.num_measured:,} measured requests, "
              f"{c.num_predicted:,} finished in the replay; {escape(str(r.model))} on {escape(str(r.gpu))} "
              f"at TP {r.tp}" + (f" — IN-SAMPLE: the {profile_words(r.scope)} pricing it was fitted on this run"
                                 if r.in_sample else ""))
    con.print(step_cost_line(r))
    warned, rest = warnings_first(r.notes)
    for n in warned:  # what makes the comparison another run's, before its figures
        con.print(f"note: {escape(n)}")
    sat = r.saturated
    knee = knee_shown(r.at_knee, sat)
    b = r.error_bands
    t = Table(title="predicted vs measured (error = predicted/measured − 1)", title_justify="left")
    for col, just in (("metric", "left"), ("measured", "right"), ("predicted", "right"), ("error", "right"),
                      *((("80% band", "right"),) if b else ())):
        t.add_column(col, justify=just)
    shown_only = [row.metric.startswith(FILE_TPOT) for row in c.rows]
    big = latency_scale(c.rows)  # one unit for a latency's rows (TTFT mean to p99): its largest figure's
    for row, dagger in zip(c.rows, shown_only):
        t.add_row(escape(row.metric) + (" †" if dagger else ""), fmt_value(row.measured, row.unit, big.get(
                  row.metric, row.predicted)), fmt_value(row.predicted, row.unit, big.get(row.metric, row.measured)),
                  fmt_error(row.rel_error) + (" ⚠" if sat and row.unit == "s" else "")
                  + (f" {KNEE_MARK}" if knee and row.metric.startswith(("TTFT", "E2E")) else ""),
                  *([_band_cell(b, row)] if b else []))
    con.print(t)
    if any(shown_only):
        con.print(SHOWN_ONLY_LEGEND)
    if sat:
        con.print(saturation_warning(sat))
    if knee:
        con.print(escape(knee_warning(knee)))
    for line in _band_lines(b, c.rows) if b else []:
        con.print(f"[dim]{escape(line)}[/]")
    con.print(step_cost_source(r))
    for n in rest:
        con.print(f"note: {escape(n)}")


#: the legend of the rows marked † (``FILE_TPOT``): beside the TPOT judged, never judged themselves
SHOWN_ONLY_LEGEND = ("†: shown only, not judged — inference-perf's own time_per_output_token disagrees with the file's "
                     "TTFT, E2E and output length; the TPOT judged is the row \"TPOT mean\" (see the TPOT note below)")


#: the single-run table's rows that carry a band → the key of ``RunBands``
_BANDED = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean", "throughput": "saturation_throughput"}


def _band_cell(b: RunBands, row: Any) -> str:
    """A row's band (its span, ✓ when the measured figure lies inside, ✗ outside), "—" for a banded figure without
    one in this run, blank for a figure never banded."""
    key = _BANDED.get(row.metric)
    if key is None:
        return ""
    band = getattr(b, key)
    return band_span(band, row.unit) + band_mark(band, getattr(band, "measured", row.measured))


def _band_lines(b: RunBands, rows: list[Any]) -> list[str]:
    """Where the run's bands come from, which figures have none and why, the marks' legend, those never banded."""
    from kvledger.analyses.serving.prediction_bands import UNBANDED_REASON

    named = {"TTFT mean": b.ttft_mean, "TPOT mean": b.tpot_mean, "saturation throughput": b.saturation_throughput}
    out = [x for x in (biased_line(named), band_source_line(named, b.regime)) if x is not None]
    if b.latency_note:
        out.append(f"no TTFT or TPOT mean band: {b.latency_note}")
    if b.ttft_note:
        out.append(f"no TTFT mean band: {b.ttft_note}")
    if b.throughput_note:
        out.append(f"no throughput band: {b.throughput_note}")
    out.append(BAND_MARKS_NOTE)  # the band column shows: its marks said, whichever are printed
    out.append(f"percentiles, E2E and output throughput: {UNBANDED_REASON}")
    return out
