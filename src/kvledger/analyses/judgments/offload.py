"""What a host KV tier buys on a multi-turn session workload: the plan's tiers and break-even, then the same sessions
simulated with and without the tier (hit rate per tier, TTFT, load bandwidth, host occupancy)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from kvledger.accounting import kv_tier_rules
from kvledger.accounting.kv_tier_rules import LMCACHE_CHUNK_TOKENS, TierSettings, rules_version
from kvledger.accounting.kv_tiers import TierPlan, build_tier_plan
from kvledger.accounting.max_model_len import config_len
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import PlanSettings
from kvledger.analyses.judgments.offload_cost import tier_cost
from kvledger.analyses.judgments.offload_host_rules import host_rules
from kvledger.analyses.judgments.offload_verdict import NEGLIGIBLE_HOST_HIT_RATE, tier_judgment
from kvledger.analyses.serving.plan_pricing import PricingFlags, priced_by_run, priced_settings, simulate_step_cost
from kvledger.analyses.serving.session_notes import left_out_note, model_default_plan
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import TierStats, simulate_offload
from kvledger.dynamics.workload.reuse import reusable_prefix_tokens
from kvledger.dynamics.workload.sessions import SESSION_SHAPES, SessionLoop, synthesize_sessions
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable

__all__ = ["OffloadReport", "analyse_offload", "SESSION_SHAPES", "tier_judgment", "NEGLIGIBLE_HOST_HIT_RATE",
           "sim_host_tier", "sim_rules", "SESSION_MAX_MODEL_LEN_TOKENS", "SESSION_CAP_GIVEN", "session_context_cap",
           "host_unit_name", "tier_cost", "SESSION_CAP_AUTO"]

#: kvledger default max_model_len of a session run (offload, simulate and search --workload chat|agent) when
#: --max-model-len is not given. The rule, one for every command: --max-model-len when given, else the smaller of this
#: and the model's context. Why: a session stops before its context would pass the cap, so the cap is part of the
#: workload; taken from the deployment (the model's context, 2K to 262K here) the same flags would draw other sessions
#: in search than in offload or simulate, and other sessions per model; the model's context bounds it only because
#: vLLM refuses a max_model_len above it
SESSION_MAX_MODEL_LEN_TOKENS = 32_768
SESSION_CAP_GIVEN = "--max-model-len"
SESSION_CAP_AUTO = "--max-model-len auto: vLLM's fit of the model's length to the KV pool"  # the user's cap, fitted
_SESSION_CAP_REASON = ("kvledger's session default, not the model's context: a session stops before its context "
                       "would pass it, so the cap sets how long sessions grow; pass --max-model-len to change it; the "
                       "agent preset's own cap is {agent:,} tokens, which --max-model-len {agent} lets agent sessions "
                       "reach where the model's context ({ctx}) allows")
_MODEL_CAP_REASON = ("the model's context, below kvledger's session default of {:,} tokens, which the engine would "
                     "refuse; a session stops before its context would pass it")


def session_context_cap(given_tokens: int | None, model_context_tokens: int | None = None) -> tuple[int, str]:
    """(the max_model_len of a session run in tokens, where it came from): ``given_tokens`` (--max-model-len) when
    given, else the smaller of SESSION_MAX_MODEL_LEN_TOKENS and ``model_context_tokens`` (the model's derived
    max_model_len), with its reason."""
    if given_tokens is not None:
        return given_tokens, SESSION_CAP_GIVEN
    if model_context_tokens is not None and model_context_tokens < SESSION_MAX_MODEL_LEN_TOKENS:
        return model_context_tokens, _MODEL_CAP_REASON.format(SESSION_MAX_MODEL_LEN_TOKENS)
    ctx = "not read" if model_context_tokens is None else f"{model_context_tokens:,} tokens"
    return SESSION_MAX_MODEL_LEN_TOKENS, _SESSION_CAP_REASON.format(agent=SESSION_SHAPES["agent"].max_context_tokens,
                                                                    ctx=ctx)


@dataclass(frozen=True)
class OffloadReport:
    """The tier plan, the workload, and the simulated effect of the host tier; ``__json__`` is ``--json``."""

    __json__ = ("model", "gpu", "engine", "engine_version", ("tier_judgment", "judgment"), ("kv_tiers", "tiers"),
                "workload", ("tier_stats", "stats"), ("ttft_s_with_offload", "ttft_s_with"),
                ("ttft_s_without_offload", "ttft_s_without"), ("hbm_hit_rate_without_offload", "hbm_hit_rate_without"),
                "more_gpus", "cost", "rules", "overload", "step_cost", ("reusable_prefix_tokens", "reusable_tokens"),
                "host_unit", "gpus_per_replica")
    __json_optional__ = ("rules", "overload", "step_cost", "reusable_tokens", "host_unit")
    model: str
    gpu: str
    engine: str
    tiers: TierPlan
    workload: dict[str, Any]
    stats: TierStats
    ttft_s_with: dict[str, float]
    ttft_s_without: dict[str, float]
    hbm_hit_rate_without: float = 0.0
    more_gpus: dict[str, Any] | None = None
    """The same sessions on ``num_replicas`` replicas (``num_gpus`` GPUs in all) without the tier (session affinity):
    whether the tier beats more GPUs."""
    cost: dict[str, Any] | None = None
    """Line items per hour at the given prices: the GPU, the host memory of the tier, and (with ``more_gpus``) the
    extra GPUs instead."""
    engine_version: str = ""  # the engine version whose rules apply (the plan's)
    rules: dict[str, Any] | None = None
    """The host tier's opt-in rules in the run (``sim_rules``) with their sources; None when none is on."""
    overload: Any = None
    """The run with the tier's queue growth over its session starts (``queue_growth.run_overload``), None if kept up."""
    step_cost: dict[str, Any] | None = None
    """The step cost of every run, as ``simulate`` describes it (``plan_pricing.simulate_step_cost``)."""
    reusable_tokens: int | None = None
    """The sessions' reusable prefix tokens: what an unbounded prefix cache would serve (``reuse.py``), tokens."""
    host_unit: dict[str, Any] | None = None
    """The simulated host tier's unit: ``name`` (block, chunk or segment) and ``tokens`` per unit, what ``stats``
    counts its host and disk units in."""
    gpus_per_replica: int = 1
    """GPUs of one replica (TP × PP): the runs with and without the tier are one replica."""

    @property
    def judgment(self) -> dict[str, Any]:
        return tier_judgment(self.stats, self.ttft_s_with, self.ttft_s_without, reusable_tokens=self.reusable_tokens,
                             overload=self.overload, host_unit=self.unit)

    @property
    def unit(self) -> tuple[str, int]:
        """(the host tier's unit, its tokens): ``host_unit``, or vLLM's 16-token block when it was not recorded."""
        u = self.host_unit or {"name": "block", "tokens": 16}
        return u["name"], u["tokens"]

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def analyse_offload(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings, tiers: TierSettings, *,
                    workload: str = "chat", num_sessions: int = 200, session_rate: float = 0.2, seed: int = 0,
                    segment_tokens: int = 64, compare_gpus: int | None = None, gpu_usd_per_hour: float | None = None,
                    host_usd_per_gib_month: float | None = None, context_cap_source: str = "",
                    pricing: PricingFlags | None = None, suffix_tokens: int = 1) -> OffloadReport:
    """Plan the tiers, then simulate ``num_sessions`` synthetic sessions with and without the host tier (built by
    :func:`sim_host_tier`, with the opt-in rules ``tiers`` names); ``suffix_tokens``: the break-evens' new tokens.

    Raises:
        InputError: no host tier in ``tiers``, an unknown workload, or anything the plan or simulator refuses.
    """
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.analyses.serving.queue_growth import run_overload

    if workload not in SESSION_SHAPES:
        raise InputError(f"--workload must be one of {', '.join(SESSION_SHAPES)}, got {workload!r}")
    settings = settings if pricing is None else priced_settings(settings, gpu, pricing, model)
    plan = build_plan(model, gpu, settings, with_advice=False)
    cost, cost_info = simulate_step_cost(plan, pricing)  # every run, with the tier or not, priced as simulate's
    tp = build_tier_plan(plan, tiers, suffix_tokens=suffix_tokens, step_cost=cost, priced_by=priced_by_run(cost_info))
    cfg, _ = engine_config_from_plan(plan, policy="sglang" if settings.engine == "sglang" else None)
    chunk = LMCACHE_CHUNK_TOKENS if settings.engine != "sglang" and tiers.kv_offloading_backend == "lmcache" else 0
    unit = segment_tokens if cfg.prefix_caching_policy == "sglang" else chunk or cfg.block_size
    host = sim_host_tier(tp, settings, tiers, unit, chunk)  # refuses flags that give no host tier
    host_t = tp.tier("host_dram")
    shape = SESSION_SHAPES[workload]
    from dataclasses import replace

    shape = replace(shape, max_context_tokens=min(shape.max_context_tokens, cfg.max_model_len))
    loop = SessionLoop(tuple(synthesize_sessions(shape, num_sessions, session_rate, np.random.default_rng(seed))),
                       segment_tokens)
    run = simulate_offload(loop, cfg, cost, host, record_token_times=False)
    more = _more_gpus(loop, cfg, cost, compare_gpus, settings.tp * settings.pp)
    wl = {"kind": workload, "shape": asdict(shape), "num_sessions": len(loop.sessions), "num_turns": loop.num_turns,
          "session_rate_per_s": session_rate, "seed": seed, "segment_tokens": segment_tokens,
          "context_cap_tokens": cfg.max_model_len, "context_cap_source": context_cap_source or SESSION_CAP_GIVEN}
    if context_cap_source not in ("", SESSION_CAP_GIVEN, SESSION_CAP_AUTO):  # kvledger's cap: the plan's default
        wl["model_default"] = model_default_plan(model, gpu, settings, cfg.max_model_len)
    wl["left_out_note"] = left_out_note(num_sessions, len(loop.sessions), shape, SESSION_SHAPES[workload],
                                        config_len(model, settings)[0])
    return OffloadReport(model.name, gpu.name, settings.engine, tp, wl, run.tiers,
                         asdict(run.with_offload.summary.ttft_s), asdict(run.without_offload.summary.ttft_s),
                         run.without_offload.summary.prefix_cache_hit_rate, more, tier_cost(
                             host_t.total_capacity_bytes, settings.tp * settings.pp, compare_gpus, gpu_usd_per_hour,
                             host_usd_per_gib_month), plan.memory.engine_version, sim_rules(host),
                         to_jsonable(run_overload(run.with_offload.records, "sessions")), cost_info,
                         reusable_prefix_tokens(loop),
                         {"name": host_unit_name(cfg.prefix_caching_policy == "sglang", chunk), "tokens": unit},
                         settings.tp * settings.pp)


def _more_gpus(loop: SessionLoop, cfg, cost, compare_gpus: int | None, gpus_per_replica: int) -> dict[str, Any] | None:
    """The same sessions on ``compare_gpus`` replicas of ``gpus_per_replica`` GPUs each without the tier (session
    affinity); None when not asked. ``num_gpus`` is the GPUs of all replicas, ``num_replicas`` the replicas.

    Raises:
        InputError: a count that is not a whole number ≥ 2.
    """
    if compare_gpus is None:
        return None
    if isinstance(compare_gpus, bool) or not isinstance(compare_gpus, int) or compare_gpus < 2:
        raise InputError(f"--compare-replicas must be a whole number ≥ 2, got {compare_gpus!r}")
    from kvledger.dynamics.simulator import simulate

    s = simulate(loop, cfg, cost, num_replicas=compare_gpus, router="session_affinity",
                 record_token_times=False).summary
    return {"num_replicas": compare_gpus, "num_gpus": compare_gpus * gpus_per_replica,
            "gpus_per_replica": gpus_per_replica, "router": "session_affinity",
            "hbm_hit_rate": s.prefix_cache_hit_rate,
            "ttft_s": asdict(s.ttft_s)}


def host_unit_name(radix: bool, chunk: int) -> str:
    """What the simulated host tier counts: SGLang's prompt segments (``radix``), LMCache's chunks (``chunk`` > 0)
    or vLLM's blocks."""
    return "segment" if radix else "chunk" if chunk else "block"


def sim_host_tier(tp: TierPlan, settings: PlanSettings, tiers: TierSettings, unit: int, chunk: int) -> HostTier:
    """The simulator's host tier for the plan's (``unit`` tokens per host unit; ``chunk``: LMCache's chunk or 0), with
    vLLM's host-cache rules (``tiers.store_threshold``, ``tiers.eviction_policy``, ``tiers.offload_prompt_only``:
    offload_host_rules.py) and the plan's NVMe tier
    below it: LMCache's local_disk or SGLang HiCache's file storage backend (``tiers.hicache_storage_prefetch_policy``).
    The one builder of the host tier: ``offload`` and ``simulate`` (``analyses/serving/sim_tiers.py``) both call it.

    Raises:
        InputError: no host tier in ``tp``; an option the engine or backend does not have, one paragraph each.
    """
    host_t, disk_t, remote_t = tp.tier("host_dram"), tp.tier("nvme"), tp.tier("remote")
    if host_t is None:
        raise InputError("the tier flags give no host tier: pass --kv-offloading-size GiB (vLLM; with "
                         f"--kv-offloading-backend native|lmcache) or, with {tiers.engine_flag} sglang, "
                         "--enable-hierarchical-cache (--hicache-ratio or --hicache-size)")
    native, version = settings.engine == "vllm" and not chunk, rules_version(settings.engine_version)
    store_threshold, eviction_policy, prompt_only = host_rules(settings, tiers, native)
    disk_units = remote_units = 0
    if disk_t is not None and remote_t is not None and settings.engine == "sglang":
        raise InputError("--kv-tier-nvme and --kv-tier-remote together: SGLang HiCache takes one storage backend "
                         "(--hicache-storage-backend file for a local disk, or mooncake for a remote store over the "
                         "network), so the simulator cannot run both below its host tier. Pass one of them (the plan "
                         "still sizes both: kvledger plan ... --kv-tier-nvme SIZE --kv-tier-remote SIZE).")
    if disk_t is not None or remote_t is not None:
        if native:
            raise InputError("--kv-tier-nvme / --kv-tier-remote in the simulator are LMCache's local_disk and remote "
                             "backends below its CPU chunks (--kv-offloading-backend lmcache) or SGLang HiCache's "
                             "file / mooncake storage backend; vLLM's native connector has no disk tier (nor a remote "
                             "one) in the simulator. The plan still sizes and prices them: kvledger plan ... "
                             "--kv-tier-nvme SIZE --kv-tier-remote SIZE.")
        prefetch_policy = tiers.hicache_storage_prefetch_policy or "timeout"
        if settings.engine == "sglang" and prefetch_policy != "wait_complete":
            given = ("a storage tier under SGLang prefetches from storage with --hicache-storage-prefetch-policy, "
                     "not given here, so the default, timeout: " if tiers.hicache_storage_prefetch_policy is None else
                     f"--hicache-storage-prefetch-policy {prefetch_policy}: ")
            raise InputError(f"{given}SGLang 0.5.23 stops a storage "
                             "prefetch at (best_effort) or a timeout after (timeout, its default) the first scheduling "
                             "attempt that finds it unfinished, a time the simulator's KV managers do not see; only "
                             "wait_complete (the request waits for the whole prefetch) is simulated. Pass "
                             "--hicache-storage-prefetch-policy wait_complete.")
        disk_units = disk_t.capacity_tokens // unit if disk_t else 0
        remote_units = remote_t.capacity_tokens // unit if remote_t else 0
    return HostTier(host_t.capacity_tokens // unit, tp.bytes_per_token, host_t.read_bytes_per_s,
                    host_t.write_bytes_per_s, tiers.write_policy if settings.engine == "sglang" else
                    "write_through", eviction=eviction_policy, chunk_tokens=chunk, store_threshold=store_threshold,
                    disk_capacity_units=disk_units, disk_read_bytes_per_s=disk_t.read_bytes_per_s if disk_t else 0.0,
                    remote_capacity_units=remote_units,
                    remote_read_bytes_per_s=remote_t.read_bytes_per_s if remote_t else 0.0,
                    load_in_step=bool(chunk) and version < kv_tier_rules.LMCACHE_MP_FROM,
                    prompt_only=prompt_only)


def sim_rules(host: HostTier) -> dict[str, Any] | None:
    """The rules ``host`` turns on beyond the connector's defaults (opt-in options, tiers below the host, LMCache's
    in-step load), each with the engine code it follows; None when none is on."""
    out: dict[str, Any] = {}
    if host.store_threshold >= 2:
        out["store_threshold"] = {"value": host.store_threshold,
                                  "source": "vLLM 0.33.0 v1/kv_offload/cpu/manager.py (CPUOffloadingManager)"}
    if host.eviction == "arc":
        out["eviction_policy"] = {"value": "arc", "source": "vLLM v1/kv_offload/arc_manager.py "
                                  "(ARCOffloadingManager, as connector_caches.py models it)"}
    if host.write_policy == "write_back":
        out["hicache_write_policy"] = {"value": "write_back",
                                       "source": "SGLang 0.5.23 mem_cache/unified_radix_cache.py (backup on eviction)"}
    if host.disk_capacity_units and host.chunk_tokens:
        out["disk"] = {"capacity_units": host.disk_capacity_units, "unit": "chunk",
                       "read_bytes_per_s": host.disk_read_bytes_per_s,
                       "source": "LMCache 0.5.6 v1/storage_backend/local_disk_backend.py, storage_manager.py"}
    elif host.disk_capacity_units:
        out["disk"] = {"capacity_units": host.disk_capacity_units, "unit": "segment",
                       "read_bytes_per_s": host.disk_read_bytes_per_s, "prefetch_policy": "wait_complete",
                       "source": "SGLang 0.5.23 mem_cache/unified_radix_cache.py (storage backend file)"}
    if host.load_in_step:
        out["lmcache_load"] = {"value": "in the step", "source": "vLLM 0.19.0 LMCacheConnectorV1 (load_async False); "
                               "LMCache 0.5.6 vllm_v1_adapter.py (use_layerwise off: a blocking retrieve)"}
    if host.remote_capacity_units:
        out["remote"] = {"capacity_units": host.remote_capacity_units, "read_bytes_per_s": host.remote_read_bytes_per_s,
                         "source": "LMCache 0.5.6 v1/storage_backend/remote_backend.py, storage_manager.py" if
                         host.chunk_tokens else "SGLang 0.5.23 mem_cache/unified_radix_cache.py (storage mooncake)"}
    return out or None
