"""The KV-tier flag group (``TierFlags``) and the simulator-only fields of it (``SIM_ONLY``); ``flag_groups`` re-exports
both, as the other groups."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_field import flag

__all__ = ["TierFlags", "SIM_ONLY"]


@dataclass(frozen=True, slots=True)
class TierFlags:
    """KV tiers below HBM, in the engines' own flags (vLLM's offloading connector, LMCache, SGLang's HiCache), read by
    ``cli/tier_opts.py``; checked against the engine's rules by ``accounting.kv_tier_rules.check_tier_settings``
    and, for the simulated host tier, ``analyses.judgments.offload.sim_host_tier`` (``plan``, ``simulate``,
    ``offload``; ``plan`` does not take the simulator-only rules, SIM_ONLY)."""

    kv_offloading_size: str | None = flag("--kv-offloading-size", help=(
        "vLLM: host memory for KV offloading, summed over the TP×PP ranks; a bare number is GiB, vLLM's unit (256 = "
        "256GiB; as for every size flag); adds the KV tiers."))
    kv_offloading_backend: str | None = flag("--kv-offloading-backend", help=(
        "vLLM: native (OffloadingConnector) or lmcache."))
    enable_hierarchical_cache: bool | None = flag("--enable-hierarchical-cache", help="SGLang HiCache: a host KV tier.")
    hicache_ratio: float | None = flag("--hicache-ratio", help="SGLang: host pool / device pool (default 2.0).")
    hicache_size: int | None = flag("--hicache-size", help=(
        "SGLang: host pool in GB (10^9 B) per GPU; overrides the ratio."))
    hicache_write_policy: str | None = flag("--hicache-write-policy", help=(
        "SGLang: write_through (default), write_through_selective or write_back."))
    kv_tier_nvme: str | None = flag("--kv-tier-nvme", help=(
        "A local-disk KV tier per GPU, GiB (2048 or 2TiB): LMCache local_disk (with --kv-offloading-backend lmcache)"
        " or SGLang HiCache's file storage backend."))
    nvme_read_bandwidth: float | None = flag("--nvme-read-bandwidth", help=(
        "With --kv-tier-nvme: disk read bandwidth per GPU, GB/s (default 7, an assumption: one PCIe Gen4 x4 drive "
        "for each GPU; GPUs sharing one drive: its bandwidth ÷ the GPUs reading it)."))
    kv_tier_remote: str | None = flag("--kv-tier-remote", help=(
        "A remote KV store per GPU, GiB (e.g. 10TiB): LMCache remote (below local_disk, or below its CPU chunks) or "
        "SGLang HiCache's mooncake storage backend (one storage backend: not with --kv-tier-nvme in the simulator)."))
    network_bandwidth: float | None = flag("--network-bandwidth", help=(
        "With --kv-tier-remote: remote store GB/s per GPU (default 50, an assumption: one 400 Gb/s NIC)."))
    store_threshold: int | None = flag("--store-threshold", help=(
        "vLLM 0.33 native offloading, simulated: store a block on its Nth offer, count (≥ 2; 0 or 1: off, default)."))
    eviction_policy: str | None = flag("--eviction-policy", help=(
        "vLLM native offloading, simulated: the host cache's policy, lru (default) or arc."))
    offload_prompt_only: bool | None = flag("--offload-prompt-only/--no-offload-prompt-only", help=(
        "vLLM native offloading, simulated: store prompt blocks only (on by default from vLLM 0.23.0, its "
        "kv_connector_extra_config offload_prompt_only); --no-offload-prompt-only also stores generated blocks, as "
        "before 0.23.0, so a session's next turn can load the previous output from the host."))
    hicache_storage_prefetch_policy: str | None = flag("--hicache-storage-prefetch-policy", help=(
        "SGLang, with --kv-tier-nvme: storage prefetch policy; only wait_complete is simulated (SGLang's default "
        "timeout and best_effort are refused)."))


#: TierFlags fields only the simulator uses (``simulate``, ``offload``): ``plan`` sizes tiers, it runs no rule
SIM_ONLY = ("store_threshold", "eviction_policy", "offload_prompt_only", "hicache_storage_prefetch_policy")
