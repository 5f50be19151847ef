"""vLLM's native host-cache rules a user can set (``kv_connector_extra_config``), checked against the engine, backend
and release, for the simulated host tier (``offload.sim_host_tier``).

* ``store_threshold`` (vLLM 0.33.0 ``CPUOffloadingSpec``): the reuse gate, opt-in.
* ``eviction_policy`` lru or arc (``OffloadingConnector``, as from vLLM 0.11.1).
* ``offload_prompt_only`` (``v1/kv_offload/base.py`` ``OffloadingSpec``, read in 0.23.0 and 0.33.0:
  ``bool(extra_config.get("offload_prompt_only", True))``): on by default from 0.23.0, so the connector stores the
  prompt's full blocks only (0.23.0 ``_build_store_jobs``, 0.33.0 ``_calc_num_offloadable_tokens``); a user turns it
  off with ``--kv-transfer-config '{"kv_connector_extra_config": {"offload_prompt_only": false}}'`` beside
  ``--kv-offloading-size`` (0.33.0 ``config/vllm.py`` ``_post_init_kv_transfer_config`` updates that dict, it does
  not replace it). 0.19.0–0.22.0 have no such key: they store every full block, prompt and generated.
"""

from __future__ import annotations

from kvledger.accounting.kv_tier_rules import EVICTION_POLICIES, OFFLOAD_PROMPT_ONLY_FROM, TierSettings, rules_version
from kvledger.accounting.settings import PlanSettings
from kvledger.errors import InputError

__all__ = ["host_rules"]


def host_rules(settings: PlanSettings, tiers: TierSettings, native: bool) -> tuple[int, str, bool]:
    """(store threshold, eviction policy, prompt only) of the host cache, each refused where its engine, backend or
    release has none; ``native``: vLLM's OffloadingConnector (not LMCache, not SGLang)."""
    store_threshold = 0 if tiers.store_threshold is None else tiers.store_threshold
    eviction_policy = tiers.eviction_policy or "lru"
    if isinstance(store_threshold, bool) or not isinstance(store_threshold, int) or store_threshold < 0:
        raise InputError(f"--store-threshold must be a whole number ≥ 0 (vLLM: < 2 turns the gate off), got "
                         f"{store_threshold!r}")
    if store_threshold >= 2 and not native:
        raise InputError("--store-threshold is an option of vLLM's native CPU offloading (kv_connector_extra_config "
                         "store_threshold, read in vLLM 0.33.0's CPUOffloadingSpec); SGLang HiCache and LMCache have "
                         f"no such gate. Drop it, or use {tiers.engine_flag} vllm with --kv-offloading-backend native.")
    if store_threshold >= 2 and rules_version(settings.engine_version) < (0, 33, 0):
        raise InputError(f"--store-threshold: kvledger read the reuse gate in vLLM 0.33.0's offloading code, not in "
                         f"{settings.engine_version}'s. Plan --engine-version 0.33.0, or drop the flag.")
    if eviction_policy not in EVICTION_POLICIES:
        raise InputError(f"--eviction-policy must be lru or arc (vLLM's OffloadingConnector policies), got "
                         f"{eviction_policy!r}")
    if eviction_policy == "arc" and not native:
        raise InputError("--eviction-policy is the native OffloadingConnector's option (kv_connector_extra_config "
                         "eviction_policy); LMCache's and SGLang HiCache's host caches are LRU here. Drop it, or use "
                         f"{tiers.engine_flag} vllm with --kv-offloading-backend native.")
    return store_threshold, eviction_policy, _prompt_only(settings, tiers, native)


def _prompt_only(settings: PlanSettings, tiers: TierSettings, native: bool) -> bool:
    """Whether the native connector stores prompt blocks only: the user's ``offload_prompt_only``, else the release's
    default (module doc)."""
    given, has_key = tiers.offload_prompt_only, rules_version(settings.engine_version) >= OFFLOAD_PROMPT_ONLY_FROM
    if given is None:
        return native and has_key
    if given not in (True, False):
        raise InputError(f"--offload-prompt-only is on or off (--no-offload-prompt-only), got {given!r}")
    if not native:
        raise InputError("--offload-prompt-only / --no-offload-prompt-only set vLLM's native CPU offloading "
                         "(kv_connector_extra_config offload_prompt_only); LMCache stores whole prompt chunks only and "
                         "SGLang HiCache its radix tree's segments, with no such key. Drop it, or use "
                         f"{tiers.engine_flag} vllm with --kv-offloading-backend native.")
    if not has_key:
        v = settings.engine_version
        raise InputError(f"--offload-prompt-only / --no-offload-prompt-only: vLLM {v} has no offload_prompt_only key "
                         "(first read in 0.23.0); its connector stores every full block, prompt and generated. Drop "
                         "the flag, or plan --engine-version 0.23.0 or later.")
    return given
