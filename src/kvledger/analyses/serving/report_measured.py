"""The benchmark runs given to ``kvledger report --bench``: offered rate, attainment, goodput and latency percentiles
of each, on the simulation's definitions (drawn beside the simulated points of decision_data).

A file whose own TPOT field is not to be trusted (inference-perf's ``time_per_output_token``:
``ledgers/tpot_derived.py``) gives no ``tpot_s``: its row carries the bounds on the derived TPOT's percentiles,
(E2E − TTFT)/(output − 1), the ones goodput and the cost ledger's load check read (``derived_tpot_percentile``), as
``tpot_derived_s`` ``{"p50": [low, high], …}`` (s; null where the file's points cannot bound it), and the same note
(``derived_tpot_note``) in ``notes``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["measured_rows", "QUANTILES"]

QUANTILES = (50, 90, 99)  # the percentiles of each row


def measured_rows(bench_files: tuple[str, ...], slo: Any) -> list[dict[str, Any]]:
    """Each benchmark run given: its offered rate, attainment, goodput and latency percentiles (same definitions as the
    simulator), and its ``notes``."""
    from kvledger.evidence import read_runs
    from kvledger.ledgers.goodput import goodput

    out = []
    for path in bench_files:
        for run in read_runs(path):
            gp = goodput(run, slo)
            row = {"file": str(path), "label": run.metadata.extra.get("run_label"),
                   "rate_req_per_s": run.metadata.request_rate,
                   "concurrency": run.metadata.concurrency, "attainment": gp.attainment,
                   "goodput_req_per_s": gp.goodput_req_per_s,
                   "throughput_req_per_s": gp.throughput_req_per_s, "estimate": gp.estimate}
            row.update(_latencies(run))
            out.append(row)
    return out


def _latencies(run: Any) -> dict[str, Any]:
    """``ttft_s`` and ``tpot_s`` percentiles, or for a derived TPOT ``tpot_s`` None with ``tpot_derived_s`` and
    ``notes`` (module doc)."""
    import numpy as np

    from kvledger.ledgers.columns import columns_from
    from kvledger.ledgers.tpot_derived import derived_tpot_note, derived_tpot_percentile, tpot_derivation
    from kvledger.records import RunRecords

    row: dict[str, Any] = {}
    if isinstance(run, RunRecords):
        cols = columns_from(run)
        for name, v in (("ttft_s", cols.ttft_s()), ("tpot_s", cols.tpot_s())):
            v = v[cols.ok & ~np.isnan(v)]
            row[name] = {f"p{q}": float(np.percentile(v, q)) for q in QUANTILES} if v.size else None
        return row
    for name, metric in (("ttft_s", "ttft"), ("tpot_s", "tpot")):  # as the file states them (per-request only)
        ms = run.metrics.get(metric)
        got = {} if ms is None or ms.weighting != "request" else ms.percentiles_s
        row[name] = {f"p{q}": got[float(q)] for q in QUANTILES} if all(float(q) in got for q in QUANTILES) else None
    derived = tpot_derivation(run)
    if derived is not None:  # the file's own TPOT is shown nowhere as a percentile: it disagrees with its E2E and TTFT
        n = run.num_completed or 0
        row["tpot_s"] = None
        row["tpot_derived_s"] = {f"p{q}": list(derived_tpot_percentile(run, derived, float(q), n)) for q in QUANTILES}
        row["notes"] = [derived_tpot_note(run, derived)]
    return row
