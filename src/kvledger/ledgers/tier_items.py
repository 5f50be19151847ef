"""KV tiers below HBM as cost line items: host memory (DRAM) and NVMe held for the KV offload tier.

A tier is bought per GPU: ``size_gib`` of host memory or NVMe reserved for the KV cache next to each GPU, at a price in
USD per GiB-month (GiB = 2^30 B; a month is 730 h). Over a period of ``H`` GPU-hours the tier is held for the same
hours as the GPUs it serves, so

    GiB-months = size_gib per GPU × GPU-hours ÷ 730
    USD        = GiB-months × USD per GiB-month

which for one replica of ``N`` GPUs over one month (``H = N × 730``) is size × N × price. The GPU-hours are those of the
GPU rental line item the tier rides on (a per-1M-token ledger's GPU-hours, a monthly bill's GPU-hours).

Prices: the user's flag (``--host-memory-usd-per-gib-month``, ``--nvme-usd-per-gib-month``) or, without one, the
cheapest bundled row of ``catalog/data/tier_prices.csv`` (``catalog/tier_prices.py``: dated public figures with their
source, region and a low confidence grade), named in the item's source and as-of date.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvledger.errors import InputError
from kvledger.ledgers.items import LineItem
from kvledger.ledgers.month import HOURS_PER_MONTH

__all__ = ["TierRate", "KvTierBill", "tier_items", "tier_usd_per_month", "TIER_KINDS"]

TIER_KINDS = {"host": ("host memory for the KV tier", "--host-memory-usd-per-gib-month"),
              "nvme": ("NVMe for the KV tier", "--nvme-usd-per-gib-month")}
"""Tier kind → (line-item name, the flag that prices it)."""

# a rented GPU instance's own memory and disk are in its hourly price: a default row's price is an added cost only for
# memory or disk bought beyond them (AWS p5.48xlarge: 2 TiB of memory for 8 H100s, docs/offload.md, and 8 × 3.84 TB
# of local NVMe, AWS's P5 instance page, all in its rental)
_OWN = {"host": "the host memory a rented GPU instance comes with is in its hourly price",
        "nvme": "the local NVMe a rented GPU instance comes with is in its hourly price"}


@dataclass(frozen=True, slots=True)
class TierRate:
    """One tier bought per GPU: ``size_gib`` (GiB per GPU) at ``usd_per_gib_month`` with its provenance."""

    kind: str
    size_gib: float
    usd_per_gib_month: float
    source: str
    as_of: str = "user input"

    @classmethod
    def given(cls, kind: str, size_gib: float, usd_per_gib_month: float | None) -> TierRate:
        """A tier priced by the user's flag, or without one by the bundled default (``catalog/tier_prices.py``).

        Raises:
            InputError: an unknown kind, a size that is not a positive finite number, or a price that is negative or
                not finite.
        """
        if kind not in TIER_KINDS:
            raise InputError(f"tier kind must be one of {', '.join(TIER_KINDS)}, got {kind!r}")
        flag = TIER_KINDS[kind][1]
        if not (isinstance(size_gib, (int, float)) and math.isfinite(size_gib) and size_gib > 0):
            raise InputError(f"the {kind} KV tier size must be a positive number of GiB per GPU, got {size_gib!r}")
        if usd_per_gib_month is None:
            from kvledger.catalog.tier_prices import default_tier_price

            row = default_tier_price(kind)
            if row is None:
                raise InputError(f"a {kind} KV tier needs its price: {flag} (USD per GiB-month; the price table has "
                                 f"no {kind} row)")
            return cls(kind, float(size_gib), row.usd_per_gib_month, f"{row.citation} (no {flag} given; {_OWN[kind]}: "
                       f"{flag} 0 prices a tier that fits in it)", row.as_of)
        if not (math.isfinite(usd_per_gib_month) and 0 <= usd_per_gib_month <= 1e4):
            raise InputError(f"{flag} must be a finite price in [0, 10000] USD per GiB-month, got "
                             f"{usd_per_gib_month!r}")
        return cls(kind, float(size_gib), float(usd_per_gib_month), f"user input ({flag})")


@dataclass(frozen=True, slots=True)
class KvTierBill:
    """The tiers bought next to every GPU of a deployment (empty: no tier, nothing priced)."""

    tiers: tuple[TierRate, ...] = ()

    @property
    def gib_per_gpu(self) -> float:
        return sum(t.size_gib for t in self.tiers)


def tier_items(bill: KvTierBill | None, gpu_hours: float, context: str = "") -> list[LineItem]:
    """One line item per tier for ``gpu_hours`` GPU-hours (GiB-months = size × GPU-hours ÷ 730)."""
    out = []
    for t in (bill.tiers if bill is not None else ()):
        qty = t.size_gib * gpu_hours / HOURS_PER_MONTH
        out.append(LineItem(TIER_KINDS[t.kind][0], "GiB-month", qty, t.usd_per_gib_month, t.source, t.as_of,
                            f"{t.size_gib:g} GiB per GPU × {gpu_hours:.6g} GPU-hours{context} ÷ 730 h/month"))
    return out


def tier_usd_per_month(bill: KvTierBill | None, num_gpus: float) -> float:
    """Σ size × GPUs × USD per GiB-month: what the tiers of ``num_gpus`` GPUs cost per month, USD."""
    return sum(t.size_gib * num_gpus * t.usd_per_gib_month for t in (bill.tiers if bill is not None else ()))
