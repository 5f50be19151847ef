"""A benchmark's aggregate-only run as a load stage (``kvledger.calibration.sweep.Stage``): what ``validate`` and
``calibrate`` compare rate by rate when a vLLM or SGLang ``bench_serving`` file keeps no per-request times."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.calibration.sweep import Stage
from kvledger.errors import FormatError

__all__ = ["aggregate_stage"]


def aggregate_stage(agg: Any, label: str) -> Stage:
    """A benchmark's aggregate-only run (``kvledger.evidence.aggregate.AggregateRun``: vLLM or SGLang ``bench_serving``
    without per-request details) as a stage: its request rate, request count (completed + failed), the send time
    they imply at that rate (count / rate), its TTFT/TPOT/E2E summaries (and ITL's where it states one: SGLang's
    ``bench_serving`` keeps only a median ITL and no TPOT), and lengths uniform in SGLang's
    ``random_input_len·random_range_ratio … random_input_len`` when the run states them, else fixed at its means.

    Raises:
        FormatError: no finite request rate, no completed count or no token totals (nothing to rebuild the load from).
    """
    meta = agg.metadata
    rate, done = meta.request_rate, agg.num_completed
    if rate is None or not np.isfinite(rate) or rate <= 0 or not done or not agg.total_input_tokens \
            or not agg.total_output_tokens:
        raise FormatError(meta.source, f"{label}: an aggregate run needs a finite request rate, a completed count "
                                       "and token totals to be compared by rate")
    failed = agg.num_failed or 0
    stated_ratio = meta.extra.get("random_range_ratio")  # 0.0 is a ratio (lengths from 1), not a missing one
    ratio = 1.0 if stated_ratio is None else float(stated_ratio)

    def lengths(stated: str, mean: float) -> list[tuple[float, float]]:
        top = meta.extra.get(stated)
        if isinstance(top, (int, float)) and top > 0 and ratio < 1.0:
            return [(0.0, max(1.0, top * ratio)), (1.0, float(top))]
        return [(0.0, mean), (1.0, mean)]

    stats: dict[str, dict[str, float | None]] = {}
    for m in ("ttft", "tpot", "e2e", "itl"):
        ms = agg.metrics.get(m)
        if m == "itl" and ms is None:
            continue
        pct = ms.percentiles_s if ms is not None else {}
        stats[m] = {"mean": None if ms is None else ms.mean_s, "p50": pct.get(50.0), "p90": pct.get(90.0),
                    "p99": pct.get(99.0)}
    dur = meta.duration_s or (done + failed) / rate
    return Stage(meta.source, float(rate), done + failed, (done + failed) / rate, stats,
                 lengths("random_input_len", agg.total_input_tokens / done),
                 lengths("random_output_len", agg.total_output_tokens / done),
                 float(meta.extra.get("request_throughput") or done / dur),
                 float(meta.extra.get("output_throughput") or agg.total_output_tokens / dur), failed, float(rate),
                 meta.extra.get("backend") if isinstance(meta.extra.get("backend"), str) else None)
