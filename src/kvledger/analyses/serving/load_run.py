"""The run at the load one replica carries for a monthly volume, whose share of requests within the SLO the cost ledger
prices (``kvledger.ledgers.load_share``).

A replica sized on its SLO capacity C for a volume carries r = the volume's mean rate ÷ replicas, req/s. Where r is
below the rate the capacity run was priced at, :func:`load_share_at` simulates the same workload and seed once more at
r (a ``rerun``: ``sim_capacity.run_at_sized_rate``, or the run with the tier with ``--kv-tier-host``;
deterministic, no new RNG); where r equals it, the capacity run already is that run and nothing is added.
``cost --simulate`` (:func:`load_share_for`) and ``search`` (``analyses/search/evaluate.py``, ``tier_entries.py``)
both call :func:`load_share_at`, so the same deployment at the same volume is priced on the same run by both.

A volume so small that r spreads the run's arrivals past the simulator's clock (``MAX_ARRIVAL_S``: no arrival later)
is run at the lowest rate that holds them (:func:`lowest_rate`) instead: a run's arrival times scale as 1 ÷ its rate
(a trace's gaps rescaled to a mean of 1 ÷ rate, a synthetic workload's drawn from the same seed, scaled), so the
capacity run's last arrival × its rate is the last arrival of a run at 1 req/s, and that ÷ ``MAX_ARRIVAL_S`` the
lowest rate. Requests that far apart each meet an idle replica, as at any lower rate, so the share within the SLO is
the same; the load's good tokens per second are still counted at r (``LoadShare.simulated_rate_req_per_s``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvledger.dynamics.engine.request import MAX_ARRIVAL_S
from kvledger.ledgers.amounts import unit_noun
from kvledger.ledgers.decision_notes import engines
from kvledger.ledgers.load_share import LoadShare, load_share_from

__all__ = ["load_rate_req_per_s", "load_share_for", "load_share_at", "per_replica_rate", "lowest_rate",
           "capacity_lowest_rate"]


def lowest_rate(rate: float | None, run: Any) -> float:
    """The lowest offered req/s at which a rerun of a workload keeps its last arrival within the simulator's
    ``MAX_ARRIVAL_S`` (module docstring): ``run``'s (its records, simulated at ``rate`` req/s) last arrival × ``rate``
    ÷ that limit, raised by float rounding's margin; 0 where no rate or arrivals are known. ``cost`` passes its
    capacity run's (``capacity_lowest_rate``), ``search`` its candidate's priced run."""
    records = getattr(run, "records", ())
    if not rate or not math.isfinite(rate) or not records:
        return 0.0
    return max(r.arrival_s for r in records) * rate / MAX_ARRIVAL_S * (1 + 1e-9)


def capacity_lowest_rate(capacity: Any) -> float:
    """:func:`lowest_rate` of a ``sim_capacity`` capacity's run (a ``SimulatedRun``: its rate and records)."""
    run = getattr(capacity, "run", None)
    return lowest_rate(getattr(getattr(run, "args", None), "rate", None), getattr(run, "run", None))


def per_replica_rate(volume_rate_req_per_s: float, replicas: int, sized_on_req_per_s: float) -> float | None:
    """The offered req/s each of ``replicas`` carries for a volume of ``volume_rate_req_per_s`` (mean rate ÷
    replicas) where a run there is wanted: above 0 and below the rate sized on (at it, the capacity run is that run);
    else None."""
    if replicas < 1:
        return None
    rate = volume_rate_req_per_s / replicas
    return rate if 0.0 < rate < sized_on_req_per_s else None


def load_share_at(rerun: Callable[[float], Any] | None, volume_rate_req_per_s: float, replicas: int,
                  sized_on_req_per_s: float, lowest: float = 0.0) -> LoadShare | None:
    """The ``LoadShare`` of ``rerun`` (rate → ``sim_capacity.SizedRun``: the capacity's workload and seed at another
    rate) at the volume's load per replica (``per_replica_rate``), simulated at ``lowest`` where that load is lower
    (:func:`lowest_rate`, module docstring), or None where none is wanted or nothing can rerun."""
    rate = None if rerun is None else per_replica_rate(volume_rate_req_per_s, replicas, sized_on_req_per_s)
    if rate is None:
        return None
    simulated = max(rate, lowest)
    got = rerun(simulated)
    share = load_share_from(got.result, rate, got.run.args.seed)
    return share if simulated == rate else replace(share, simulated_rate_req_per_s=simulated)


def load_rate_req_per_s(capacity: Any, decision: Any) -> float | None:
    """The offered req/s each replica carries for the decision's volume (mean rate ÷ replicas) where a run there is
    wanted: a capacity that can rerun its workload, a volume, and a rate above 0 and below the rate sized on; else
    None. Session workloads are left at the capacity's share (their load is sessions, not requests, per second)."""
    if capacity is None or getattr(capacity, "rerun", None) is None or decision is None:
        return None
    if hasattr(getattr(capacity.run, "synthetic", None), "prepare_setup"):
        return None
    return per_replica_rate(decision.volume.rate_req_per_s, decision.replicas, capacity.sizing_req_per_s)


def load_share_for(capacity: Any, decision: Any) -> LoadShare | None:
    """``cost --simulate``'s ``LoadShare``: :func:`load_share_at` with the capacity's rerun and the decision's volume
    and replicas, or None where none is wanted (``load_rate_req_per_s``)."""
    if load_rate_req_per_s(capacity, decision) is None:
        return None
    share = load_share_at(capacity.rerun, decision.volume.rate_req_per_s, decision.replicas,
                          capacity.sizing_req_per_s, capacity_lowest_rate(capacity))
    return share if share is None else replace(share, unit=unit_noun(engines(decision)))  # --replicas N: a unit's
