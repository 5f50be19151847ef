"""The advice records: one fix and its effect (``Option``), and the verdict with its fixes (``Advice``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.units import GiB

__all__ = ["Option", "Advice"]


@dataclass(frozen=True)
class Option:
    """One fix and its effect: the engine's concurrency figure and whole requests of ``context_tokens`` (the
    max_model_len it leaves)."""

    __json_optional__ = ("decode_requests", "ranks")
    action: str
    max_concurrency: float
    max_requests: int
    detail: str = ""
    context_tokens: int = 0
    decode_requests: int | None = None
    """With windowed layers: the whole max_model_len requests that run at once while decoding (the figure a low
    concurrency is judged by), else None."""
    ranks: str | None = None
    """Under data parallelism: the GPUs the fix's deployment takes and its requests over the DP ranks (also the end of
    ``detail``), else None."""


@dataclass(frozen=True)
class Advice:
    """Verdict ("fits", "weights_do_not_fit", "max_model_len_does_not_fit", "no_kv_pool": a pipeline stage whose layers
    all read other layers' K/V leaves the engine one block, "override_leaves_no_block": --num-gpu-blocks-override 1
    leaves only vLLM's null block, "state_does_not_fit": SGLang's Mamba state slots serve no request,
    "served_at_lower_len": TensorRT-LLM starts and lowers max_seq_len to what the pool holds, SGLang starts and caps
    max_req_len to it), message,
    shortfall in bytes, options; the estimated max_model_len at the plan's point figure and at its range's low end."""

    __json__ = ("verdict", "message", "shortfall_bytes", "shortfall_gib", "estimated_max_model_len",
                "estimated_max_model_len_low", "options")
    verdict: str
    message: str
    shortfall_bytes: float = 0.0
    estimated_max_model_len: int | None = None
    options: tuple[Option, ...] = field(default_factory=tuple)
    estimated_max_model_len_low: int | None = None
    """The estimate at the low end of the plan's block range (a start even at the range's worst), tokens."""

    @property
    def shortfall_gib(self) -> float:
        """``shortfall_bytes`` in GiB (2^30 B)."""
        return self.shortfall_bytes / GiB

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
