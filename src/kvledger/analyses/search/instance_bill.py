"""A search candidate's monthly bill on whole instances: its engines (TP groups) packed on the instances of the
cheapest price rows, idle GPUs billed (``kvledger.ledgers.instances``), and the same bill at another replica count.

A colocated unit is one engine of TP GPUs; a disaggregated unit is P prefill engines of prefill TP and D decode engines
of decode TP. Each engine sits on one instance (its TP group talks over NVLink); the prefill engines and the decode
engines are packed apart (two engines of different widths never share an instance here, which can overstate the bill
of a mixed unit by the idle GPUs of one instance).
"""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.cost import HOURS_PER_MONTH
from kvledger.ledgers.instances import pack
from kvledger.ledgers.packings import UnitPacking
from kvledger.ledgers.staircase import staircase, staircase_usd_per_hour

__all__ = ["engine_groups", "instance_sizing", "instance_usd_per_month", "unit_packing"]


def engine_groups(cand: Any) -> list[tuple[int, int]]:
    """(engines per unit, GPUs per engine) of a candidate: [(1, TP)] (vLLM's DP ranks of a MoE model: [(1, DP × TP)],
    their MoE layers' collectives every layer keep them on one instance), or [(P, prefill TP), (D, decode TP)]."""
    if cand.disagg:
        return [(cand.prefill_replicas, cand.tp), (cand.decode_replicas, cand.decode_tp)]
    return [(1, cand.num_gpus)]


def unit_packing(gpu: Any, replicas: int, groups: list[tuple[int, int]]) -> UnitPacking:
    """``replicas`` units' engines packed on whole instances, each width on its cheapest packing of ``gpu``'s rows
    (one provider's: ``instances.pack``); without a volume, one unit: what must be rented for it."""
    return UnitPacking(tuple(pack(gpu, replicas * n, k) for n, k in groups if n), replicas)


def instance_sizing(gpu: Any, replicas: int, groups: list[tuple[int, int]],
                    tier_usd_per_month: float = 0.0, unit: UnitPacking | None = None) -> dict[str, Any]:
    """The sizing's bill of ``replicas`` units rented at ``gpu`` (a ``GpuRate`` with its options): each group's engines
    on whole instances of its cheapest packing, + the KV tier per unit; the instance fields and the ``staircase``
    (``bands.band_sizing`` redoes the bill at other replica counts with ``instance_usd_per_month``). ``unit``: that
    packing (``unit_packing(gpu, replicas, groups)``) where the caller already has it."""
    unit = unit if unit is not None else unit_packing(gpu, replicas, groups)
    packs = unit.packs
    rent = sum(p.usd_per_hour for p in packs) * HOURS_PER_MONTH  # a mix of instance sizes: each row's instances
    tier = f" + {replicas} × tier ${tier_usd_per_month:,.2f}/month" if tier_usd_per_month else ""
    words = " + ".join(f"{p.words()} at " + " + ".join(f"${r.usd_per_gpu_hour:g}/GPU-h"
                                                       + (f" ({r.row_key})" if r.row_key else f", {r.source}")
                                                       for r, _ in p.rows)
                       + (f"; {p.choice()}" if p.choice() else "") for p in packs)
    return {"rental_usd_per_month": rent + replicas * tier_usd_per_month, "instances": sum(p.instances for p in packs),
            "gpus_per_instance": max(p.gpus_per_instance for p in packs), "idle_gpus": sum(p.idle_gpus for p in packs),
            "instance_type": " + ".join(dict.fromkeys(r.instance_type for p in packs for r, _ in p.rows)),
            "instance_usd_per_gpu_hour": unit.usd_per_gpu_hour,  # a mix over the packs: bill ÷ GPUs billed
            "instance_choice": "; ".join(p.choice() for p in packs if p.choice()) or None,
            "staircase": [{"engines_per_unit": n, "gpus_per_engine": k, "steps": staircase(gpu, k)}
                          for n, k in groups if n],
            "tier_usd_per_month_per_unit": tier_usd_per_month, "instances_how": words + tier,
            "billed_rows": list(dict.fromkeys(r.key for p in packs for r, _ in p.rows))}


def instance_usd_per_month(sizing: dict[str, Any], replicas: int) -> float:
    """The bill of ``replicas`` units from a sizing's ``staircase`` (the cheapest packing of each group at that count)
    + their KV tier, USD per month."""
    hourly = sum(staircase_usd_per_hour(g["steps"], replicas * g["engines_per_unit"]) for g in sizing["staircase"])
    return hourly * HOURS_PER_MONTH + replicas * sizing["tier_usd_per_month_per_unit"]

