"""What every cost report starts with: the run it priced, its SLO, the capacity and inputs, and the two self-hosted
per-token ledgers (``cost_summary.CostReport``, with the API side; ``self_host_only.SelfHostReport``, without)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.ledgers.items import Ledger

__all__ = ["SelfHostLedgers"]


@dataclass(slots=True)
class SelfHostLedgers:
    """The fields both reports open with, in their order (their ``__json__`` names them)."""

    source: str
    slo: dict[str, Any]
    capacity: dict[str, Any]
    inputs: dict[str, Any]
    self_host_input: Ledger
    self_host_output: Ledger
