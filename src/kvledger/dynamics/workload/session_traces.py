"""Sessions read from a real trace: requests linked by the prefix they reuse (Mooncake ``hash_ids``).

The bundled Mooncake FAST'25 traces carry no session id, but each request lists its 512-token prompt blocks as hash
ids, and a block is reusable only if every earlier block matches. A request that shares at least
``min_shared_segments`` leading blocks with an earlier request is taken as a later turn of that request's session (its
*parent*: the earlier request with the longest shared prefix, the earliest on ties); the reuse gap is the time
between the two arrivals (think time plus the parent's own latency). Block 0 is shared by every Mooncake request (a
common system prompt), so the default needs two blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError

__all__ = ["TraceSessions", "trace_sessions", "with_session_ids"]


@dataclass(frozen=True)
class TraceSessions:
    """What the trace's prefix reuse says about its sessions.

    Attributes:
        num_requests / num_sessions: counts. session_of: each request's session (its chain's first request index).
        parent: each request's parent index, -1 for a session's first request.
        shared_tokens: tokens each request shares with its parent, tokens.
        turns_per_session: {turns: sessions}. reuse_gap_s: arrival gaps to the parent, s (one per linked request).
        reused_token_share: Σ shared tokens / Σ prompt tokens.
    """

    num_requests: int
    num_sessions: int
    session_of: tuple[int, ...]
    parent: tuple[int, ...]
    shared_tokens: tuple[int, ...]
    turns_per_session: dict[int, int]
    reuse_gap_s: tuple[float, ...]
    reused_token_share: float

    def gap_quantiles(self) -> dict[str, float]:
        """p10, p50, p90 of the reuse gap, s (empty when nothing is reused)."""
        if not self.reuse_gap_s:
            return {}
        q = np.quantile(np.asarray(self.reuse_gap_s), [0.1, 0.5, 0.9])
        return {"p10": float(q[0]), "p50": float(q[1]), "p90": float(q[2])}


def trace_sessions(specs: list[RequestSpec], min_shared_segments: int = 2) -> TraceSessions:
    """Link the requests of a trace with prefix segments into sessions (module doc), in the given (arrival) order.

    Raises:
        InputError: ``min_shared_segments`` < 1, or a trace without prefix segments.
    """
    if isinstance(min_shared_segments, bool) or not isinstance(min_shared_segments, int) or min_shared_segments < 1:
        raise InputError(f"min_shared_segments must be an integer ≥ 1, got {min_shared_segments!r}")
    if not any(s.prefix_segments for s in specs):
        raise InputError("this trace has no prefix segments (hash ids): its sessions cannot be read from it")
    first_with: dict[tuple, int] = {}
    session, parent, shared, gaps = [], [], [], []
    reused = prompt = 0
    for i, s in enumerate(specs):
        segs = tuple(s.prefix_segments[: s.num_shareable_tokens // s.segment_tokens])
        d, src = len(segs), None
        while d >= min_shared_segments:
            src = first_with.get(segs[:d])
            if src is not None:
                break
            d -= 1
        if src is None:
            session.append(i)
            parent.append(-1)
            shared.append(0)
        else:
            session.append(session[src])
            parent.append(src)
            shared.append(d * s.segment_tokens)
            gaps.append(s.arrival_s - specs[src].arrival_s)
        reused += shared[-1]
        prompt += s.num_prompt_tokens
        for k in range(1, len(segs) + 1):
            first_with.setdefault(segs[:k], i)
    counts: dict[int, int] = {}
    for sid in session:
        counts[sid] = counts.get(sid, 0) + 1
    hist: dict[int, int] = {}
    for n in counts.values():
        hist[n] = hist.get(n, 0) + 1
    return TraceSessions(len(specs), len(counts), tuple(session), tuple(parent), tuple(shared),
                         dict(sorted(hist.items())), tuple(gaps), reused / prompt if prompt else 0.0)


def with_session_ids(specs: list[RequestSpec], sessions: TraceSessions, prefix: str = "session-") -> list[RequestSpec]:
    """The requests with ``client_id`` set to their session (for the ``session_affinity`` router)."""
    return [replace(s, client_id=f"{prefix}{sid}") for s, sid in zip(specs, sessions.session_of)]
