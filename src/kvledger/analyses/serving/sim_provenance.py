"""What a simulated run was (``SimProvenance``, with the memory-plan figures that sized it, ``PlanFigures``): the
``simulation`` section of ``goodput --simulate``, ``cost --simulate`` and the capacity search
(``sim_ledgers.SimulatedRun.provenance``). Apart from ``sim_document`` so that ``simulate`` does not make them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["PlanFigures", "SimProvenance"]


@dataclass(frozen=True)
class PlanFigures:
    """The memory-plan figures that sized each replica's KV pool (``kvledger plan`` shows them term by term).

    Attributes:
        engine, engine_version: the engine and the version whose rules the plan applied.
        kv_bytes_per_token_per_gpu: KV bytes per token on each GPU, B (the model's ÷ TP where the KV heads split, as
            ``plan --json``'s ``kv.bytes_per_token_per_gpu`` and ``search``'s ``plan.kv_bytes_per_token_per_gpu``).
        available_kv_bytes: the KV pool per GPU, B.
        num_gpu_blocks, block_size: the pool in blocks of ``block_size`` tokens.
        max_model_len, max_num_batched_tokens, max_num_seqs: the engine limits the plan settled on.
        source: the function that made the plan.
    """

    engine: str
    engine_version: str
    kv_bytes_per_token_per_gpu: float
    available_kv_bytes: float
    num_gpu_blocks: int
    block_size: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    source: str = "kvledger.accounting.plan.build_plan (the KV-cache ledger)"

    @classmethod
    def of(cls, plan: Any) -> PlanFigures:
        """The figures of a memory plan; its source names ``--quantization`` where the plan loaded FP8 weights."""
        from kvledger.analyses.serving.online_quant import weights_words

        m, words = plan.memory, weights_words(plan)
        return cls(m.engine, m.engine_version, plan.kv.bytes_per_token, m.available_kv_bytes, m.num_gpu_blocks,
                   m.block_size, m.max_model_len, m.max_num_batched_tokens, m.max_num_seqs,
                   *([f"{cls.source}; {words}"] if words else []))

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
