"""The web app's host KV tier (``kvledger ui``'s plan panel): vLLM's ``--kv-offloading-size`` in GiB, summed over
the TP ranks, sized and priced as ``kvledger plan --kv-offloading-size`` does (``plan_pricing.simulate_priced_tiers``
with the command's defaults: no GPU profile, the host link at 0.8 of its per-direction peak, a 1-token suffix), its
size held to the command's range (``ranges.TIER_SIZE_GIB``) and to one node's host memory (``tier_bounds``)."""

from __future__ import annotations

from typing import Any

__all__ = ["host_tier_section", "serving_tier", "tier_shares"]


def host_tier_section(p: Any, size_gib: float | None) -> dict[str, Any] | None:
    """``plan --json``'s ``kv_tiers`` for plan ``p`` with a host tier of ``size_gib`` GiB (None: no tier, None back).

    Raises:
        InputError: a size outside the range, beyond one node's host memory, or one the engine refuses (SGLang's
            host tier is HiCache, not this flag), in the flag's words (``webapp_words`` turns them into the field's).
    """
    if size_gib is None:
        return None
    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.accounting.tier_bounds import check_tier_bounds
    from kvledger.analyses.serving.plan_pricing import PricingFlags, simulate_priced_tiers
    from kvledger.ranges import TIER_SIZE_GIB

    TIER_SIZE_GIB.check("--kv-offloading-size", size_gib)
    t = TierSettings(kv_offloading_size_gib=float(size_gib))
    check_tier_bounds(t, p.gpu, p.settings.tp, p.settings.pp)
    return simulate_priced_tiers(p, t, PricingFlags(None, None, None, None, None)).to_dict()


def serving_tier(size_gib: float | None, gpu: str, tp: int) -> Any:
    """The serving panel's host KV tier: the plan panel's ``kv_offloading_size`` (GiB summed over the TP ranks) as
    ``kvledger report --kv-offloading-size`` takes it, a ``TierSettings`` (None: no tier), its size held to the
    command's range and to one node's host memory before any simulation.

    Raises:
        InputError: a size outside the range or beyond one node's host memory, in the flag's words.
    """
    if size_gib is None:
        return None
    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.accounting.tier_bounds import check_tier_bounds
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.ranges import TIER_SIZE_GIB

    TIER_SIZE_GIB.check("--kv-offloading-size", size_gib)
    t = TierSettings(kv_offloading_size_gib=float(size_gib))
    check_tier_bounds(t, resolve_gpu(gpu), tp, 1)
    return t


def tier_shares(section: dict[str, Any] | None) -> dict[str, float] | None:
    """Each KV tier's simulated share of prompt tokens at the capacity (``report_tiers``' run with the tier), by tier
    name; None without a tier run."""
    if section is None or section.get("kv_tiers") is None:
        return None
    return {r["tier"]: r["hit_rate"] for r in section["kv_tiers"]["per_tier"]}
