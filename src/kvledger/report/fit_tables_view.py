"""calibrate's tables of errors: each run's under a fit (``error_table``), the warnings under a table with saturated
runs, and a GPU profile's leave-one-out (each run's errors under the fractions fitted on the others, and the fractions
each fold found: ``calibration.gpu_loo``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from kvledger.calibration.saturation import measured_saturated
from kvledger.report.tables import LedgerTable as Table
from kvledger.report.validation_figures import fmt_error

__all__ = ["error_table", "saturated_runs_warning", "render_gpu_leave_one_out"]


def error_table(title: str, rows: list[dict[str, Any]], key: str) -> Table:
    t = Table(title=title, title_justify="left")
    t.add_column("run", no_wrap=True)
    for c in ("TTFT mean", "TTFT p90", "TPOT mean", "TPOT p90", "E2E mean", "throughput"):
        t.add_column(c, justify="right")
    for r in rows:
        flag = " ⚠" if r.get("saturated") else ""
        t.add_row(escape(str(r[key])), *(fmt_error(e) + (flag if k != "throughput" and e is not None else "")
                                         for k in ("ttft_mean", "ttft_p90", "tpot_mean", "tpot_p90", "e2e_mean",
                                                   "throughput") for e in (r.get(f"{k}_rel_error"),)))
    return t


def saturated_runs_warning(rows: list[dict[str, Any]], con: Console, key: str = "label", where: str = "",
                           fitted_by: str = "the fitted profile") -> None:
    """The warnings under a table whose rows (named by ``key``) include saturated runs (⚠), once each: runs measured
    saturated (their latency errors measure the queue), and runs only the prediction saturated (``fitted_by``, in
    words, predicts a queue the measured run did not have: a real miss); ``where``: which table, when not the fitted
    runs'."""
    sat = [r for r in rows if r.get("saturated")]
    measured = [str(r[key]) for r in sat if measured_saturated(r["saturated"])]
    predicted = [str(r[key]) for r in sat if not measured_saturated(r["saturated"])]
    if measured:
        con.print(f"WARNING: saturated run(s){where} (⚠: a queue that kept growing, or a stage whose client fell "
                  f"behind its rate): {escape(', '.join(measured))}; their "
                  "latency errors measure the queue, not the engine, and are not meaningful; throughput is the "
                  "figure to compare.")
    if predicted:
        con.print(f"WARNING: the prediction saturates where the measured run did not (⚠), for run(s){where}: "
                  f"{escape(', '.join(predicted))}; {fitted_by} predicts a queue that the measured run did not "
                  "have: its capacity is underestimated, and these latency errors are a real miss, not a queue to "
                  "discount.")


def render_gpu_leave_one_out(p: dict[str, Any], con: Console) -> None:
    """A GPU profile's leave-one-out errors (``calibration.gpu_loo``), or why there are none (one run); nothing when
    it was not asked for (--no-leave-one-out)."""
    if "leave_one_out" not in p:
        return
    loo = p["leave_one_out"]
    if not loo:
        con.print("leave-one-out: none — it needs two runs or more (each priced by a fit on the others); one was given")
        return
    con.print(error_table("leave-one-out: each run under the fractions fitted on the others (a prediction's error)",
                          loo, "run"))
    saturated_runs_warning(loo, con, "run", " left out", "the profile fitted without it")
    links = any(r.get("allreduce_link_share") is not None for r in loo)
    con.print("fractions fitted without each run: " + "; ".join(
        f"{escape(str(r['run']))} {r['flops_fraction']:.3f}/{r['bandwidth_fraction']:.3f}"
        + (("" if r.get("allreduce_link_share") is None else f", link share {r['allreduce_link_share']:.3f}")
           if links else "") for r in loo)
        + " (FLOP/s / bandwidth" + (", the TP all-reduce's share of the PCIe link where fitted; the others at the "
                                    "default rule" if links else "") + ")")
