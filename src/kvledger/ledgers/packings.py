"""Packings seen whole: several packings billed together (a disaggregated unit's prefill and decode engines, each width
packed on its own instances: ``UnitPacking``), and the price of a packing in words and in JSON (the row, or a mix's
rows and its USD per billed GPU-hour: the bill ÷ the GPUs billed, the price its per-token ledgers carry).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvledger.ledgers.amounts import usd_text
from kvledger.ledgers.instances import POD_MAX_GPUS, GpuRate, Packing, candidates, holds_replica, pack

__all__ = ["UnitPacking", "gpu_inputs", "gpu_words", "packing_rows", "rented_words"]


@dataclass(frozen=True, slots=True)
class UnitPacking:
    """``units`` deployment units whose engines are packed by width (``packs``: one ``Packing`` per engine width), read
    as one packing by the per-token ledgers (``cost.self_host_unit_ledgers``, ``instances.idle_item``): the bill, the
    GPUs used and billed summed over the packs, priced at the bill ÷ the GPUs billed."""

    packs: tuple[Packing, ...]
    units: int

    @property
    def rate(self) -> GpuRate:
        return self.packs[0].rate

    @property
    def rows(self) -> tuple[tuple[GpuRate, int], ...]:
        """(row, instances) of every row rented, a row the packs share once with their instances summed."""
        rates: dict[str, GpuRate] = {}
        counts: dict[str, int] = {}
        for p in self.packs:
            for r, n in p.rows:
                rates.setdefault(r.key, r)
                counts[r.key] = counts.get(r.key, 0) + n
        return tuple((rates[k], counts[k]) for k in rates)

    @property
    def mixed(self) -> bool:
        """Several rows rented (one row across the packs is not a mix: its price is the row's)."""
        return len(self.rows) > 1

    @property
    def instances(self) -> int:
        return sum(p.instances for p in self.packs)

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.packs)

    @property
    def billed_gpus(self) -> int:
        return sum(p.billed_gpus for p in self.packs)

    @property
    def idle_gpus(self) -> int:
        return self.billed_gpus - self.gpus

    @property
    def usd_per_hour(self) -> float:
        return sum(p.usd_per_hour for p in self.packs)

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.billed_gpus if self.mixed else self.rate.usd_per_gpu_hour

    def words(self) -> str:
        return " + ".join(p.words() for p in self.packs)


def gpu_words(p: Packing | UnitPacking) -> str:
    """The price rented in words: ``GCP H100 … (a3-highgpu-8g, on_demand), $10.98/GPU-h``; a mix: each row with its
    instances and price, then its USD per billed GPU-hour (the bill ÷ the GPUs billed)."""
    if not p.mixed:
        return f"{p.rate.label}, {usd_text(p.rate.usd_per_gpu_hour)}/GPU-h"
    rows = " + ".join(f"{n} × {r.label} at {usd_text(r.usd_per_gpu_hour)}/GPU-h" for r, n in p.rows)
    return (f"{rows}: ${p.usd_per_gpu_hour:.4g} per GPU-hour billed, the mix's {usd_text(p.usd_per_hour)}/h ÷ "
            f"{p.billed_gpus} GPUs")


def packing_rows(p: Packing | UnitPacking) -> list[dict[str, Any]]:
    """Each row rented: its key, instances, GPUs per instance and USD per GPU-hour (JSON)."""
    return [{"key": r.key, "instances": n, "gpus_per_instance": r.gpus_per_instance,
             "usd_per_gpu_hour": r.usd_per_gpu_hour} for r, n in p.rows]


def gpu_inputs(gpu: GpuRate, p: Packing | UnitPacking | None) -> dict[str, Any]:
    """The GPU keys of a cost report's ``inputs``: the row priced, or for a mix of rows the rows joined, the mix's USD
    per billed GPU-hour (the price its ledgers carry) and ``gpu_rows``."""
    if p is None or not p.mixed:
        return {"gpu": gpu.label, "usd_per_gpu_hour": gpu.usd_per_gpu_hour, "gpu_price_source": gpu.source,
                "gpu_price_as_of": gpu.as_of}
    return {"gpu": " + ".join(r.label for r, _ in p.rows), "usd_per_gpu_hour": p.usd_per_gpu_hour,
            "gpu_price_source": p.rate.source, "gpu_price_as_of": " / ".join(dict.fromkeys(r.as_of for r, _ in p.rows)),
            "gpu_rows": packing_rows(p)}


def rented_words(p: Packing) -> str:
    """What the bill rents, in words: ``gpu_words``, the packing (``Packing.words``) and its USD per hour; then each
    row cheaper per GPU-hour that it does not rent and why: a row whose instance cannot hold a replica, or what the
    replicas would cost on that row alone (its idle GPUs billed)."""
    k, n = p.gpus_per_replica, max(p.replicas, 1)
    rented = {r.key for r, _ in p.rows}
    why = []
    for r in candidates(p.rate):
        if r.key in rented or r.usd_per_gpu_hour >= p.usd_per_gpu_hour:
            continue
        if not holds_replica(r.gpus_per_instance, r.per_gpu, k, bool(r.row_key)):
            one = "a one-GPU machine" if not r.per_gpu else f"a pod is one machine, at most {POD_MAX_GPUS} GPUs"
            what = one if r.gpus_per_instance == 1 else f"{r.gpus_per_instance} GPUs per instance"
            why.append(f"{r.key} at {usd_text(r.usd_per_gpu_hour)}/GPU-h cannot hold a replica of {k} GPUs ({what})")
            continue
        alone = pack(replace(r, options=()), n, k)
        why.append(f"{r.key} at {usd_text(r.usd_per_gpu_hour)}/GPU-h bills {usd_text(alone.usd_per_hour)}/h for "
                   f"{'them' if n > 1 else 'it'} ({alone.billed_gpus} GPUs, {alone.idle_gpus} idle)")
    head = f"{gpu_words(p)}: {p.words()}, {usd_text(p.usd_per_hour)}/h"
    return head + (f"; not rented though cheaper per GPU-hour: {'; '.join(why)}" if why else "")
