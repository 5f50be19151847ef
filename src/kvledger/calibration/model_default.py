"""A model-scope fit against the step cost it started from (the uncalibrated default, unless ``--step-cost`` named
another): the mean |error| of each headline metric over the runs it was fitted on, under the fit and under the
default, and the metrics where the fit does worse. ``calibrate --scope gpu`` compares its objective so
(``calibration.gpu_fit.default_objective``); a model fit is compared metric by metric, since its objective's start is
the default's linear projection, not the default itself.
"""

from __future__ import annotations

from typing import Any

__all__ = ["against_default", "COMPARED", "WORSE_BY"]

#: the metrics compared: (key in the runs' rows, label)
COMPARED = (("ttft_mean", "TTFT mean"), ("tpot_mean", "TPOT mean"), ("throughput", "throughput"))
#: the fit is "worse" on a metric when its mean |error| passes the default's by more than this (points of error)
WORSE_BY = 0.01


def _mean_abs(rows: list[dict[str, Any]], key: str) -> float | None:
    vals = [abs(v) for r in rows if isinstance(v := r.get(f"{key}_rel_error"), (int, float))]
    return sum(vals) / len(vals) if vals else None


def against_default(fitted: list[dict[str, Any]], default: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``{"metrics": {label: {"fitted": mean |error|, "default": mean |error|}}, "worse": [labels], "runs": default}``
    from the fitted runs' rows and the same runs' rows under the default (``calibrate_runs``' ``default_runs``, kept
    as "runs"); None without them."""
    if not fitted or not default:
        return None
    metrics, worse = {}, []
    for key, label in COMPARED:
        f, d = _mean_abs(fitted, key), _mean_abs(default, key)
        if f is None or d is None:
            continue
        metrics[label] = {"fitted": f, "default": d}
        if f > d + WORSE_BY:
            worse.append(label)
    return {"metrics": metrics, "worse": worse, "runs": default} if metrics else None
