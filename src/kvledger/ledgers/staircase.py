"""The rental staircase of a GPU's price rows: per row that holds a replica, replicas per instance and USD per
instance-hour, and the cheapest mix of one provider's instances for n replicas (the bill ``instances.pack`` takes,
without building its packing)."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.instance_mix import cheapest_counts
from kvledger.ledgers.instances import GpuRate, candidates, no_row_error, replica_step

__all__ = ["staircase", "staircase_usd_per_hour"]


def staircase(rate: GpuRate, gpus_per_replica: int) -> list[dict[str, Any]]:
    """Per candidate row that holds a replica: replicas per instance and USD per instance-hour (a per-GPU row: 1 and
    one replica's GPUs), so that n replicas cost the cheapest mix of those instances (``staircase_usd_per_hour``, the
    bill ``pack`` takes). Raises InputError as ``pack`` does."""
    rows = candidates(rate)
    steps = [{"row": r.key, "replicas_per_instance": s[0], "usd_per_instance_hour": s[1]}
             for r in rows if (s := replica_step(r, gpus_per_replica)) is not None]
    if not steps:
        raise no_row_error(rows, gpus_per_replica)
    return steps


def staircase_usd_per_hour(steps: list[dict[str, Any]], replicas: int) -> float:
    """The cheapest rental per hour of ``replicas`` replicas over ``staircase`` steps: the cheapest mix of one
    provider's instances (``instance_mix``, as ``pack``; ties among mixes of one bill do not change it)."""
    mix = tuple((s["replicas_per_instance"], s["usd_per_instance_hour"], 0, s["row"]) for s in steps)
    return sum(c * s[1] for c, s in zip(cheapest_counts(mix, replicas), mix, strict=True))
