"""The prefix tokens a workload could reuse: what an unbounded prefix cache, never evicting, would serve.

A request's reusable tokens are its leading whole prompt segments (``RequestSpec.prefix_segments``) that an earlier
request already had in its prompt or output (``RequestSpec.stream_segments``), matched as a prefix (segment ``j``
counts only if segments ``0 … j−1`` matched too, as a prefix cache's chained keys do), capped at the prompt less its
last token (an engine always computes that one). Earlier: a session's turns in order (turn ``k`` is sent after
turn ``k−1`` finished), sessions by start; a trace's requests by arrival (ties in workload order); a closed loop's in
the order it sends them. A cache of any size serves at most this many tokens; what HBM and the tiers below it did not
serve of it was recomputed although an earlier request had computed it.
"""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.engine.request import RequestSpec

__all__ = ["reusable_prefix_tokens"]


def _ordered_specs(workload: Any) -> list[RequestSpec] | None:
    """The workload's requests in the order they reach the engine (module doc); None for a kind not known here."""
    from kvledger.dynamics.workload.columns import WorkloadColumns
    from kvledger.dynamics.workload.sessions import SessionLoop, turn_specs

    if isinstance(workload, SessionLoop):
        sessions = sorted(workload.sessions, key=lambda s: s.start_s)
        return [spec for s in sessions for spec in turn_specs(s, workload.segment_tokens, workload.reuse_output)]
    if isinstance(workload, WorkloadColumns):
        return []  # columns carry no segments: nothing is shareable
    specs = getattr(workload, "requests", None)
    if specs is not None:  # a closed loop sends its requests in order (their arrival_s is ignored)
        return list(specs)
    if isinstance(workload, (list, tuple)) and all(isinstance(s, RequestSpec) for s in workload):
        return sorted(workload, key=lambda s: s.arrival_s)  # stable: ties keep workload order
    return None


def reusable_prefix_tokens(workload: Any) -> int | None:
    """Σ over the workload's requests of their reusable prefix tokens (module doc), tokens; None for a workload
    kind whose requests are not read here."""
    specs = _ordered_specs(workload)
    if specs is None:
        return None
    seen: set[int] = set()
    total = 0
    for spec in specs:
        S = spec.segment_tokens
        prev, matched = hash((0, S)), 0
        for seg in spec.prefix_segments[: spec.num_shareable_tokens // S]:
            prev = hash((prev, seg))
            if prev not in seen:
                break
            matched += 1
        total += min(matched * S, spec.num_prompt_tokens - 1)
        prev = hash((0, S))
        for seg in spec.stream_segments:
            prev = hash((prev, seg))
            seen.add(prev)
    return total
