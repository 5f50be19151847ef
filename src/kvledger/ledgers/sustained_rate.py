"""The good rates a replica sustains at its SLO capacity, from a finite run at that rate.

A rate search's run at the SLO capacity C offers N requests and measures goodput as good requests ÷ (first arrival →
last finish). That duration holds the drain tail — the last requests still running after arrivals stop — which a replica
serving a steady stream never has: a 200-request run at 29.5 req/s arrives over 6.8 s and may drain for as long again,
so its goodput reads half of what the replica sustains, and a price per good token divided by it moves about 2× with
``--num-requests`` (a fresh user's trial). At a steady state the replica serves the C req/s offered, of which the share
within the SLO (the run's attainment a) are good: good req/s = C × a, and the good token rates scale alike, the tokens
per good request kept (the run's own). The factor is C × duration ÷ N (since a = good ÷ N and goodput = good ÷
duration), the same for every rate the run measured, so its throughput (completed tokens ÷ duration, the sticker price's
denominator) scales by it too and stays at or above the goodput. A measured file is not rescaled: its stated duration
and goodput are what was measured, and no offered rate is known to be its capacity.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

__all__ = ["at_attainment"]


def at_attainment(cap: Any, attainment: float | None) -> Any:
    """``cap`` (``ledgers.cost.Capacity``) with its good rates those sustained at its SLO capacity: good req/s = SLO
    capacity × ``attainment`` (the share of the run's requests within the SLO), the good and the completed token rates
    scaled by the same factor (tokens per request kept); unchanged without an SLO capacity, an attainment or a
    goodput."""
    c = cap.searched_req_per_s  # the rate sized on: the SLO capacity, or the capacity bound where it caps it
    if not c or attainment is None or not cap.goodput_req_per_s:
        return cap
    k = c * attainment / cap.goodput_req_per_s
    return replace(cap, goodput_req_per_s=c * attainment, good_input_tok_per_s=cap.good_input_tok_per_s * k,
                   good_output_tok_per_s=cap.good_output_tok_per_s * k,
                   throughput_input_tok_per_s=cap.throughput_input_tok_per_s * k,
                   throughput_output_tok_per_s=cap.throughput_output_tok_per_s * k)
