"""Itemised ledgers: every total is the sum of named line items, each with unit, quantity, unit price, source and as-of
date.

The shape follows nanoGPT's transformer-sizing notebook: name every contribution, sum
them, and let the reader check each product. ``amount_usd = quantity × unit_price_usd``
is computed here, never typed in, so a ledger cannot disagree with its items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import json_fields, to_jsonable

__all__ = ["LineItem", "Ledger", "dated"]


@dataclass(frozen=True, slots=True)
class LineItem:
    """One priced quantity.

    Attributes:
        name: what is bought ("GPU rental", "output tokens, batch API", ...).
        unit: the unit of ``quantity`` ("GPU-hour", "Mtok", "engineer-month").
        quantity: how many units, in ``unit``.
        unit_price_usd: USD per unit.
        source: where the unit price comes from (catalog row, user input, formula).
        as_of: date of the price ("user input" when the user gave it).
        note: how the quantity was obtained.
    """

    __json__ = ("name", "unit", "quantity", "unit_price_usd", "amount_usd", "source", "as_of", "note")
    name: str
    unit: str
    quantity: float
    unit_price_usd: float
    source: str
    as_of: str
    note: str = ""

    @property
    def amount_usd(self) -> float:
        """quantity × unit price, USD."""
        return self.quantity * self.unit_price_usd

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def dated(source: str, as_of: str | None) -> str:
    """``source`` with its price's date, "… (as of 2026-03)"; none for a price the user gave (its source says so)."""
    return source if not as_of or as_of == "user input" else f"{source} (as of {as_of})"


@json_fields(extra=("total_usd",))
@dataclass(slots=True)
class Ledger:
    """Named line items and their sum.

    Attributes:
        name: what the total is ("self-hosted cost per 1M output tokens").
        per: the unit of the total ("USD per 1M output tokens", "USD per month").
        items: the line items; the total is their sum.
    """

    name: str
    per: str
    items: list[LineItem] = field(default_factory=list)

    @property
    def total_usd(self) -> float:
        """Σ item amounts, USD (in the unit ``per``)."""
        return sum(i.amount_usd for i in self.items)

    def add(self, item: LineItem) -> None:
        """Append an item (items with zero quantity are kept only when they carry a note, to show what was left out)."""
        if item.quantity != 0 or item.note:
            self.items.append(item)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
