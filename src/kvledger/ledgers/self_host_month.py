"""The self-hosted side of the build-or-buy decision for one month: whole replicas for a rate at the allowed
utilization, the bill of those replicas (rented, or bought: amortized purchase, power at the load, hosting; plus the KV
tiers and people), and the same sizing redone at one end of the capacity band (``BandEnd``).

The self-hosted bill never rises with the capacity: a higher SLO capacity per replica means as many replicas or fewer,
each less loaded (a rented bill does not depend on the load; a bought one's power falls with it). So the cheaper side
at a fixed API bill is the same across a band of capacities exactly when it is the same at both ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.amounts import pct_text, people_as_of, units_text
from kvledger.ledgers.cost import HOURS_PER_MONTH, SelfHostSetup
from kvledger.ledgers.host_bill import HostBill, capex_item, hosting_item, power_item
from kvledger.ledgers.instances import GpuRate, Packing, pack
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.ledgers.tier_items import tier_items
from kvledger.ledgers.volume import Volume

__all__ = ["GpuPower", "replicas_for", "monthly_self_host", "VolumeSizing", "size_volume", "BandEnd", "band_end",
           "priced_as_bought", "bought_power"]


@dataclass(frozen=True, slots=True)
class GpuPower:
    """Board power and idle power of one GPU (W), with their sources (catalog TDP, idle-power table or user input)."""

    board_w: float
    idle_w: float
    source: str


def replicas_for(rate_req_per_s: float, cap_req_per_s: float, max_utilization: float) -> int:
    """Whole replicas to serve ``rate`` with none above ``max_utilization`` of its capacity; at least one."""
    return max(1, math.ceil(rate_req_per_s / (cap_req_per_s * max_utilization) - 1e-12))


def _power_price_source(buy: HostBill) -> str:
    """Where the PUE and the electricity price come from: the defaults' sources, else the user's flags."""
    from kvledger.ledgers.host_bill import DEFAULT_PUE, DEFAULT_USD_PER_KWH, KWH_SOURCE, PUE_SOURCE

    return (
        "; ".join(
            s
            for s, dflt in (
                (PUE_SOURCE, buy.pue == DEFAULT_PUE),
                (KWH_SOURCE, buy.usd_per_kwh == DEFAULT_USD_PER_KWH),
            )
            if dflt
        )
        or "user input (--pue, --usd-per-kwh)"
    )


def monthly_self_host(
    setup: SelfHostSetup,
    replicas: int,
    load: float,
    *,
    buy: HostBill | None = None,
    power: GpuPower | None = None,
    people_source: str = "user input",
) -> Ledger:
    """The self-hosted bill per month for ``replicas`` replicas at ``load``: rented (the default: whole instances of the
    cheapest packing, ``instances.pack``) or, with ``buy``, bought (amortized purchase, power at the load, hosting).
    People are one line for the service, not per replica."""
    gpus = replicas * setup.num_gpus
    sizing = f"{units_text(replicas, setup.engine_replicas)} × {setup.num_gpus} GPU{'' if setup.num_gpus == 1 else 's'}"
    if buy is None:  # rented: whole instances of the row, idle GPUs billed (ledgers/instances.py)
        led = Ledger("self-hosted bill per month, rented GPUs", "USD per month")
        p = pack(setup.gpu, replicas, setup.num_gpus, setup.engine_replicas)
        for r, n in p.rows:  # one line a row rented (a mix of instance sizes: several); source: the choice
            g = n * r.gpus_per_instance
            name, note = (("GPU rental (power and hosting included)", p.words()) if not p.mixed else
                          (f"GPU rental, {r.key} (power and hosting included)",
                           f"{g} of the {p.billed_gpus} GPUs billed: {p.words()}"))
            led.add(LineItem(name, "GPU-hour", g * HOURS_PER_MONTH, r.usd_per_gpu_hour, r.source, r.as_of, note))
    else:
        led = Ledger("self-hosted bill per month, bought GPUs", "USD per month")
        led.add(capex_item(gpus, buy))
        if power is not None:
            led.add(power_item(gpus, power.board_w, power.idle_w, load, buy.pue, buy.usd_per_kwh,
                               f"{power.source}; {_power_price_source(buy)}"))
        led.add(hosting_item(gpus, buy))
    for item in tier_items(setup.kv_tiers, gpus * HOURS_PER_MONTH, f" ({sizing} × 730 h)"):
        led.add(item)
    led.add(
        LineItem(
            "people (engineers running it)",
            "engineer-month",
            setup.engineer_months_per_month,
            setup.engineer_usd_per_month,
            people_source,
            people_as_of(people_source),
        )
    )
    return led


@dataclass(frozen=True, slots=True)
class VolumeSizing:
    """Whole replicas for a volume's peak and their month: ``replicas``, the realized utilization ``load`` (mean rate ÷
    the replicas' capacity), the ``packing`` they are billed on, ``setup`` priced at that packing's rate, the rented
    bill ``rent``, the bought one ``bought`` (None unless priced) and the sizing's one-line derivation ``how``."""

    replicas: int
    load: float
    packing: Packing
    setup: SelfHostSetup
    rent: Ledger
    bought: Ledger | None
    how: str


def size_volume(cap: Any, setup: SelfHostSetup, vol: Volume, *, buy: HostBill | None = None,
                power: GpuPower | None = None, people_source: str = "user input") -> VolumeSizing:
    """Replicas for ``vol``'s peak at ``setup.max_utilization`` of ``cap.sizing_req_per_s`` (the SLO capacity), their
    realized utilization and monthly bills on whole instances (``instances.pack``): what ``decision.decide`` and the
    self-host-only report both size."""
    c = cap.sizing_req_per_s
    n = replicas_for(vol.peak_rate_req_per_s, c, setup.max_utilization)
    load = vol.rate_req_per_s / (n * c)
    packing = pack(setup.gpu, n, setup.num_gpus, setup.engine_replicas)  # the n replicas' row: its rate prices the rest
    billed = replace(setup, gpu=packing.rate)
    rent = monthly_self_host(billed, n, load, people_source=people_source)
    bought = None
    if buy is not None and buy.gpu_capex_usd is not None:
        bought = monthly_self_host(billed, n, load, buy=buy, power=power, people_source=people_source)
    peak = ("offered at the peak" if vol.peak_to_mean != 1 else
            "offered (the monthly mean: --peak-to-mean 1, flat traffic, the default)")
    most = " (at most: the capacity is a lower bound)" if cap.lower_bound else ""
    what = "replicas" if setup.engine_replicas <= 1 else "deployment units"  # --replicas N: units of N engines
    how = (f"{what} = ⌈{vol.peak_rate_req_per_s:,.4g} req/s {peak} ÷ ({cap.sizing_words} × "
           f"{setup.max_utilization:.0%})⌉ = {n:,}{most}; utilization = {vol.rate_req_per_s:,.4g} req/s mean ÷ "
           f"({n:,} × {c:,.4g}) = {pct_text(load)}")
    return VolumeSizing(n, load, packing, billed, rent, bought, how)


@dataclass(frozen=True, slots=True)
class BandEnd:
    """The decision redone at one end of the capacity band: the capacity multiplier k (e.g. 0.58), the rate a replica is
    sized on there (k × the sizing rate, offered req/s per replica; a measured file's goodput stands in), the replicas
    the volume then needs, their realized utilization, the self-hosted bill (USD/month, the cheaper of rented and
    bought, people included) and the verdict against the same API bill."""

    capacity_multiplier: float
    sizing_req_per_s: float
    replicas: int
    realized_utilization: float
    self_host_usd_per_month: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def band_end(k: float, capacity_req_per_s: float, setup: SelfHostSetup, vol: Volume, api_usd: float, *,
             buy: HostBill | None = None, power: GpuPower | None = None, people_source: str = "user input") -> BandEnd:
    """The decision with each replica's SLO capacity ``k`` × ``capacity_req_per_s`` (offered req/s): replicas for the
    volume's peak, realized utilization, the self-hosted bill (rented, or bought when cheaper) and the verdict against
    ``api_usd``."""
    g = capacity_req_per_s * k
    n = replicas_for(vol.peak_rate_req_per_s, g, setup.max_utilization)
    load = vol.rate_req_per_s / (n * g)
    sh = monthly_self_host(setup, n, load, people_source=people_source).total_usd
    if buy is not None and buy.gpu_capex_usd is not None:
        sh = min(sh, monthly_self_host(setup, n, load, buy=buy, power=power, people_source=people_source).total_usd)
    return BandEnd(k, g, n, load, sh, "self-host" if sh < api_usd else "API")


#: the bought bill's GPU items (``monthly_self_host``): what a bought GPU-hour costs, people and KV tiers apart
BOUGHT_GPU_ITEMS = ("GPU purchase, amortized", "power (bought GPUs)", "hosting (rack, network, support)")


def priced_as_bought(d: Any, setup: SelfHostSetup,
                     load_words: str = "the volume's realized utilization") -> tuple[SelfHostSetup, Packing] | None:
    """Where the verdict compares the bought bill (``d.buy`` priced and cheaper than renting): ``setup`` at the bought
    GPUs' own USD per GPU-hour — the bought bill's purchase, power and hosting items ÷ (its GPUs × 730 h), power at the
    volume's realized utilization — and their packing (bought one GPU at a time: none idle), so the per-token
    ledgers, the sticker and break-even price the bill the verdict uses; None where that is the rented bill."""
    if d is None or d.buy is None or d.buy.total_usd >= d.self_host.total_usd:
        return None
    items = [i for i in d.buy.items if i.name in BOUGHT_GPU_ITEMS]
    gpus = d.replicas * setup.num_gpus
    how = " + ".join(f"{i.name} ${i.amount_usd:,.2f}" for i in items)
    many = f"{gpus:,} GPU{'' if gpus == 1 else 's'}"
    rate = GpuRate.given(sum(i.amount_usd for i in items) / (gpus * HOURS_PER_MONTH), "bought GPU",
                         f"the bought bill per month ({how}) ÷ ({many} × 730 h); power at {load_words} "
                         f"{pct_text(d.realized_utilization)}")
    bought = replace(setup, gpu=rate, gpu_item="bought GPU (amortized purchase, power, hosting)")
    return bought, pack(rate, d.replicas, setup.num_gpus, setup.engine_replicas)


def bought_power(d: Any, buy: HostBill | None, power: GpuPower | None) -> tuple[float, float] | None:
    """Where ``priced_as_bought`` prices the bought bill: (b, u₀), the power's USD per GPU-month per unit of load,
    (board − idle) W × PUE × 730 h ÷ 1000 × USD/kWh, and the load it was priced at (the volume's realized
    utilization), for a break-even that prices power at its own load (``breakeven.break_even_utilization``); None for a
    rented bill or no power item."""
    if buy is None or power is None or d is None or d.buy is None or d.buy.total_usd >= d.self_host.total_usd:
        return None
    b = (power.board_w - power.idle_w) * buy.pue * HOURS_PER_MONTH / 1000.0 * buy.usd_per_kwh
    return b, d.realized_utilization
