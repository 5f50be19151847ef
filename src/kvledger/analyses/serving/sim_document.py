"""``SimDocument``: what ``kvledger simulate`` reports, one typed record between the analyses and the view.

Built by ``kvledger.analyses.serving.sim_ledgers.simulate_document``; ``to_dict`` is ``simulate --json`` and
``summary.json``; ``kvledger.report.simulate_view.render_summary`` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["SimDocument"]


@dataclass(frozen=True)
class SimDocument:
    """One simulation's report, in the order ``--json`` writes it.

    Attributes:
        summary: the simulator's summary (latency statistics, throughput, KV usage, cache, preemptions), invariants
            checked (``kvledger.invariants.check_sim_summary``).
        replicas: engine replicas simulated; router: their router (None for one replica).
        engine: the engine settings run (``EngineConfig``'s fields); workload: the trace or synthetic workload and its
            means; step_cost: the step-cost model's name and source.
        overload: an open loop's queue growth (``kvledger.analyses.serving.queue_growth``), None when it kept up or
            the loop was closed.
        error_bands: the prediction bands of the headline figures (``prediction_bands``).
        notes: what the reader should know about the run.
    """

    summary: dict[str, Any]
    replicas: int
    router: str | None
    engine: dict[str, Any]
    workload: dict[str, Any]
    step_cost: dict[str, Any]
    overload: Any = None
    error_bands: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def kept_up(self) -> bool:
        """An open loop whose queue did not grow: its latency figures are for a load the deployment sustains."""
        return str(self.workload.get("mode", "")).startswith("open loop") and not self.overload

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
