"""The per-stage table of ``kvledger validate --sweep`` (``SweepValidation``): measured and simulated mean TTFT,
TPOT and throughput, the errors and the 80% band of the simulated latency, one row a stage — one table where it fits
the terminal, else one table a metric."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.report.knee_view import KNEE_MARK, knee_shown
from kvledger.report.tables import LedgerTable as Table
from kvledger.report.validation_figures import band_mark, band_span, fmt_error, fmt_rate, fmt_value

if TYPE_CHECKING:
    from kvledger.calibration.validate import SweepValidation

__all__ = ["LATENCY", "axis_unit", "column_tops", "head", "levels", "sweep_tables"]


LATENCY = {"TTFT mean": "ttft_mean", "TPOT mean": "tpot_mean"}  # table row → key of SweepBands


def _mark(r: SweepValidation, i: int, key: str) -> str:
    """" ✓" / " ✗" when stage ``i``'s measured ``key`` (a ``LATENCY`` value) lies inside / outside its band, ""
    without one (``band_mark``)."""
    band = getattr(r.bands, key)[i] if r.bands is not None else None
    metric = next(m for m, k in LATENCY.items() if k == key)
    row = next((x for x in r.runs[i].comparison.rows if x.metric == metric), None)
    return band_mark(band, getattr(band, "measured", row.measured if row is not None else None))


def levels(r: SweepValidation) -> list[str]:
    """Each stage's place on the sweep's axis as the table prints it: its requested rate, or its clients."""
    return [fmt_rate(x) for x in r.rates] if r.clients is None else [f"{c:,}" for c in r.clients]


def axis_unit(r: SweepValidation) -> str:
    return "req/s" if r.clients is None else "clients"


def head(metric: str) -> str:
    """A column's words for a comparison row: "TTFT p50" → "TTFT median"."""
    return metric.replace(" p50", " median")


def column_tops(r: SweepValidation, shown: list[str]) -> dict[str, float]:
    """The largest figure of each latency column of the table (``shown``: its measured columns, by metric; a band's
    column, by its ``LATENCY`` key, its bands' ends and its metric's figures), so that each column prints in one
    unit, and a band in the unit of the figures beside it (``fmt_value``)."""
    out: dict[str, float] = {}
    for m in shown:
        vals = [abs(v) for run in r.runs for x in run.comparison.rows if x.metric == m
                for v in (x.measured, x.predicted) if v]
        out[m] = max(vals, default=0.0)
    for metric, key in LATENCY.items():  # a band in its figures' unit: 0.0128–0.0504 s beside 0.0271 s, not in ms
        bands = [x for x in (getattr(r.bands, key) if r.bands is not None else []) if x is not None]
        out[key] = max((max(abs(x.low), abs(x.high)) for x in bands), default=0.0)
        out[key] = max(out[key], out.get(metric, 0.0))
    return out


def _cells(r: SweepValidation, i: int, m: str, shown: list[str], top: dict[str, float]) -> list[str]:
    """Stage ``i``'s cells for metric ``m``: measured, simulated, error (with its ⚠/knee marks) and, for a latency,
    the 80% band with its ✓/✗ ("—" for a median, which has no band)."""
    x = r.runs[i]
    row, key = next((y for y in x.comparison.rows if y.metric == m), None), LATENCY.get(m)
    flag = (" ⚠" if x.saturated and m != "throughput" else "") + \
        (f" {KNEE_MARK}" if m == shown[0] and knee_shown(x.at_knee, x.saturated) else "")
    cells = [fmt_value(row.measured if row else None, row.unit if row else "s", top.get(m)),
             fmt_value(row.predicted if row else None, row.unit if row else "s", top.get(m)),
             fmt_error(row.rel_error if row else None) + flag]
    if m != "throughput":
        b = r.bands
        cells.append("—" if key is None else band_span(getattr(b, key)[i] if b is not None else None, "s",
                                                       top.get(key)) + _mark(r, i, key))
    return cells


def _fit_column(r: SweepValidation) -> list[str]:
    return ["IN-SAMPLE: fitted on it" if x.in_sample else "held out" for x in r.runs]


def _title(r: SweepValidation, what: str) -> str:
    return (f"{what} (priced by: {r.scope}; meas.: measured, pred.: simulated; 80% band: where the measured mean "
            "fell around the simulated one)")


def _table(r: SweepValidation, fitted: int) -> Table:
    """Every stage on one row: the axis, then each metric's measured, simulated, error (and band for a latency)."""
    shown = [m or default for m, default in zip(r.compared_latency, LATENCY)]  # a median where no mean is stated
    t = Table(title=_title(r, "load sweep"), title_justify="left")
    for col in ("rate req/s" if r.clients is None else "clients", f"{head(shown[0])} meas.", "pred.", "error",
                "80% band", f"{head(shown[1])} meas.", "pred.", "error", "80% band", "throughput", "pred.", "error"):
        t.add_column(col, justify="right")
    if fitted:
        t.add_column("GPU profile", justify="left")
    top = column_tops(r, shown)  # one unit a column: its largest figure's
    for i, level in enumerate(levels(r)):
        cells = [level] + [c for m in (*shown, "throughput") for c in _cells(r, i, m, shown, top)]
        t.add_row(*cells, *([_fit_column(r)[i]] if fitted else []))
    return t


def _metric_table(r: SweepValidation, fitted: int, m: str, shown: list[str], top: dict[str, float]) -> Table:
    """One metric's table: a stage a row, its measured, simulated and error figures (and band for a latency)."""
    what = "throughput" if m == "throughput" else head(m)
    t = Table(title=_title(r, f"load sweep, {what}") if m == shown[0] else f"load sweep, {what}",
              title_justify="left")
    for col in ("rate req/s" if r.clients is None else "clients", f"{what} meas.", "pred.", "error",
                *(["80% band"] if m != "throughput" else [])):
        t.add_column(col, justify="right")
    if fitted:
        t.add_column("GPU profile", justify="left")
    for i, level in enumerate(levels(r)):
        t.add_row(level, *_cells(r, i, m, shown, top), *([_fit_column(r)[i]] if fitted else []))
    return t


def sweep_tables(r: SweepValidation, fitted: int, width: int) -> list[Table]:
    """The sweep's table as one row per stage where it fits ``width`` columns; else one table per metric (TTFT,
    TPOT, throughput), each a stage a row, rather than every stage's twelve figures stacked one per line."""
    wide = _table(r, fitted)
    if wide.fits(width):
        return [wide]
    shown = [m or default for m, default in zip(r.compared_latency, LATENCY)]
    top = column_tops(r, shown)
    return [_metric_table(r, fitted, m, shown, top) for m in (*shown, "throughput")]
