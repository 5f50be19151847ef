"""The benchmark runs given to ``kvledger report --bench``: offered rate, attainment, goodput and latency percentiles
of each, on the simulation's definitions (drawn beside the simulated points of decision_data)."""

from __future__ import annotations

from typing import Any

__all__ = ["measured_rows"]


def measured_rows(bench_files: tuple[str, ...], slo: Any) -> list[dict[str, Any]]:
    """Each benchmark run given: its offered rate, attainment, goodput and latency percentiles (same definitions as the
    simulator)."""
    import numpy as np

    from kvledger.evidence import read_runs
    from kvledger.ledgers.columns import columns_from
    from kvledger.ledgers.goodput import goodput
    from kvledger.records import RunRecords

    out = []
    for path in bench_files:
        for run in read_runs(path):
            gp = goodput(run, slo)
            row = {"file": str(path), "label": run.metadata.extra.get("run_label"),
                   "rate_req_per_s": run.metadata.request_rate,
                   "concurrency": run.metadata.concurrency, "attainment": gp.attainment,
                       "goodput_req_per_s": gp.goodput_req_per_s,
                   "throughput_req_per_s": gp.throughput_req_per_s, "estimate": gp.estimate}
            if isinstance(run, RunRecords):
                cols = columns_from(run)
                for name, v in (("ttft_s", cols.ttft_s()), ("tpot_s", cols.tpot_s())):
                    v = v[cols.ok & ~np.isnan(v)]
                    row[name] = {f"p{q}": float(np.percentile(v, q)) for q in (50, 90, 99)} if v.size else None
            else:  # percentiles as the file states them (per-request distributions only)
                for name, metric in (("ttft_s", "ttft"), ("tpot_s", "tpot")):
                    ms = run.metrics.get(metric)
                    got = {} if ms is None or ms.weighting != "request" else ms.percentiles_s
                    row[name] = {f"p{q}": got[float(q)] for q in (50, 90, 99)} if all(float(q) in got for q in (50, 90,
                        99)) else None
            out.append(row)
    return out
