"""How ``kvledger report`` (and ``kvledger ui``'s serving panel) prices the GPU: the user's price, the row
``--instance`` names, or the cheapest packing of the replicas on the rows listed for the GPU."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import Any

__all__ = ["pick_gpu_rate"]


def pick_gpu_rate(req: Any, gpu_id: str) -> tuple[Any, Callable[[Any], str], str]:
    """(GPU rate, how it was chosen given the packing the bill rents, the cost command's flags for it): the user's
    price, the row ``instance`` names (cost's --instance), or the cheapest packing of the replicas on the rows listed
    for the GPU (of the named provider), the rows rented named (``packings.rented_words``: and why a row cheaper per
    GPU-hour is not)."""
    from kvledger.analyses.serving.cost_run import cheapest_gpu_row, gpu_rate
    from kvledger.ledgers.cost import GpuRate
    from kvledger.ledgers.packings import rented_words

    inst = f" --instance {shlex.quote(req.instance)}" if req.instance is not None else ""
    if req.gpu_usd_per_hour is not None:
        return (
            gpu_rate(gpu_id, req.gpu_provider, req.instance, req.gpu_usd_per_hour),
            lambda packing: "given (--gpu-usd-per-hour): " + rented_words(packing),  # what the bill rents on it
            f" --gpu-usd-per-hour {req.gpu_usd_per_hour!r}" + inst,
        )
    if req.instance is not None:  # cost's --instance: that row alone (gpu_rate refuses it without the GPU's row)
        rate = gpu_rate(gpu_id, req.gpu_provider, req.instance, None)
        provider = f" --gpu-provider {shlex.quote(req.gpu_provider)}" if req.gpu_provider else ""
        return rate, lambda packing: f"the row named (--instance): {rented_words(packing)}", provider + inst
    row, rows = cheapest_gpu_row(gpu_id, req.gpu_provider)
    flags = f" --gpu-provider {shlex.quote(row.provider)}" if req.gpu_provider else ""
    scope = f"{req.gpu_provider}'s" if req.gpu_provider else "the"
    head = f"the cheapest packing of the replicas on {scope} {len(rows)} row(s) for {gpu_id} in gpu_prices.csv: "
    tail = "" if req.gpu_provider else "; pass --gpu-provider to choose another"
    return GpuRate.from_catalog(row, rows), lambda packing: head + rented_words(packing) + tail, flags
