"""A run's p90 of each SLO metric as the load checks (``capacity_basis.check_load``) judge it, and its words.

From per-request records the p90 is exact. A file of aggregates states only some percentiles, so its p90 is bounded
by the stated ones: the smallest stated percentile ≥ 90 (else the maximum) is at least the p90, the largest stated
percentile ≤ 90 (else the minimum) at most it. Each load check takes the side that keeps its warning sound: the
under-load test ("p90 ≤ half the limit") the upper one, the over-load test ("p90 ≥ twice the limit") the lower one.
A TPOT derived as (E2E − TTFT)/(output − 1) (``ledgers.tpot_derived``) has its own two bounds, taken the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.columns import columns_from
from kvledger.ledgers.goodput import metric_values
from kvledger.ledgers.slo import SLO
from kvledger.ledgers.tpot_derived import derived_tpot_percentile, tpot_derivation
from kvledger.records import RunRecords

__all__ = ["p90_records", "p90_aggregate", "stand_in", "derived_tpot", "p90_words"]


def p90_records(run: RunRecords, slo: SLO) -> dict[str, float | None]:
    """Each constrained metric's p90 over the completed requests, s (None where no request has it)."""
    cols = columns_from(run, with_chunks=slo.itl_s is not None)
    out = {}
    for metric, v in metric_values(cols, slo).items():
        vals = v[cols.ok & ~np.isnan(v)]
        out[metric] = float(np.percentile(vals, 90)) if vals.size else None
    return out


def p90_aggregate(run: AggregateRun, slo: SLO, *, upper: bool = True) -> dict[str, float | None]:
    """Each constrained metric's p90 from the file's points, s: its upper bound (``upper``, the under-load test) or its
    lower bound (the over-load test), as :func:`stand_in` and a derived TPOT's bounds give them (module docstring)."""
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
        out[metric] = stand_in(m, upper=upper)[0]
    return out


def stand_in(m: Any, *, upper: bool = True) -> tuple[float | None, str]:
    """(the value standing in for an aggregate metric's p90, s; the statistic it is, e.g. "p99"): ``upper``, the
    smallest stated percentile ≥ 90, else the maximum; else the largest stated percentile ≤ 90, else the minimum;
    (None, "") when the file states neither."""
    if upper:
        side = sorted((p, v) for p, v in m.percentiles_s.items() if p >= 90.0)
        end = (m.max_s, "max")
    else:
        side = sorted(((p, v) for p, v in m.percentiles_s.items() if p <= 90.0), reverse=True)
        end = (m.min_s, "min")
    if side:
        return side[0][1], f"p{side[0][0]:g}"
    return end if end[0] is not None else (None, "")


def derived_tpot(run: RunRecords | AggregateRun, slo: SLO, metric: str) -> dict[str, Any] | None:
    """The TPOT derivation when ``metric`` of this run is judged as (E2E − TTFT)/(output − 1), else None."""
    if metric != "tpot" or slo.tpot_s is None or not isinstance(run, AggregateRun):
        return None
    return tpot_derivation(run)


_SIDE_WORDS = {(True, False): "smallest percentile ≥ p90", (True, True): "maximum: it states no percentile ≥ p90",
               (False, False): "largest percentile ≤ p90", (False, True): "minimum: it states no percentile ≤ p90"}


def p90_words(run: RunRecords | AggregateRun, slo: SLO, metric: str, name: str, *, upper: bool) -> str:
    """``TTFT p90``; for a file without its p90 the statistic that stands in for it, ``TTFT p99 (the file's smallest
    percentile ≥ p90, standing in for p90)`` (``upper``) or ``TTFT p50 (the file's largest percentile ≤ p90: its p90
    is at least this)``; ``TPOT p90 (E2E − TTFT)/(output − 1) at most`` for a derived TPOT's bound."""
    if derived_tpot(run, slo, metric) is None:
        stat = (stand_in(run.metrics[metric], upper=upper)[1] if isinstance(run, AggregateRun)
                and metric in run.metrics else "p90")
        if stat in ("p90", ""):
            return f"{name.upper()} p90"
        side = _SIDE_WORDS[upper, stat in ("max", "min")]
        return f"{name.upper()} {stat} (the file's {side}" + (", standing in for p90)" if upper else
                                                               ": its p90 is at least this)")
    return f"{name.upper()} p90 (E2E − TTFT)/(output − 1) {'at most' if upper else 'at least'}"
