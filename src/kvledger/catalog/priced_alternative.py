"""The priced GPU to use instead of a catalog GPU no rental row prices: the same vendor's (the engine's platform, as
``plan``'s bigger-GPU fixes keep it), the smallest with at least its memory, else the largest below it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["priced_alternative", "priced_alternative_words"]


def priced_alternative(gpu_id: str, rows: Sequence[Any]) -> str | None:
    """The catalog id of the GPU to price instead of ``gpu_id`` (module docstring) among the rental ``rows``
    (``prices.gpu_prices()``); None when ``gpu_id`` has a row or its vendor has no priced GPU."""
    from kvledger.catalog.gpus import gpu_catalog

    priced = {r.gpu_id for r in rows}
    cat = gpu_catalog()
    if gpu_id in priced or gpu_id not in cat:
        return None
    vendor, mem = gpu_id.split("_", 1)[0], cat[gpu_id].memory_bytes
    same = sorted((g for g in cat.values() if g.gpu_id in priced and g.gpu_id.split("_", 1)[0] == vendor),
                  key=lambda g: g.memory_bytes)
    if not same:
        return None
    bigger = [g for g in same if g.memory_bytes >= mem]
    return (bigger[0] if bigger else same[-1]).gpu_id


def priced_alternative_words(gpu_id: str, rows: Sequence[Any]) -> str:
    """"; the nearest priced GPU of the same vendor: GPU (memory GiB, its cheapest row's $/GPU-h and provider)" for a
    GPU without a row among ``rows``, else ""."""
    from kvledger.catalog.gpus import gpu_catalog
    from kvledger.units import GiB

    alt = priced_alternative(gpu_id, rows)
    if alt is None:
        return ""
    g, row = gpu_catalog()[alt], min((r for r in rows if r.gpu_id == alt), key=lambda r: r.usd_per_gpu_hour)
    return (f"; the nearest priced GPU of the same vendor: {alt} ({g.name}, {g.memory_bytes / GiB:,.2f} GiB device "
            f"memory; from ${row.usd_per_gpu_hour:,.2f}/GPU-h, {row.provider} {row.instance_type}, "
            f"{row.confidence} confidence, gpu_prices.csv)")
