"""Prices of the KV tiers below HBM, per GiB-month: host memory (DRAM) and local NVMe, each row with its source,
date, region and a confidence grade (``catalog/data/tier_prices.csv``; provenance in ``prices.SOURCES.md``).

They are the defaults of the cost ledger's tier line items (``ledgers/tier_items.py``) when a tier is given without a
price: the cheapest row of its kind. Every row is old (2015, 2018) and graded low: a GPU instance usually includes its
host memory and local disk in its price, and current list prices differ, so a price you know beats the default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from kvledger.catalog.prices import rows_from_text
from kvledger.errors import ConfigError

__all__ = ["TierPrice", "tier_prices", "default_tier_price"]

_COLUMNS = ("kind", "provider", "region", "usd_per_gib_month", "basis", "as_of", "source", "confidence", "notes")


@dataclass(frozen=True, slots=True)
class TierPrice:
    """One row: ``kind`` "host" or "nvme", USD per GiB-month, where and when it was listed, and its source."""

    kind: str
    provider: str
    region: str
    usd_per_gib_month: float
    basis: str
    as_of: str
    source: str
    confidence: str
    notes: str

    @property
    def key(self) -> str:
        return f"{self.provider}:{self.kind}:{self.region}"

    @property
    def citation(self) -> str:
        """``tier_prices.csv GCP:host:us-central1 (low confidence): basis; source`` for a line item's source."""
        return f"tier_prices.csv {self.key} ({self.confidence} confidence): {self.basis}; {self.source}"


def tier_prices_from_text(text: str, name: str = "tier_prices.csv") -> tuple[TierPrice, ...]:
    """The rows of a CSV text in the ``tier_prices.csv`` layout.

    Raises:
        ConfigError: a missing column, an unknown kind, or a price that is not a finite number in [0, 10,000].
    """
    out = []
    for r in rows_from_text(text, name, _COLUMNS):
        try:
            price = float(r["usd_per_gib_month"])
        except ValueError:
            price = math.nan
        if r["kind"] not in ("host", "nvme") or not (math.isfinite(price) and 0 <= price <= 1e4):
            raise ConfigError(name, f"line {r['_line']}: kind must be host or nvme and usd_per_gib_month a price in "
                                    f"[0, 10000], got {r['kind']!r}, {r['usd_per_gib_month']!r}")
        out.append(TierPrice(r["kind"], r["provider"], r["region"], price, r["basis"], r["as_of"], r["source"],
                             r["confidence"], r["notes"]))
    return tuple(out)


@cache
def tier_prices() -> tuple[TierPrice, ...]:
    """The bundled rows."""
    from importlib.resources import files

    return tier_prices_from_text(files("kvledger.catalog").joinpath("data", "tier_prices.csv").read_text("utf-8"))


def default_tier_price(kind: str) -> TierPrice | None:
    """The cheapest bundled row of ``kind`` (the first in the file on a tie), or None when there is none."""
    rows = [r for r in tier_prices() if r.kind == kind]
    return min(rows, key=lambda r: r.usd_per_gib_month) if rows else None
