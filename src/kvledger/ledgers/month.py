"""The month every monthly figure is priced over: 730 hours (8,760 hours a year ÷ 12), the month GPU rental
and cloud price lists bill by; one constant for every ledger (days per month = 730 / 24 = 30.42)."""

from __future__ import annotations

__all__ = ["HOURS_PER_MONTH"]

#: hours in a billing month: 365 × 24 / 12
HOURS_PER_MONTH = 730.0
