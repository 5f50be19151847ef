"""The typed records of ``kvledger search --offload``'s tier variants, read from the ``offload`` block of its ``--json``
(``offload_axis.offload_summary``; each row's figures were set by ``tier_entries``): ``OffloadVariant`` per variant,
its ``TierPrice`` and one ``MoreGpusRow`` per setup without a tier it is compared with. ``kvledger.search`` carries
them as ``SearchDocument.offload``; the JSON stays the document's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["OffloadVariant", "TierPrice", "MoreGpusRow"]


@dataclass(frozen=True)
class TierPrice:
    """The tier's price: usd_per_gib_month (USD per GiB-month), its source (a tier_prices.csv row, or the price
    given) and as_of (the row's date; None for a price given)."""

    usd_per_gib_month: float
    source: str
    as_of: str | None


@dataclass(frozen=True)
class MoreGpusRow:
    """One setup without a tier the variant is compared with (its base with more replicas, or a larger TP of the
    same setup): ``id``, ``more_gpus`` (how it adds GPUs), ``num_gpus``; the two bills, as the monthly bill for the
    load (usd_per_month, tier_usd_per_month: USD/month) with a load, else per 1k requests at capacity
    (usd_per_1k_requests, tier_usd_per_1k_requests: USD); ``tier_cheaper``; ``text`` (the comparison in words)."""

    id: str
    more_gpus: str
    num_gpus: int
    tier_cheaper: bool
    text: str
    usd_per_month: float | None = None
    tier_usd_per_month: float | None = None
    usd_per_1k_requests: float | None = None
    tier_usd_per_1k_requests: float | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any], by_bill: bool) -> MoreGpusRow:
        """The row of its JSON (``tier_entries.compare``: ``usd`` and ``tier_usd`` in the variant's basis)."""
        money = ({"usd_per_month": d["usd"], "tier_usd_per_month": d["tier_usd"]} if by_bill
                 else {"usd_per_1k_requests": d["usd"], "tier_usd_per_1k_requests": d["tier_usd"]})
        return cls(id=d["id"], more_gpus=d["more_gpus"], num_gpus=d["num_gpus"], tier_cheaper=d["tier_cheaper"],
                   text=d["text"], **money)


@dataclass(frozen=True)
class OffloadVariant:
    """One --offload variant: ``id``, its ``base`` candidate, the tier (``offload``: cpu:256GiB), ``status`` (and the
    ``reason`` where not feasible), ``tier_price`` and tier_usd_per_month_per_unit (the tier's bill per deployment
    unit, USD/month). Feasible: slo_capacity_req_per_s and goodput_req_per_s (req/s), ``sizing`` (the candidate's
    sizing block, None without a load), ``vs_more_gpus``, beats_more_gpus, cheaper_than_without (None where nothing
    without a tier is feasible to compare with) and ``verdict`` in words; None / empty otherwise."""

    id: str
    base: str
    offload: str
    status: str
    reason: str | None
    tier_price: TierPrice
    tier_usd_per_month_per_unit: float
    slo_capacity_req_per_s: float | None = None
    goodput_req_per_s: float | None = None
    sizing: dict[str, Any] | None = None
    vs_more_gpus: tuple[MoreGpusRow, ...] = ()
    beats_more_gpus: bool | None = None
    cheaper_than_without: bool | None = None
    verdict: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> OffloadVariant:
        """The record of one row of ``--json``'s ``offload``."""
        by_bill = d.get("sizing") is not None
        rest = {k: d[k] for k in ("slo_capacity_req_per_s", "goodput_req_per_s", "sizing", "beats_more_gpus",
                                  "cheaper_than_without", "verdict") if k in d}
        return cls(id=d["id"], base=d["base"], offload=d["offload"], status=d["status"], reason=d.get("reason"),
                   tier_price=TierPrice(**d["tier_price"]),
                   tier_usd_per_month_per_unit=d["tier_usd_per_month_per_unit"],
                   vs_more_gpus=tuple(MoreGpusRow.from_json(r, by_bill) for r in d.get("vs_more_gpus", ())), **rest)
