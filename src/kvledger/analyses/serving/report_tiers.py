"""The KV tiers and the document pool in ``kvledger report`` (and ``kvledger ui``'s serving panel): at the rate the
capacity was sized on, the same requests served with the KV tiers the flags give (``--kv-offloading-size``, HiCache,
``--kv-tier-nvme``, …), run as ``goodput --simulate`` runs them with tier flags (``sim_goodput
.simulated_goodput_with_tier``: ``simulate``'s tier run and the same run without the tier), and a document pool's
expected hit share per tier beside the simulated one (``doc_pool_hits``).

The cost ledger and the headline stay on the capacity ``cost --simulate`` finds without a tier (report's tier flags
ask what the tiers would change; they are not the deployment priced): the section states what the tiers change at
that capacity (hit share per tier, TTFT, the share within the SLO) and, the capacity search run again with the tiers
in every probe (``report_tier_capacity``), the capacity with them beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["tier_section", "tier_flags_text", "check_report_pool"]


def tier_section(args: Any, tier: Any, synthetic: Any, slo: Any, priced: Any,
                 capacity: Any = None) -> dict[str, Any] | None:
    """The report's ``kv_tiers`` section; None without a tier or a document pool.

    Args:
        args: the ``SimRequestArgs`` at the rate sized on (``rate``). tier: the ``TierSettings`` (None: none).
        synthetic: the report's synthetic workload (``SyntheticSpec``; None: its trace).
        slo: the report's SLO. priced: the run the ledger priced (``SimulatedRun``), the tier run's comparison.
        capacity: the capacity without the tiers (``SimCapacity``); given, the search with the tiers runs too
            (``report_tier_capacity.tier_capacity``: the section's ``capacity``).

    Raises:
        InputError: tier flags the engine refuses (``sim_tiers.host_tier_for``), as simulate refuses them.
    """
    if tier is None and args.document_pool is None:
        return None
    from kvledger.analyses.serving.doc_pool_hits import pool_with_expected
    from kvledger.ledgers.goodput import goodput

    rate = args.rate
    if tier is None:  # HBM alone: the priced run's own draw and hits
        setup = priced.setup
        pool, _ = pool_with_expected(setup, priced.result.summary.prefix_cache_hit_rate, None)
        return {"rate_req_per_s": rate, "document_pool": pool}
    from kvledger.analyses.serving.sim_goodput import simulated_goodput_with_tier

    if tier.enable_hierarchical_cache:  # SGLang's prefill-graph rule with HiCache, as goodput --simulate plans it
        args = dataclasses.replace(args, enable_hierarchical_cache=True)
    run = simulated_goodput_with_tier(args, slo, tier, synthetic)
    without = goodput(priced.run, slo)
    rep = {k: v for k, v in run.tiers.to_dict().items() if k != "occupancy_units"}  # one pair per arrival: left out
    section: dict[str, Any] = {
        "rate_req_per_s": rate, "kv_tiers": rep,
        "with_tier": {"attainment": run.result.attainment, "goodput_req_per_s": run.result.goodput_req_per_s},
        "without_tier": {"attainment": without.attainment, "goodput_req_per_s": without.goodput_req_per_s}}
    if args.document_pool is not None:
        section["document_pool"] = run.sim.setup.workload_info["document_pool"]
    if capacity is not None:
        from kvledger.analyses.serving.report_tier_capacity import tier_capacity

        section["capacity"] = tier_capacity(args, tier, synthetic, slo, capacity)
    return section


def check_report_pool(text: str | None, synthetic: Any) -> None:
    """``--document-pool`` read as ``simulate`` reads it (``parse_document_pool``: its form, K and S in range, the
    lengths), and refused on a trace (``shared_prompts.POOL_NEEDS_SYNTHETIC``), before any simulation; ``synthetic``:
    the report's synthetic workload (None: a trace).

    Raises:
        InputError: in ``simulate``'s words.
    """
    if text is None:
        return
    from kvledger.analyses.serving.shared_prompts import POOL_NEEDS_SYNTHETIC
    from kvledger.dynamics.workload.document_pool import parse_document_pool
    from kvledger.errors import InputError

    parse_document_pool(text)
    if synthetic is None:
        raise InputError(POOL_NEEDS_SYNTHETIC)


def tier_flags_text(tier: Any, simulator: bool = True) -> str:
    """The tier flags as the commands take them (`` --kv-offloading-size 64 --kv-tier-nvme 2048``), from a
    ``TierSettings``; "" for None. Sizes in GiB (the flags' bare unit), bandwidths in GB/s; ``simulator`` False:
    without the simulator-only flags (``plan`` takes the others: cli/tier_flags.SIM_ONLY)."""
    if tier is None:
        return ""
    from kvledger.accounting.kv_tier_rules import NETWORK_BYTES_PER_S, NVME_READ_BYTES_PER_S

    t = dataclasses.asdict(tier)
    pairs = (("--kv-offloading-size", t["kv_offloading_size_gib"]), ("--kv-offloading-backend",
                                                                    t["kv_offloading_backend"]),
             ("--enable-hierarchical-cache", True if t["enable_hierarchical_cache"] else None),
             ("--hicache-ratio", t["hicache_ratio"]), ("--hicache-size", t["hicache_size_gb"] or None),
             ("--hicache-write-policy", t["hicache_write_policy"]), ("--kv-tier-nvme", t["nvme_gib"]),
             ("--nvme-read-bandwidth", None if t["nvme_read_bytes_per_s"] == NVME_READ_BYTES_PER_S
              else t["nvme_read_bytes_per_s"] / 1e9), ("--kv-tier-remote", t["remote_gib"]),
             ("--network-bandwidth", None if t["network_bytes_per_s"] == NETWORK_BYTES_PER_S
              else t["network_bytes_per_s"] / 1e9), ("--store-threshold", t["store_threshold"]),
             ("--eviction-policy", t["eviction_policy"]),
             ("--hicache-storage-prefetch-policy", t["hicache_storage_prefetch_policy"]))
    pairs = pairs if simulator else pairs[:-3]  # store threshold, eviction policy, prefetch policy: simulated only
    return "".join(f" {f}" if v is True else f" {f} {_number(v)}" for f, v in pairs if v is not None)


def _number(v: Any) -> str:
    """A flag's value as typed back: a whole float without its ".0" (64, not 64.0), any other as Python writes it."""
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
