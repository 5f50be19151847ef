"""A measured multi-turn run replayed as its sessions (``kvledger.dynamics.workload.sessions.SessionLoop``), not as
independent arrivals, where its records name their session and turn (AIPerf ``profile_export.jsonl``:
``metadata.extra["sessions"]``, ``evidence.aiperf_sessions.session_extra``).

A session's turns, in ``turn_index`` order, become ``Turn``s whose new input is what the measured prompt adds to the
conversation before it (``prompt_k − prompt_{k−1} − output_{k−1}``: AIPerf re-sends the history, so turn ``k``'s
prefix is turn ``k−1``'s prompt and output, cacheable), whose pause is the measured gap from the previous turn's
finish to its send (the dataset's delay plus the client's own time), and the session starts when its first kept turn
was sent. A run whose turns skip an index (a failed turn left out), overlap (a turn sent before the previous one
finished), or whose prompt is shorter than the conversation before it (history not re-sent) is replayed at its
recorded send times instead, and the note says why.
"""

from __future__ import annotations

from typing import Any

__all__ = ["session_loop"]

#: tokens per prefix segment id of the replayed sessions (the workload's, as ``SessionLoop``'s default)
SEGMENT_TOKENS = 64
#: a later turn sent this long before the previous one finished is not that conversation's next turn, s (clock
#: resolution: AIPerf takes both times with time.time_ns on the same host)
OVERLAP_S = 1e-3


def _turns(key: str, recs: list[Any]) -> tuple[list[Any], str | None]:
    """The ``Turn``s of one session's records (in turn order) or, where they cannot be one conversation, why."""
    from kvledger.dynamics.workload.sessions import Turn

    out, prev = [], None
    for turn, r in recs:
        if prev is None:
            out.append(Turn(r.num_prompt_tokens, r.num_output_tokens))
        else:
            (pturn, p) = prev
            if turn != pturn + 1:
                return [], f"session {key} has no finished turn {pturn + 1} between turns {pturn} and {turn}"
            if r.arrival_s < p.finish_s - OVERLAP_S:
                return [], (f"session {key}'s turn {turn} was sent {p.finish_s - r.arrival_s:.3f} s before its turn "
                            f"{pturn} finished, so they are not one conversation's turns in order")
            new = r.num_prompt_tokens - p.num_prompt_tokens - p.num_output_tokens
            if new < 0:
                return [], (f"session {key}'s turn {turn} prompt ({r.num_prompt_tokens:,} tokens) is shorter than the "
                            f"conversation before it ({p.num_prompt_tokens + p.num_output_tokens:,}): the client did "
                            "not re-send the whole history")
            out.append(Turn(new, r.num_output_tokens, max(0.0, r.arrival_s - p.finish_s)))
        prev = (turn, r)
    return out, None


def session_loop(recs: list[Any], keys: list[tuple[str, int]]) -> tuple[Any, list[Any] | None, str]:
    """(the SessionLoop of ``recs``' sessions or None, each record's turn as a request (prompt segments shared with
    its session's earlier turns; None without sessions), the note that says which replay was taken and why).

    ``recs``: the finished records (arrivals from 0), ``keys[i]`` the (session, turn) of ``recs[i]``.
    """
    from dataclasses import replace

    from kvledger.dynamics.workload.sessions import Session, SessionLoop, turn_specs

    groups: dict[str, list[tuple[int, Any]]] = {}
    for r, (key, turn) in zip(recs, keys):
        groups.setdefault(key, []).append((turn, r))
    sessions, spec_of = [], {}
    for n, (key, items) in enumerate(groups.items()):
        items.sort(key=lambda tr: tr[0])
        turns, why = _turns(key, items)
        if why:
            return None, None, (f"the records name their sessions (x_correlation_id, turn_index) but {why}: replayed "
                                "at the recorded send times, each turn independent of the one before")
        sessions.append(Session(f"session-{n}", items[0][1].arrival_s, tuple(turns), 0, n))
        spec_of.update({id(r): replace(spec, arrival_s=r.arrival_s)
                        for (_, r), spec in zip(items, turn_specs(sessions[-1], SEGMENT_TOKENS))})
    multi = sum(len(s.turns) > 1 for s in sessions)
    return SessionLoop(tuple(sessions), SEGMENT_TOKENS), [spec_of[id(r)] for r in recs], (
        f"replayed as its {len(sessions):,} sessions ({multi:,} of several turns; x_correlation_id, turn_index): "
        "each session starts when its first turn was sent, each later turn is sent its measured pause after the "
        "previous one finished and re-sends the conversation so far (prompt − previous prompt − previous output new "
        "tokens), the rest a prefix the cache can hold")
