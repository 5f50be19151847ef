"""Which arrival times an open-loop replay used, in words (the workload line of a simulated run, sim_setup.py)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["arrivals_words"]


def arrivals_words(a: Any) -> str:
    """Which arrival times an open-loop replay of ``a.trace`` used (the rules of ``traces.load_trace``)."""
    from kvledger.dynamics.workload.traces import trace_has_arrivals  # lazy, as the workload readers are

    if a.rate is not None and math.isinf(a.rate):
        return "every request at t = 0"
    if not trace_has_arrivals(a.trace):
        return f"Poisson arrivals at {a.rate:g} req/s drawn with seed {a.seed}; the trace has no arrival times"
    if a.rate is not None:
        return f"trace arrival times rescaled to a mean of {a.rate:g} req/s, burstiness kept"
    if a.rate_scale is not None:
        return f"trace arrival times, rate ×{a.rate_scale:g}"
    return "trace arrival times"
