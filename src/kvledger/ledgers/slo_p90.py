"""The p90 of each metric an SLO constrains, from per-request records or from an aggregate file's stated points: what
``capacity_basis``'s under- and over-load rules judge (moved out of it whole; see its docstring for the rules)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.columns import columns_from
from kvledger.ledgers.goodput import metric_values
from kvledger.ledgers.slo import SLO
from kvledger.ledgers.tpot_derived import derived_tpot_percentile, tpot_derivation
from kvledger.records import RunRecords

__all__ = ["p90_aggregate", "p90_records", "stand_in"]


def p90_records(run: RunRecords, slo: SLO) -> dict[str, float | None]:
    """Each constrained metric's p90 over the run's completed requests, s (None where no request has it)."""
    cols = columns_from(run, with_chunks=slo.itl_s is not None)
    out = {}
    for metric, v in metric_values(cols, slo).items():
        vals = v[cols.ok & ~np.isnan(v)]
        out[metric] = float(np.percentile(vals, 90)) if vals.size else None
    return out


def p90_aggregate(run: AggregateRun, slo: SLO, *, upper: bool = True) -> dict[str, float | None]:
    """Each constrained metric's p90 from the file's points: the smallest stated percentile ≥ 90 (module docstring);
    a derived TPOT's upper bound (``upper``, the under-load test) or lower bound (the over-load test)."""
    out: dict[str, float | None] = {}
    derived = tpot_derivation(run)
    for metric, _ in slo.constraints():
        if metric == "tpot" and derived is not None:
            bounds = derived_tpot_percentile(run, derived, 90.0, run.num_completed or 0)
            out[metric] = bounds[1] if upper else bounds[0]
            continue
        m = run.metrics.get(metric)
        if m is None or m.weighting != "request" or (metric == "itl"):
            out[metric] = None  # pooled gaps say nothing about a request's own statistic
            continue
        out[metric] = stand_in(m)[0]
    return out


def stand_in(m: Any) -> tuple[float | None, str]:
    """(the value standing in for an aggregate metric's p90, the statistic it is): the smallest stated percentile ≥ 90
    (module docstring), else the maximum; (None, "") when the file states neither."""
    above = sorted((p, v) for p, v in m.percentiles_s.items() if p >= 90.0)
    if above:
        return above[0][1], f"p{above[0][0]:g}"
    return (m.max_s, "max") if m.max_s is not None else (None, "")
