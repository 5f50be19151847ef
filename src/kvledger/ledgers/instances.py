"""Whole-instance rental: a deployment's GPUs packed into the instances a price row sells, the cheapest packing among a
provider's rows for the GPU, and the idle GPUs that packing bills.

A price row (``catalog/data/gpu_prices.csv``) sells one instance of ``gpus_per_instance`` GPUs at ``usd_per_gpu_hour``
× that count per hour. A replica of k GPUs (tensor parallel over NVLink) sits on one instance, so an instance of G
GPUs holds ⌊G ÷ k⌋ replicas and n replicas need ⌈n ÷ ⌊G ÷ k⌋⌉ instances (⌈n·k ÷ G⌉ when k divides G); a row with
1 < G < k cannot hold a replica at all. The bill is instances × G × USD/GPU-h × 730 h, and the GPUs no replica uses
are billed idle. A row of one GPU (G = 1) bills exactly the GPUs used; it holds a replica of k > 1 GPUs only when it
is a marketplace's (``provider_type`` "marketplace": pods of several GPUs, billed per GPU) or a price the user gave
per GPU-hour: a one-GPU virtual machine (AWS p5.4xlarge, Lambda's 1x, Nebius's 1gpu presets) shares no NVLink with
another, so k of them cannot run one tensor-parallel replica. Among several rows (``GpuRate.options``: the
provider's other rows, or every row of the GPU when no provider is named) the cheapest packing for the replica count
is taken, ties by fewer idle GPUs, then the row's key (provider:instance), and the choice is stated. The per-token
ledgers at a volume carry the idle GPUs too (``idle_item``: the replicas' own GPU-hours × idle ÷ used), so that they ×
the volume's tokens add up to the monthly bill's rental.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kvledger.catalog.prices import GpuPrice
from kvledger.errors import InputError
from kvledger.ledgers.items import LineItem
from kvledger.ranges import check_options

__all__ = ["GpuRate", "Packing", "candidates", "holds_replica", "idle_item", "pack", "staircase",
           "staircase_usd_per_hour"]


@dataclass(frozen=True, slots=True)
class GpuRate:
    """A GPU rental price with its provenance: USD per GPU-hour, sold in instances of ``gpus_per_instance`` GPUs
    (``instance_type``; 1 = per GPU); ``options``: other rows the deployment may be packed on instead, the cheapest
    packing taken (``ledgers.instances``)."""

    usd_per_gpu_hour: float
    label: str
    source: str
    as_of: str
    confidence: str = "user input"
    gpus_per_instance: int = 1
    instance_type: str = ""
    options: tuple[GpuRate, ...] = ()
    row_key: str = ""  # gpu_prices.csv "provider:instance_type"; "" for a price given by the user
    choice: str = ""  # why a packing took this row among its options (``pack``); it also leads ``source``
    per_gpu: bool = True  # a one-GPU row that rents k GPUs for a replica of k (a marketplace; a price given)

    @property
    def key(self) -> str:
        return self.row_key or self.label

    @classmethod
    def from_catalog(cls, row: GpuPrice, others: tuple[GpuPrice, ...] = ()) -> GpuRate:
        """The rate of ``row``, with ``others`` (rows of the same GPU) as the options a packing may choose; a price the
        user gave (``provider_type`` "user": search's row for ``--gpu-usd-per-hour``) is no catalog row."""
        if row.provider_type == "user":
            return cls.given(row.usd_per_gpu_hour, row.gpu_name, row.source)
        return cls(row.usd_per_gpu_hour, f"{row.provider} {row.gpu_name} ({row.instance_type}, {row.pricing_model})",
                   f"gpu_prices.csv {row.key} ({row.confidence} confidence); {row.source}", row.as_of, row.confidence,
                   row.gpus_per_instance, row.instance_type,
                   tuple(cls.from_catalog(o) for o in others if o.key != row.key), row.key,
                   per_gpu=row.per_gpu)

    @classmethod
    def given(cls, usd_per_gpu_hour: float, label: str = "GPU",
              source: str = "user input (--gpu-usd-per-hour)") -> GpuRate:
        """A price the user gave; ``source``: which (``catalog.given_prices.given_source``: the flag, and the GPU when
        it was given per GPU)."""
        check_options("cost", {"gpu_usd_per_hour": usd_per_gpu_hour})  # (0, 1e6] USD/GPU-hour: kvledger.ranges
        return cls(usd_per_gpu_hour, label, source, "user input")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def candidates(rate: GpuRate) -> tuple[GpuRate, ...]:
    """The rate and its ``options`` (rows it may be exchanged for), each once, by key."""
    seen, out = set(), []
    for r in (rate, *rate.options):
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return tuple(out)


def _step(r: GpuRate, gpus_per_replica: int) -> tuple[int, float] | None:
    """(replicas per step, USD per step-hour) of row ``r``: an instance of G GPUs holds ⌊G ÷ k⌋ replicas (a replica is
    not split across instances); a per-GPU row (G = 1) rents each replica's k GPUs as one step, if it can (module
    docstring); None: a replica does not fit."""
    if not holds_replica(r.gpus_per_instance, r.per_gpu, gpus_per_replica):
        return None
    if r.gpus_per_instance == 1:
        return 1, gpus_per_replica * r.usd_per_gpu_hour
    per = r.gpus_per_instance // gpus_per_replica
    return (per, r.gpus_per_instance * r.usd_per_gpu_hour) if per else None


def holds_replica(gpus_per_instance: int, per_gpu: bool, gpus_per_replica: int) -> bool:
    """Whether a row of ``gpus_per_instance`` GPUs holds a replica of ``gpus_per_replica`` (module docstring): an
    instance of that many GPUs or more, or a one-GPU row that rents several per replica (``per_gpu``: a marketplace's
    pods, a price given) — a one-GPU VM holds a TP-1 replica only."""
    if gpus_per_instance == 1:
        return gpus_per_replica == 1 or per_gpu
    return gpus_per_instance >= gpus_per_replica


def _instances(r: GpuRate, replicas: int, gpus_per_replica: int) -> int:
    """Instances of row ``r`` billed for the replicas (a per-GPU row: one per GPU)."""
    per, _ = _step(r, gpus_per_replica)
    return replicas * gpus_per_replica if r.gpus_per_instance == 1 else math.ceil(replicas / per)


@dataclass(frozen=True, slots=True)
class Packing:
    """``replicas`` replicas of ``gpus_per_replica`` GPUs each on ``instances`` instances of ``rate`` (a ``GpuRate``),
    chosen from ``considered`` rows."""

    rate: GpuRate
    replicas: int
    gpus_per_replica: int
    instances: int
    considered: int = 1

    @property
    def gpus_per_instance(self) -> int:
        return self.rate.gpus_per_instance

    @property
    def gpus(self) -> int:
        """GPUs the replicas use."""
        return self.replicas * self.gpus_per_replica

    @property
    def billed_gpus(self) -> int:
        """GPUs billed: instances × GPUs per instance."""
        return self.instances * self.gpus_per_instance

    @property
    def idle_gpus(self) -> int:
        return self.billed_gpus - self.gpus

    @property
    def usd_per_hour(self) -> float:
        return self.billed_gpus * self.rate.usd_per_gpu_hour

    def words(self) -> str:
        """``1 replica × 1 GPU × 730 h`` on a per-GPU row; ``2 replicas × 1 GPU = 2 GPUs on 1 a3-highgpu-8g instance
        (8 GPUs, 6 idle) × 730 h`` on an instance of several."""
        head = f"{_plural(self.replicas, 'replica')} × {_plural(self.gpus_per_replica, 'GPU')}"
        if self.gpus_per_instance == 1:
            return f"{head} × 730 h"
        t = self.rate.instance_type.removesuffix(" instance")  # a row named "8x A100 instance": not twice
        kind = f"{t} instance" if t else "instance"
        kinds = kind if self.instances == 1 else kind + "s"
        each = " each" if self.instances > 1 else ""
        return (f"{head} = {_plural(self.gpus, 'GPU')} on {self.instances} {kinds}"
                f" ({self.gpus_per_instance} GPUs{each}, {self.idle_gpus} idle) × 730 h")

    def choice(self) -> str:
        """Why this row: the cheapest packing of the rows considered (empty when there was one)."""
        if self.considered == 1:
            return ""
        return (f"the cheapest packing of {self.considered} rows for this GPU: {self.rate.key}, "
                f"${self.usd_per_hour:,.2f}/h for {_plural(self.replicas, 'replica')} of "
                f"{_plural(self.gpus_per_replica, 'GPU')}")

    @property
    def instance_choice(self) -> str | None:
        """``choice()``, None when one row was considered (for JSON)."""
        return self.choice() or None


def idle_item(p: Packing | None, gpu_hours: float, phase: str) -> LineItem | None:
    """The idle GPUs of ``p``'s rented instances per 1M tokens, ``phase`` share: ``gpu_hours`` (the replicas' own
    GPU-hours for it, the GPU rental item) × idle GPUs ÷ the GPUs the replicas use, at the same rate; None when none
    is idle (a per-GPU row, full instances) or no packing is priced (no volume)."""
    if p is None or p.idle_gpus <= 0:
        return None
    kinds = "instance" if p.instances == 1 else "instances"
    return LineItem(f"idle GPUs of the rented {kinds} ({p.idle_gpus} of {p.billed_gpus}), {phase} share", "GPU-hour",
                    gpu_hours * p.idle_gpus / p.gpus, p.rate.usd_per_gpu_hour, p.rate.source, p.rate.as_of,
                    f"{gpu_hours:.4g} GPU-hour (the GPU rental, {phase} share) × {p.idle_gpus} idle ÷ {p.gpus} used: "
                    f"billed whole as in the monthly bill ({p.words()})")


def _refuse(rows: tuple[GpuRate, ...], gpus_per_replica: int) -> InputError:
    listed = "; ".join(f"{r.key} ({_plural(r.gpus_per_instance, 'GPU')} per instance"
                       + (", a one-GPU machine" if r.gpus_per_instance == 1 else "") + ")" for r in rows)
    return InputError(f"a replica of {gpus_per_replica} GPUs (tensor parallel over NVLink) must sit on one instance, "
                      f"and no price row considered has that many GPUs per instance: {listed}. Choose another "
                      f"--gpu-provider or --instance with at least {gpus_per_replica} GPUs, or give "
                      f"--gpu-usd-per-hour")


def pack(rate: GpuRate, replicas: int, gpus_per_replica: int) -> Packing:
    """The cheapest packing of ``replicas`` replicas of ``gpus_per_replica`` GPUs over ``candidates(rate)``; the
    chosen rate keeps the others as its ``options``.

    Raises:
        InputError: no candidate row has ``gpus_per_replica`` GPUs or more per instance (the rows are named).
    """
    rows = candidates(rate)
    fits = [r for r in rows if _step(r, gpus_per_replica) is not None]
    if not fits:
        raise _refuse(rows, gpus_per_replica)
    best = None
    for r in fits:
        p = Packing(r, replicas, gpus_per_replica, _instances(r, replicas, gpus_per_replica), len(rows))
        key = (p.usd_per_hour, p.idle_gpus, r.key)
        if best is None or key < best[0]:
            best = (key, p)
    chosen = best[1]
    r, text = chosen.rate, chosen.choice()
    base = r.source.removeprefix(f"{r.choice}; ") if r.choice else r.source
    rate = replace(r, options=tuple(o for o in rows if o.key != r.key), choice=text,
                   source=f"{text}; {base}" if text else base)
    return replace(chosen, rate=rate)


def staircase(rate: GpuRate, gpus_per_replica: int) -> list[dict[str, Any]]:
    """Per candidate row that holds a replica: replicas per instance and USD per instance-hour (a per-GPU row: 1 and
    one replica's GPUs), so that n replicas on that row cost ⌈n ÷ replicas_per_instance⌉ × USD per instance-hour (the
    cheapest row wins at each n: ``pack``). Raises InputError as ``pack`` does."""
    rows = candidates(rate)
    steps = [{"row": r.key, "replicas_per_instance": s[0], "usd_per_instance_hour": s[1]}
             for r in rows if (s := _step(r, gpus_per_replica)) is not None]
    if not steps:
        raise _refuse(rows, gpus_per_replica)
    return steps


def staircase_usd_per_hour(steps: list[dict[str, Any]], replicas: int) -> float:
    """The cheapest rental per hour of ``replicas`` replicas over ``staircase`` steps."""
    return min(math.ceil(replicas / s["replicas_per_instance"]) * s["usd_per_instance_hour"] for s in steps)
