"""The cost lines of ``kvledger offload``: the replica's GPUs, the host memory its tier takes, and the GPUs of
``--compare-replicas`` replicas instead, per hour."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError
from kvledger.ledgers.cost import HOURS_PER_MONTH

__all__ = ["tier_cost"]


def tier_cost(host_bytes: float, gpus_per_replica: int, compare_gpus: int | None, gpu_usd_per_hour: float | None,
              host_usd_per_gib_month: float | None) -> dict[str, Any] | None:
    """Per-hour line items: the replica's GPUs at the given price, the host memory the tier takes (USD per GiB-month
    ÷ 730 h, the cost ledger's month; without a price the bundled default row, ``catalog/tier_prices.py``), and the
    GPUs of ``compare_gpus`` replicas instead; None without a GPU price.

    Raises:
        InputError: a price that is negative or not finite.
    """
    import math

    if gpu_usd_per_hour is None:
        return None
    source = "prices given on the command line"
    if host_usd_per_gib_month is None:  # the bundled default (catalog/tier_prices.py), named
        from kvledger.catalog.tier_prices import default_tier_price

        row = default_tier_price("host")
        if row is None:
            return None
        host_usd_per_gib_month = row.usd_per_gib_month
        source = f"GPU price given; host memory {row.citation}, as of {row.as_of}"
    for name, v in (("--gpu-usd-per-hour", gpu_usd_per_hour),
                    ("--host-memory-usd-per-gib-month", host_usd_per_gib_month)):
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"{name} must be a finite price ≥ 0 USD, got {v!r}")
    gib = host_bytes / 2**30
    per_gib_hour = host_usd_per_gib_month / HOURS_PER_MONTH
    gpus = gpu_usd_per_hour * gpus_per_replica
    out = {"source": source, "gpu_usd_per_hour": gpus,
           "host_memory_gib": gib, "host_memory_usd_per_gib_month": host_usd_per_gib_month,
           "host_memory_usd_per_hour": gib * per_gib_hour, "with_tier_usd_per_hour": gpus + gib * per_gib_hour}
    if compare_gpus:
        out["more_gpus_usd_per_hour"] = gpus * compare_gpus
    return out
