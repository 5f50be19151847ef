"""Whether a compared run was saturated, so that its latency errors measure the queue rather than the engine."""

from __future__ import annotations

from typing import Any

__all__ = ["saturation"]


def saturation(measured: Any, simulated: Any) -> dict[str, Any] | None:
    """Whether either side of a compared run was at or past saturation — its backlog kept growing while requests
    arrived (``kvledger.analyses.serving.queue_growth``) — and which; None when neither was. Then TTFT/E2E measure
    the queue, not the engine, and throughput is the figure to compare."""
    from kvledger.analyses.serving.notes import OVERLOAD_ADVICE_MEASURED
    from kvledger.analyses.serving.queue_growth import queue_growth

    sides = {name: queue_growth(run, OVERLOAD_ADVICE_MEASURED)
             for name, run in (("measured", measured), ("simulated", simulated))
             if run is not None and len(run.records) > 0}
    grew = {name: g for name, g in sides.items() if g is not None}
    if not grew:
        return None
    return {"sides": sorted(grew), "notes": [f"{name}: {g.note}" for name, g in sorted(grew.items())]}
