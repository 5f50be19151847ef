"""The run at the load one replica carries for a monthly volume, whose share of requests within the SLO the cost ledger
prices (``kvledger.ledgers.load_share``).

A replica sized on its SLO capacity C for a volume carries r = the volume's mean rate ÷ replicas, req/s. Where r is
below the rate the capacity run was priced at, :func:`load_share_for` simulates the same workload and seed once more at
r (the capacity's ``rerun``: ``sim_capacity.run_at_sized_rate``, or the tier prober with ``--kv-tier-host``;
deterministic, no new RNG); where r equals it, the capacity run already is that run and nothing is added.
"""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.load_share import LoadShare, load_share_from

__all__ = ["load_rate_req_per_s", "load_share_for"]


def load_rate_req_per_s(capacity: Any, decision: Any) -> float | None:
    """The offered req/s each replica carries for the decision's volume (mean rate ÷ replicas) where a run there is
    wanted: a capacity that can rerun its workload, a volume, and a rate above 0 and below the rate sized on; else
    None. Session workloads are left at the capacity's share (their load is sessions, not requests, per second)."""
    if capacity is None or getattr(capacity, "rerun", None) is None or decision is None or decision.replicas < 1:
        return None
    if hasattr(getattr(capacity.run, "synthetic", None), "prepare_setup"):
        return None
    rate = decision.volume.rate_req_per_s / decision.replicas
    return rate if 0.0 < rate < capacity.sizing_req_per_s else None


def load_share_for(capacity: Any, decision: Any) -> LoadShare | None:
    """The ``LoadShare`` of a run of the capacity's workload and seed at the volume's load per replica
    (``load_rate_req_per_s``), or None where none is wanted."""
    rate = load_rate_req_per_s(capacity, decision)
    if rate is None:
        return None
    got = capacity.rerun(rate)
    return load_share_from(got.result, rate, got.run.args.seed)
