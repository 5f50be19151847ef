"""A per-request run whose file states a duration of 0 (or less): its throughput, n / duration, cannot be read off
that figure, and judged as it stands it reads "0.00 req/s", outside any band. ``validate`` compares such a run's
throughput over the span of its own per-request timestamps (first send to last finish) where the file keeps send
times, and says so; where it keeps none (every request at t = 0), the throughput is left unjudged, with a note. The
reader is left as it is: this is validate's comparison only."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.calibration.compare import Comparison, compare_runs
from kvledger.records import RunRecords

__all__ = ["compare_timed"]

_RATES = ("throughput", "output throughput")  # the comparison rows divided by the run's duration


def _timed(run: RunRecords) -> bool:
    """Whether the file's requests carry send times on one clock (its reader names their origin: ``time_origin``; not
    the times ``send_times`` draws for a file without them) and finish times, over a span longer than 0."""
    md = run.metadata
    if md.time_origin is None or md.extra.get("shared_clock") is False or len(run.records) < 2:
        return False
    return replace(run, metadata=replace(md, duration_s=None)).duration_s > 0


def compare_timed(label: str, measured: RunRecords, predicted: RunRecords, slo: Any) -> Comparison:
    """``compare_runs``, with a stated duration ≤ 0 replaced by the span of the per-request timestamps where the
    file has them (a note says so), else the throughput rows' measured side left out (unjudged, a note says why)."""
    stated = measured.metadata.duration_s
    if stated is None or stated > 0:
        return compare_runs(label, measured, predicted, slo)
    if _timed(measured):
        spanned = replace(measured, metadata=replace(measured.metadata, duration_s=None))
        c = compare_runs(label, spanned, predicted, slo)
        return replace(c, notes=[*c.notes, f"throughput: the file states a duration of {stated:g} s; the measured "
                                 f"throughput is read over its per-request timestamps instead, first send to last "
                                 f"finish: {spanned.duration_s:.1f} s"])
    c = compare_runs(label, measured, predicted, slo)
    rows = [replace(r, measured=None, rel_error=None) if r.metric in _RATES else r for r in c.rows]
    return replace(c, rows=rows, notes=[*c.notes, f"throughput not judged: the file states a duration of {stated:g} s "
                                        "and keeps no per-request send times, so the run's throughput cannot be read "
                                        "from it"])
