"""The typed record of a synthetic multi-turn session workload as a run drew it (``SessionReport``): the
``workload.sessions`` block of ``simulate --json`` (and of ``goodput --simulate``'s ``simulation``), built by
``sim_tiers.prepare_sessions`` and read back by ``SimDocument.sessions``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvledger.jsonable import to_jsonable

if TYPE_CHECKING:
    from kvledger.dynamics.workload.sessions import SessionShape

__all__ = ["SessionReport", "SESSION_SOURCE"]

SESSION_SOURCE = "kvledger.dynamics.workload.sessions, SessionShape preset"


@dataclass(frozen=True)
class SessionReport:
    """The sessions a run drew.

    Attributes:
        kind: the preset (``--workload``: chat or agent). num_sessions: sessions drawn that fit the context cap, count
            (``--sessions`` less those whose first turn would pass it). session_rate_per_s: session starts per second,
            Poisson (``--session-rate``). segment_tokens: tokens per prefix segment id (SGLang's host units).
        shape: the stated distributions drawn from (``SessionShape``, its context cap lowered to max_model_len).
        context_cap_tokens: a session stops before its context would pass it (the engine's max_model_len), tokens;
            context_cap_source: where that cap came from, in words.
    """

    kind: str
    num_sessions: int
    session_rate_per_s: float
    segment_tokens: int
    shape: SessionShape
    context_cap_tokens: int
    context_cap_source: str
    source: str = SESSION_SOURCE

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> SessionReport:
        """The record of its JSON (``to_dict``'s keys)."""
        from kvledger.dynamics.workload.sessions import SessionShape

        return cls(**{**d, "shape": SessionShape(**d["shape"])})

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
