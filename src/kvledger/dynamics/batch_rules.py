"""What a replica's engine settings mean for its step loop, as one read-only view (``Replica.rules``; fast/ reads
it)."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.dynamics.engine.config import EngineConfig

__all__ = ["BatchRules"]


@dataclass(frozen=True, slots=True)
class BatchRules:
    """What a replica's engine settings mean for its step loop (read by the fast paths, fast/).

    Attributes:
        static: static batching (a batch runs to its end before the next is formed).
        mixed: vLLM v1 continuous batching: an arrival joins the running requests' step.
        v0: vLLM V0's prefill-first rule (scheduler.py).
        padded: V0 0.2.x prompt steps priced on the padded batch (``max_paddings`` set).
        async_scheduling: vLLM v1's batch queue of two (module doc).
        pauses_decodes: SGLang's prefill-first rule: a prefill step leaves the running requests out, each still one
            token behind (decode-ready) after it.
    """

    static: bool
    mixed: bool
    v0: bool
    padded: bool
    async_scheduling: bool
    pauses_decodes: bool

    @classmethod
    def of(cls, cfg: EngineConfig) -> BatchRules:
        return cls(cfg.batching == "static", cfg.batching == "continuous", cfg.batching == "vllm_v0",
                   cfg.max_paddings is not None, cfg.async_scheduling, cfg.batching == "sglang")
