"""Dollar amounts and percentages as the cost answers print them, one way in every command: cents, and significant
digits where a fixed number of decimals would print nothing (a month of $0.0031, a utilization of 0.0075%)."""

from __future__ import annotations

import math

__all__ = ["usd_text", "pct_text", "unit_noun", "units_text", "people_as_of"]


def _decimals(x: float, digits: int) -> int:
    """Decimals that show ``digits`` significant digits of ``x`` (≠ 0)."""
    return digits - 1 - math.floor(math.log10(abs(x)))


def usd_text(x: float) -> str:
    """A dollar amount: cents ($0.24, $6,963.70), whole dollars from $100,000, and 2 significant digits where cents
    would show nothing ($0.0031, not $0.00)."""
    if x and abs(x) < 0.005:
        return f"${x:.{_decimals(x, 2)}f}"
    return f"${x:,.2f}" if abs(x) < 1e5 else f"${x:,.0f}"


def pct_text(fraction: float, decimals: int = 1) -> str:
    """A fraction as a percentage with ``decimals`` decimals (0.25 → 25.0%), and 2 significant digits where those
    would show nothing (7.5e-5 → 0.0075%, not 0.0%)."""
    p = 100 * fraction
    if p and abs(p) < 0.5 * 10 ** -decimals:
        return f"{p:.{_decimals(p, 2)}f}%"
    return f"{p:.{decimals}f}%"


def unit_noun(engines: int = 1) -> str:
    """What one of the replicas a volume is sized in is: a ``replica`` (one engine of TP × PP GPUs), or, where the
    priced run is a ``deployment unit`` of several engine replicas behind a router (``--replicas N``), that."""
    return "replica" if engines <= 1 else "deployment unit"


def units_text(n: int, engines: int = 1) -> str:
    """``1 replica``, ``3 replicas``; of ``--replicas N`` units: ``1 deployment unit``, ``3 deployment units``."""
    return f"{n:,} {unit_noun(engines)}{'' if n == 1 else 's'}"


def people_as_of(people_source: str) -> str:
    """The people line's "as of": "assumption" for kvledger's default figures, "user input" for the user's, both when
    one flag was given and the other figure is the default (``host_bill.people_cost`` writes the source)."""
    if "default" not in people_source:
        return "user input"
    return "user input and assumption" if people_source.startswith("user input") else "assumption"
