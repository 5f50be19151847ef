"""Whole-instance rental: a deployment's GPUs packed into the instances a price row sells, the cheapest packing among a
provider's rows for the GPU, and the idle GPUs that packing bills.

A price row (``catalog/data/gpu_prices.csv``) sells one instance of ``gpus_per_instance`` GPUs at ``usd_per_gpu_hour`` ×
that count per hour. A replica of k GPUs (one tensor-parallel group) sits on one instance, so an instance of G GPUs
holds ⌊G ÷ k⌋ replicas and n replicas need ⌈n ÷ ⌊G ÷ k⌋⌉ instances (⌈n·k ÷ G⌉ when k divides G); a row with 1 < G < k
cannot hold a replica at all. The bill is instances × G × USD/GPU-h × 730 h, and the GPUs no replica uses are billed
idle. A row of one GPU (G = 1) bills exactly the GPUs used; it holds a replica of k > 1 GPUs only when it is a
marketplace's (``provider_type`` "marketplace": pods of several GPUs, billed per GPU) or a price the user gave per
GPU-hour: a one-GPU virtual machine (AWS p5.4xlarge, Lambda's 1x, Nebius's 1gpu presets) shares no NVLink with another,
so k of them cannot run one tensor-parallel replica; and a marketplace's pod is one machine, so a catalog per-GPU row
holds a replica of at most ``POD_MAX_GPUS`` (8) GPUs: a TP group past one node (TP 16 on 8-GPU boards) needs several
machines joined by InfiniBand/RoCE, which no row here sells (an instance row holds a replica inside one instance); a
price the user gave per GPU-hour is taken as theirs, for whatever the replica needs. Among several rows
(``GpuRate.options``: the provider's other rows, or every row of the GPU when no provider is named) the cheapest packing
for the replica count is taken, a mix of instance sizes where that bills less (one 8x instance and one 1x instance for 9
one-GPU replicas: ``instance_mix``) but never of two providers' rows (one deployment, one cloud), ties by fewer idle
GPUs, then the rows' keys (provider:instance), and the choice is stated. A deployment unit of N engine replicas
(``--replicas N``) is N replicas here, each on an instance of its own or sharing one, as the cheapest packing has it.
The per-token ledgers carry the idle GPUs too (``idle_item``: the replicas' own GPU-hours × idle ÷ used, at the
packing's USD per billed GPU-hour), so that they × the
volume's tokens add up to the monthly bill's rental.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvledger.catalog.prices import GpuPrice
from kvledger.errors import InputError
from kvledger.ledgers.amounts import usd_text
from kvledger.ledgers.instance_mix import Step, cheapest_counts
from kvledger.ledgers.items import LineItem
from kvledger.ranges import check_options

__all__ = ["GpuRate", "Packing", "candidates", "holds_replica", "idle_item", "no_row_error", "pack", "replica_step",
           "POD_MAX_GPUS"]

POD_MAX_GPUS = 8
"""GPUs one marketplace pod holds at most: a pod is one machine (RunPod's pods take 1 to 8 GPUs; its multi-node product,
Instant Clusters, is not a pod row), as an 8-GPU HGX board is one node (``accounting.node_size.BASEBOARD_GPUS``)."""


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
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def candidates(rate: GpuRate) -> tuple[GpuRate, ...]:
    """The rate and its ``options`` (rows it may be exchanged for), each once, by key."""
    seen, out = set(), []
    for r in (rate, *rate.options):
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return tuple(out)


def replica_step(r: GpuRate, gpus_per_replica: int) -> tuple[int, float] | None:
    """(replicas per step, USD per step-hour) of row ``r``: an instance of G GPUs holds ⌊G ÷ k⌋ replicas (a replica is
    not split across instances); a per-GPU row (G = 1) rents each replica's k GPUs as one step, if it can (module
    docstring); None: a replica does not fit."""
    if not holds_replica(r.gpus_per_instance, r.per_gpu, gpus_per_replica, bool(r.row_key)):
        return None
    if r.gpus_per_instance == 1:
        return 1, gpus_per_replica * r.usd_per_gpu_hour
    per = r.gpus_per_instance // gpus_per_replica
    return (per, r.gpus_per_instance * r.usd_per_gpu_hour) if per else None


def holds_replica(gpus_per_instance: int, per_gpu: bool, gpus_per_replica: int, catalog: bool = True) -> bool:
    """Whether a row of ``gpus_per_instance`` GPUs holds a replica of ``gpus_per_replica`` (module docstring): an
    instance of that many GPUs or more, or a one-GPU row that rents several per replica (``per_gpu``: a marketplace's
    pods, up to ``POD_MAX_GPUS`` for a ``catalog`` row; a price given, any) — a one-GPU VM holds a TP-1 replica only."""
    if gpus_per_instance == 1:
        return gpus_per_replica == 1 or (per_gpu and (not catalog or gpus_per_replica <= POD_MAX_GPUS))
    return gpus_per_instance >= gpus_per_replica


def _kind(r: GpuRate, n: int) -> str:
    """``1 a3-highgpu-8g instance``, ``2 gpu_1x_h100_sxm5 instances`` (a row named "8x A100 instance": not twice)."""
    t = r.instance_type.removesuffix(" instance")
    return f"{n} {t} instance" + ("" if n == 1 else "s") if t else _plural(n, "instance")


@dataclass(frozen=True, slots=True)
class Packing:
    """``replicas`` replicas of ``gpus_per_replica`` GPUs each on ``instances`` instances, chosen from ``considered``
    rows: all of ``rate`` (a ``GpuRate``), or a mix (``parts``: each row rented and its instances, ``rate``'s first)."""

    rate: GpuRate
    replicas: int
    gpus_per_replica: int
    instances: int
    considered: int = 1
    parts: tuple[tuple[GpuRate, int], ...] = ()
    engines_per_unit: int = 1  # engine replicas (TP groups) in one priced "replica", a deployment unit (--replicas N)

    @property
    def rows(self) -> tuple[tuple[GpuRate, int], ...]:
        """(row, instances) of every row rented: ``parts``, or ``rate`` alone."""
        return self.parts or ((self.rate, self.instances),)

    @property
    def mixed(self) -> bool:
        return len(self.rows) > 1

    @property
    def gpus_per_instance(self) -> int:
        """GPUs per instance; of a mix, the largest instance's."""
        return max(r.gpus_per_instance for r, _ in self.rows)

    @property
    def instance_type(self) -> str:
        """The row's instance type; of a mix, each row's joined by " + "."""
        return " + ".join(r.instance_type for r, _ in self.rows)

    @property
    def gpus(self) -> int:
        """GPUs the replicas use."""
        return self.replicas * self.gpus_per_replica

    @property
    def billed_gpus(self) -> int:
        """GPUs billed: instances × GPUs per instance, over every row rented."""
        return sum(n * r.gpus_per_instance for r, n in self.rows)

    @property
    def idle_gpus(self) -> int:
        return self.billed_gpus - self.gpus

    @property
    def usd_per_hour(self) -> float:
        return sum(n * r.gpus_per_instance * r.usd_per_gpu_hour for r, n in self.rows)

    @property
    def usd_per_gpu_hour(self) -> float:
        """USD per billed GPU-hour: the row's price; of a mix, the bill ÷ the GPUs billed (its rows' average)."""
        return self.usd_per_hour / self.billed_gpus if self.mixed else self.rate.usd_per_gpu_hour

    def words(self) -> str:
        """``1 replica × 1 GPU × 730 h`` on a per-GPU row; ``2 replicas × 1 GPU = 2 GPUs on 1 a3-highgpu-8g instance
        (8 GPUs, 6 idle) × 730 h`` on an instance of several; ``9 replicas × 1 GPU = 9 GPUs on 1 gpu_8x_h100_sxm5
        instance + 1 gpu_1x_h100_sxm5 instance (9 GPUs, 0 idle) × 730 h`` on a mix; a marketplace row's replica of
        several GPUs is one pod of them (``holds_replica``), said so: ``1 replica × 4 GPUs (one 4-GPU pod each, billed
        per GPU) × 730 h``, not four one-GPU machines."""
        head = self.unit_words()
        if not self.mixed and self.gpus_per_instance == 1:
            k = self.gpus_per_replica // self.engines_per_unit  # a catalog marketplace row: one pod per engine
            pod = f" (one {k}-GPU pod each, billed per GPU)" if k > 1 and self.rate.row_key else ""
            return f"{head}{pod} × 730 h"
        return f"{head} = {_plural(self.gpus, 'GPU')} on{self.on_instances()} × 730 h"

    def unit_words(self, by: str = " × ") -> str:
        """``2 replicas × 1 GPU``; 2-engine units: ``6 replicas × 4 GPUs (3 deployment units of 2)``"""
        e = self.engines_per_unit
        head = f"{_plural(self.replicas * e, 'replica')}{by}{_plural(self.gpus_per_replica // e, 'GPU')}"
        if e == 1:
            return head
        units = "one deployment unit" if self.replicas == 1 else f"{self.replicas:,} deployment units of {e}"
        return f"{head} ({units})"

    def on_instances(self) -> str:
        """`` 1 a3-highgpu-8g instance (8 GPUs, 6 idle)``, `` 2 … instances (8 GPUs each, 6 of the 16 idle)`` (over all,
        ``0 idle`` where none is); a mix: each row's instances joined by " + ", then (GPUs billed over all, idle)."""
        if self.mixed:
            return (" " + " + ".join(_kind(r, n) for r, n in self.rows)
                    + f" ({_plural(self.billed_gpus, 'GPU')}, {self.idle_gpus} idle)")
        of_all = f" of the {self.billed_gpus}" if self.idle_gpus else ""  # "0 of the 2 idle" says no more than "0 idle"
        idle = f" each, {self.idle_gpus}{of_all}" if self.instances > 1 else f", {self.idle_gpus}"
        return f" {_kind(self.rate, self.instances)} ({_plural(self.gpus_per_instance, 'GPU')}{idle} idle)"

    def choice(self) -> str:
        """Why this row (or mix): the cheapest packing of the rows considered (empty when there was one)."""
        which = " + ".join(f"{n} × {r.key}" for r, n in self.rows) if self.mixed else self.rate.key
        of = " of " if self.engines_per_unit == 1 else " × "
        return "" if self.considered == 1 else (f"the cheapest packing of {self.considered} rows for this GPU: "
                                                f"{which}, {usd_text(self.usd_per_hour)}/h for {self.unit_words(of)}")

    @property
    def instance_choice(self) -> str | None:
        """``choice()``, None when one row was considered (for JSON)."""
        return self.choice() or None


def idle_item(p: Packing | None, gpu_hours: float, phase: str) -> LineItem | None:
    """The idle GPUs of ``p``'s rented instances per 1M tokens, ``phase`` share: ``gpu_hours`` (the replicas' own
    GPU-hours for it, the GPU rental item) × idle GPUs ÷ the GPUs the replicas use, at the packing's USD per billed
    GPU-hour (``Packing.usd_per_gpu_hour``, as the rental item), as the monthly bill and the break-even utilization
    count them; None when none is idle (a per-GPU row, full instances) or no packing is priced."""
    if p is None or p.idle_gpus <= 0:
        return None
    kinds = "instance" if p.instances == 1 else "instances"
    return LineItem(f"idle GPUs of the rented {kinds} ({p.idle_gpus} of {p.billed_gpus}), {phase} share", "GPU-hour",
                    gpu_hours * p.idle_gpus / p.gpus, p.usd_per_gpu_hour, p.rate.source, p.rate.as_of,
                    f"{gpu_hours:.4g} GPU-hour (the GPU rental, {phase} share) × {p.idle_gpus} idle ÷ {p.gpus} used: "
                    f"the instances are rented whole ({p.words()})")


def no_row_error(rows: tuple[GpuRate, ...], gpus_per_replica: int) -> InputError:
    listed = "; ".join(f"{r.key} ({_plural(r.gpus_per_instance, 'GPU')} per instance"
                       + ((", a pod: one machine" if r.per_gpu else ", a one-GPU machine") if r.gpus_per_instance == 1
                          else "") + ")" for r in rows)
    if gpus_per_replica > POD_MAX_GPUS:  # past one node: no row sells the cluster (module docstring)
        return InputError(f"a replica of {gpus_per_replica} GPUs spans nodes (a TP group's all-reduces, DP ranks' "
                          "MoE all-gathers or pipeline stages' sends cross InfiniBand/RoCE between them), and no price "
                          f"row considered sells a multi-node cluster: {listed} (a marketplace pod is one machine, at "
                          f"most {POD_MAX_GPUS} GPUs). Give the cluster's price per GPU-hour with --gpu-usd-per-hour, "
                          "or a replica within one node")
    return InputError(f"a replica of {gpus_per_replica} GPUs (one tensor-parallel group, linked inside one machine) "
                      "must sit on one instance, "
                      f"and no price row considered has that many GPUs per instance: {listed}. Choose another "
                      f"--gpu-provider or --instance with at least {gpus_per_replica} GPUs, or give "
                      f"--gpu-usd-per-hour")


def _steps(rows: tuple[GpuRate, ...], gpus_per_replica: int) -> tuple[tuple[GpuRate, ...], tuple[Step, ...]]:
    """The rows that hold a replica and their steps for ``instance_mix`` (a per-GPU row bills k GPUs a step)."""
    fits = tuple(r for r in rows if replica_step(r, gpus_per_replica) is not None)
    billed = [gpus_per_replica if r.gpus_per_instance == 1 else r.gpus_per_instance for r in fits]
    return fits, tuple((*replica_step(r, gpus_per_replica), g, r.key) for r, g in zip(fits, billed, strict=True))


def _plain(r: GpuRate) -> GpuRate:
    """``r`` without the choice an earlier packing wrote into it."""
    return replace(r, choice="", source=r.source.removeprefix(f"{r.choice}; ")) if r.choice else r


def pack(rate: GpuRate, replicas: int, gpus_per_replica: int, engines_per_unit: int = 1) -> Packing:
    """The cheapest packing of ``replicas`` replicas of ``gpus_per_replica`` GPUs over ``candidates(rate)``, a mix of
    rows where that bills less (``instance_mix``); the row holding the most replicas is ``rate`` and keeps the others
    as its ``options``, and the choice leads its ``source``. ``engines_per_unit``: the engine replicas in one of those
    (a deployment unit of ``--replicas N``, ``gpus_per_replica`` GPUs over all its engines): the ``replicas`` ×
    ``engines_per_unit`` engines of ``gpus_per_replica`` ÷ ``engines_per_unit`` GPUs are packed, each engine on one
    instance and the unit's engines on as many instances as the cheapest packing takes (two TP-1 engines on two
    1-GPU instances rather than 6 idle GPUs of an 8-GPU one); ``Packing.unit_words`` says the unit.

    Raises:
        InputError: no candidate row has ``gpus_per_replica`` GPUs or more per instance (the rows are named).
    """
    rows, e = candidates(rate), max(engines_per_unit, 1)
    k = gpus_per_replica // e  # one engine's GPUs: engines are packed, each on one instance, not the unit whole
    fits, steps = _steps(rows, k)
    if not fits:
        raise no_row_error(rows, k)
    counts = cheapest_counts(steps, max(replicas, 1) * e)  # no replica: one instance's row, none billed
    held = sorted((i for i, c in enumerate(counts) if c),
                  key=lambda i: (-counts[i] * steps[i][0], -fits[i].gpus_per_instance, fits[i].key))
    parts = tuple((_plain(fits[i]), counts[i] * (k if fits[i].gpus_per_instance == 1 else 1)) for i in held)
    if replicas <= 0:
        parts = ((parts[0][0], 0),)
    chosen = Packing(parts[0][0], replicas, gpus_per_replica, sum(n for _, n in parts), len(rows),
                     parts if len(parts) > 1 else (), engines_per_unit)
    r, text = chosen.rate, chosen.choice()
    rate = replace(r, options=tuple(o for o in rows if o.key != r.key), choice=text,
                   source=f"{text}; {r.source}" if text else r.source)
    return replace(chosen, rate=rate, parts=((rate, parts[0][1]), *parts[1:]) if chosen.parts else ())

