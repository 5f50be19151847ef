"""The notes ``cost --simulate`` adds for the KV tiers it prices: which tier the capacity was simulated with (and by
which engine rule), and which is priced only."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.tier_cost_capacity import TierCapacity

__all__ = ["tier_notes"]


def tier_notes(bill: Any, capacity: Any) -> list[str]:
    """One note per tier of ``bill`` (a ``KvTierBill``): the host tier simulated when ``capacity`` is a
    ``TierCapacity``; every other tier priced only."""
    out = []
    simulated = isinstance(capacity, TierCapacity)
    rest = [t for t in bill.tiers if not (simulated and t.kind == "host")]
    if simulated:
        c, w = capacity, capacity.without_tier
        out.append(f"the host KV tier ({c.tier_gib_per_gpu:,.4g} GiB per GPU; {c.engine_flags}) is simulated: the "
                   f"capacity priced, {c.rate_req_per_s:g} req/s ({c.goodput_req_per_s:,.3f} good req/s), was "
                   "found with the tier in the simulator by the search report and goodput --simulate --target run "
                   f"with tier flags ({c.rule}); without it {w.rate_req_per_s:g} req/s "
                   f"({w.goodput_req_per_s:,.3f} good req/s)")
    if rest:
        why = ("the simulator models one tier below HBM, the host one, and vLLM's native connector has no disk tier"
               if simulated else
               "cost --simulate simulates the host tier only (--kv-tier-host), and only at the SLO capacity, not with "
               "--at-offered-load" if capacity is None else
               "cost --simulate simulates the host tier only (--kv-tier-host)")
        out.append(f"the KV tier ({sum(t.size_gib for t in rest):,.0f} GiB per GPU of "
                   + " + ".join(t.kind for t in rest) + f") is priced only: the capacity is simulated without it "
                   f"({why}; simulate --kv-offloading-size shows its hits and TTFT)")
    return out
