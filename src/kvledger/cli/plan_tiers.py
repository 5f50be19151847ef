"""The KV tiers of a memory plan, shared by ``kvledger plan`` and the Python ``kvledger.plan``: the tier flags read
(``tier_opts.tier_settings``, with the plan's link share), their sizes checked against one node, SGLang's HiCache rule
set on the engine settings, and the tiers sized and priced once the plan is built (``plan_pricing``)."""

from __future__ import annotations

from typing import Any

__all__ = ["plan_tier_settings", "plan_tier_plan"]


def plan_tier_settings(tiers: Any, more: Any, g: Any, settings: Any) -> tuple[Any, Any]:
    """(the ``TierSettings`` of ``tiers``, ``settings`` with HiCache on where SGLang's flag turns it on).

    Raises:
        InputError: an unreadable size, a disk or remote flag without its tier, or a tier no node of ``g`` holds.
    """
    from kvledger.cli.tier_opts import check_tier_sizes, tier_settings

    settings_t = tier_settings(tiers, link_fraction=more.link_fraction)
    check_tier_sizes(settings_t, g, settings.tp, settings.pp)
    if settings_t.enable_hierarchical_cache and settings.engine == "sglang":  # HiCache: its prefill-graph rule
        settings = settings.model_copy(update={"enable_hierarchical_cache": True})
    return settings_t, settings


def plan_tier_plan(p: Any, tiers: Any, settings_t: Any, flags: Any, more: Any) -> Any:
    """The tiers' plan (``kv_tiers`` in the JSON) of plan ``p``, or None when no tier flag was given; the break-evens
    priced as ``offload`` and ``simulate`` price a prefill (``flags``: the plan's pricing flags)."""
    from kvledger.cli.tier_opts import tiers_given

    if not (tiers_given(tiers) or settings_t.any_set):
        return None
    from kvledger.analyses.serving.plan_pricing import PricingFlags, simulate_priced_tiers

    flags_p = PricingFlags(flags.gpu_profile, None, flags.achievable_flops_fraction,
                           flags.achievable_bandwidth_fraction, flags.allreduce_link_share)
    return simulate_priced_tiers(p, settings_t, flags_p, suffix_tokens=more.suffix_tokens)
