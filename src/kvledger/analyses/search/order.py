"""The order of feasible search candidates: the sort key the ranking, the frontier and the margin share."""

from __future__ import annotations

from typing import Any

__all__ = ["rank_key"]


def rank_key(entry: dict[str, Any]) -> tuple[float, float]:
    """Sort key of a feasible entry: (monthly bill or USD per 1k requests, USD per 1k requests at SLO capacity)."""
    cost, sizing = entry["cost"], entry.get("sizing")
    return (sizing["monthly_usd"] if sizing else cost["usd_per_1k_requests"], cost["usd_per_1k_requests_at_capacity"])
