"""``--router session_affinity`` on an open-loop trace with prefix ids but no client ids (Mooncake): sessions inferred
from shared hash-id prefixes, so the router keeps a conversation on one replica (``sim_setup.prepare``)."""

from __future__ import annotations

from typing import Any

__all__ = ["sessions_for_affinity"]


def sessions_for_affinity(a: Any, workload: Any, info: dict[str, Any], notes: list[str]) -> Any:
    """For ``--router session_affinity`` on an open-loop trace with prefix ids but no client ids (Mooncake): the
    requests with sessions inferred from shared hash-id prefixes (``session_traces.trace_sessions``: ≥ 2 segments)."""
    if a.replicas < 2 and (a.router != "round_robin" or a.router_given):  # the default untyped says nothing
        notes.append(f"--router {a.router}: one replica (--replicas 1), so every request goes to it and the router "
                     "does nothing; --replicas N (N ≥ 2) puts it to work")
    from kvledger.dynamics.workload.columns import WorkloadColumns

    if a.router != "session_affinity" or a.replicas < 2 or not isinstance(workload, (list, WorkloadColumns)):
        return workload
    if isinstance(workload, list) and any(s.client_id is not None for s in workload):
        return workload
    # columns: a trace read without segments or clients (sim_setup._workload); nothing to stick to, then: every
    # request takes router._session_affinity's fallback
    if isinstance(workload, WorkloadColumns) or not any(s.prefix_segments for s in workload):
        notes.append("--router session_affinity: the trace has no session ids (client ids) and no prefix ids to infer "
                     "sessions from, so every request went to the least loaded replica, as --router least_loaded "
                     "routes it")
        return workload
    from kvledger.dynamics.workload.session_traces import trace_sessions, with_session_ids

    ts = trace_sessions(workload)
    info["sessions_inferred"] = {"num_sessions": ts.num_sessions, "reused_token_share": ts.reused_token_share,
                                 "rule": "a request is a later turn of the earlier request with which it shares the "
                                         "longest prefix of ≥ 2 segment ids (dynamics/workload/session_traces.py)"}
    notes.append(f"session_affinity: the trace has no session ids; {ts.num_sessions:,} sessions inferred from shared "
                 f"prefix ids (≥ 2 segments) for {len(workload):,} requests")
    return with_session_ids(workload, ts)
