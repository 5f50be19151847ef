"""``--max-gpus-per-replica``: the search's cap on the GPUs of one replica (a deployment unit: TP × DP ranks, or a
disaggregated unit's prefill and decode GPUs), applied to the candidates before any is planned or simulated.

Without it a grid of TPs and DP sizes multiplies into units no one meant to rent: ``--tp 1,2,8,16 -dp 1,2,4,8,16``
holds a unit of 16 × 16 = 256 GPUs, and with a per-GPU price (``--gpu-usd-per-hour``) no instance row refuses it
first, so the lock-step simulation of its 16 ranks ran for over half an hour with no output (a fresh-user trial).
The default, :data:`DEFAULT_MAX_GPUS_PER_REPLICA` = 16, is :data:`NODES_BY_DEFAULT` nodes of the catalog's largest
instance (8 GPUs: the 8-GPU HGX rows of gpu_prices.csv; no row sells more): a TP 16 engine over two nodes (DeepSeek-V3's
weights, about 671 GB in FP8, outgrow one node of eight 80 GB H100s) is searched; a wider unit only when asked.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CAP_FLAG", "DEFAULT_MAX_GPUS_PER_REPLICA", "NODES_BY_DEFAULT", "cap_candidates", "cap_note"]

CAP_FLAG = "--max-gpus-per-replica"
"""The flag, as its note begins (``cap_note``)."""

NODES_BY_DEFAULT = 2
"""Nodes of the catalog's largest instance one replica may span by default."""

DEFAULT_MAX_GPUS_PER_REPLICA = NODES_BY_DEFAULT * 8
"""GPUs per replica by default: :data:`NODES_BY_DEFAULT` × 8, the catalog's largest instance (checked against
gpu_prices.csv by ``tests/analyses/test_search_unit_cap.py``)."""


def cap_candidates(cands: list[Any], cap: int | None) -> tuple[list[Any], list[Any]]:
    """(the candidates of at most ``cap`` GPUs per replica, in their order; those over it); None: no cap.

    Raises:
        InputError: every candidate is over the cap (the smallest unit and the flag that searches it named).
    """
    if cap is None:
        return list(cands), []
    kept = [c for c in cands if c.num_gpus <= cap]
    over = [c for c in cands if c.num_gpus > cap]
    if over and not kept:
        from kvledger.errors import InputError

        least = min(c.num_gpus for c in over)
        raise InputError(f"every candidate has more than --max-gpus-per-replica {cap} GPUs per replica (the "
                         f"smallest, {least}); give --max-gpus-per-replica {least} or more to search them, or "
                         "smaller --tp / --data-parallel-size values")
    return kept, over


def cap_note(over: list[Any], cap: int | None) -> str | None:
    """What the cap left out: how many candidates, the widest unit and the flag that searches them; None when none."""
    if not over:
        return None
    widest = max(c.num_gpus for c in over)
    default = (f" (the default: {NODES_BY_DEFAULT} nodes of the catalog's largest instance, 8 GPUs)"
               if cap == DEFAULT_MAX_GPUS_PER_REPLICA else "")
    n = len(over)
    return (f"{CAP_FLAG} {cap}{default}: {n:,} candidate{'s' if n != 1 else ''} of more GPUs per "
            f"replica pruned before planning, up to {widest:,} GPUs (e.g. {over[0].id}); give "
            f"--max-gpus-per-replica {widest} to search them")
