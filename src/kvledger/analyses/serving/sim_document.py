"""The typed records of one simulation that cross into the CLI, the ledgers' JSON and the views.

``SimDocument`` is what ``kvledger simulate`` reports (``sim_ledgers.simulate_document``; its ``to_dict`` is
``simulate --json`` and ``summary.json``; ``kvledger.report.simulate_view.render_summary`` draws it).
``SimProvenance`` (with its ``PlanFigures``) says what a simulated run was: the ``simulation`` section of
``goodput --simulate``, ``cost --simulate`` and the capacity search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.jsonable import to_jsonable

if TYPE_CHECKING:
    from kvledger.analyses.serving.prediction_bands import PredictionBand

__all__ = ["SimDocument", "PlanFigures", "SimProvenance"]


@dataclass(frozen=True)
class PlanFigures:
    """The memory-plan figures that sized each replica's KV pool (``kvledger plan`` shows them term by term).

    Attributes:
        engine, engine_version: the engine and the version whose rules the plan applied.
        kv_bytes_per_token: KV bytes per token of the model, B. available_kv_bytes: the KV pool per GPU, B.
        num_gpu_blocks, block_size: the pool in blocks of ``block_size`` tokens.
        max_model_len, max_num_batched_tokens, max_num_seqs: the engine limits the plan settled on.
        source: the function that made the plan.
    """

    engine: str
    engine_version: str
    kv_bytes_per_token: float
    available_kv_bytes: float
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    source: str = "kvledger.accounting.plan.build_plan (the KV-cache ledger)"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class SimProvenance:
    """What a simulated run was: simulator and rule, model, GPUs, engine settings, step cost, plan and workload.

    Attributes:
        simulator: the simulator and the scheduling rule it ran. model, gpu, gpu_id: the names simulated.
        tp, replicas, router, num_gpus: the deployment unit (router None for one replica).
        engine: the engine settings (``EngineConfig``'s fields); step_cost: the step-cost model's name and source.
        plan: the plan figures of each replica; workload: the workload description and its seed.
        notes: what the reader should know about the run.
    """

    simulator: str
    model: str
    gpu: str
    gpu_id: str
    tp: int
    replicas: int
    router: str | None
    num_gpus: int
    engine: dict[str, Any]
    step_cost: dict[str, Any]
    plan: PlanFigures
    workload: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


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
        error_bands: the prediction bands of the headline figures (``prediction_bands``); ``band_coverage`` (a
            property, in the JSON) names the figures with no validated band, each null, and why.
        notes: what the reader should know about the run.
    """

    __json__ = ("summary", "replicas", "router", "engine", "workload", "step_cost", "overload", "error_bands",
                "band_coverage", "notes")
    summary: dict[str, Any]
    replicas: int
    router: str | None
    engine: dict[str, Any]
    workload: dict[str, Any]
    step_cost: dict[str, Any]
    overload: Any = None
    error_bands: dict[str, PredictionBand] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def kept_up(self) -> bool:
        """An open loop whose queue did not grow: its latency figures are for a load the deployment sustains."""
        return str(self.workload.get("mode", "")).startswith("open loop") and not self.overload

    @property
    def band_coverage(self) -> dict[str, Any]:
        """The banded figures, the unbanded ones (each null) and why (``prediction_bands.band_coverage``)."""
        from kvledger.analyses.serving.prediction_bands import band_coverage

        return band_coverage(self.error_bands, self.kept_up)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
