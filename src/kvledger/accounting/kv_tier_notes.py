"""Sentences that go with a tier plan: the engine rule each tier follows and the assumptions behind its numbers."""

from __future__ import annotations

from kvledger.accounting.kv_tier_rules import (
    LMCACHE_CHUNK_TOKENS,
    LMCACHE_MP_FROM,
    OFFLOAD_PROMPT_ONLY_FROM,
    rules_version,
)

__all__ = ["tier_notes", "refuse_empty_host_tier"]

#: a disk or remote tier planned under vLLM's native connector, which has only its CPU tier (offloading_connector.py)
_NATIVE_NO_DISK = ("vLLM's native OffloadingConnector has a CPU tier only: the nvme/remote rows are a sizing what-if, "
                   "not a tier it runs (LMCache's local_disk and remote, --kv-offloading-backend lmcache, or SGLang "
                   "HiCache's storage backend hold one; simulate and offload refuse them here)")


def tier_notes(plan, tiers, out, priced_by: str = "the plan's roofline") -> list[str]:
    """Notes for ``build_tier_plan``: store/load rule, what is assumed, what is not modelled (``priced_by``: what
    prices the recompute side, in words)."""
    eng = plan.settings.engine
    notes = []
    if eng == "vllm" and (tiers.kv_offloading_backend or "native") == "lmcache":
        notes += _lmcache_notes(any(t.name in ("nvme", "remote") for t in out),
                                rules_version(plan.settings.engine_version) < LMCACHE_MP_FROM)
    elif eng == "vllm" and not any(t.name == "host_dram" for t in out):  # --kv-tier-nvme/-remote alone
        notes.append(_NATIVE_NO_DISK + " and no CPU tier was given (--kv-offloading-size): no vLLM connector runs "
                     "what this plan sizes")
    elif eng == "vllm":
        if any(t.name in ("nvme", "remote") for t in out):
            notes.append(_NATIVE_NO_DISK)
        opt_in = ("ARC and store_threshold reuse gating are opt-in extra_config in 0.33.0"
                  if rules_version(plan.settings.engine_version) >= (0, 33, 0) else
                  "ARC is opt-in extra_config, eviction_policy, as from vLLM 0.11.1")
        prompt_only = (rules_version(plan.settings.engine_version) >= OFFLOAD_PROMPT_ONLY_FROM
                       if tiers.offload_prompt_only is None else tiers.offload_prompt_only)
        which = ("full prompt block (offload_prompt_only, default from 0.23.0; generated blocks are not stored)"
                 if prompt_only else "full block")
        notes.append(f"vLLM OffloadingConnector: every newly computed {which} is stored to the CPU tier as it is "
                     f"computed (write-through, kv_offload LRU; {opt_in}); a request whose prefix hits the CPU tier "
                     "waits for the load (WAITING_FOR_REMOTE_KVS) before it is scheduled, so the load is on its TTFT, "
                     "not on the step")
    elif eng == "sglang":
        notes.append(f"SGLang HiCache ({tiers.write_policy}): load_back of host-resident prefix nodes runs at "
                     "admission, layer by layer beside the forward pass (break-even uses max(load, compute)); loads "
                     "under 10 tokens are skipped (load_back_threshold)")
    host = next((t for t in out if t.name == "host_dram"), None)
    hbm = out[0]
    if host is not None and host.capacity_tokens <= hbm.capacity_tokens:
        notes.append(f"the host tier ({host.capacity_tokens:,} tokens) is no larger than HBM "
                     f"({hbm.capacity_tokens:,}); "
                     "with a write-through rule it holds copies of what HBM holds, so it adds few hits")
    if any(t.name in ("nvme", "remote") for t in out):
        notes.append("NVMe and remote bandwidths are assumptions, per GPU (one PCIe Gen4 x4 drive and one 400 Gb/s "
                     "NIC for each GPU: every TP rank reads its own share of a prefix at once); pass measured "
                     "figures with --nvme-read-bandwidth / --network-bandwidth (GPUs sharing one drive: its "
                     "bandwidth ÷ the GPUs reading it)")
    notes.append(f"host link achievable fraction {tiers.link_fraction:g} of the per-direction peak is an assumption "
                 f"(--link-fraction); the recompute side is priced by {priced_by} at its achievable fractions")
    return notes


def _lmcache_notes(below: bool, in_step: bool) -> list[str]:
    """LMCache's rule as kvledger simulates it (``dynamics/engine/offload.py``, ``offload_tiers.py``: LMCache 0.5.6);
    ``below``: a disk or remote tier under its CPU chunks; ``in_step``: vLLM before 0.33.0 (``LMCacheConnectorV1``)."""
    if in_step:
        load = ("Before 0.33.0, vLLM runs LMCache as LMCacheConnectorV1, and LMCache 0.5.6 loads in the step "
                "(load_async False, enable_async_loading and use_layerwise off by default): a request whose prefix "
                "hits the CPU chunks is scheduled the step the scheduler reaches it, the hit counted as computed, and "
                "that step also carries the load (bytes / host link bandwidth) before its forward pass, so the load "
                "slows every request in the step")
    else:
        load = ("vLLM 0.33.0 runs LMCache as LMCacheMPConnector, which loads asynchronously (load_async True for "
                "a hit): the chunks beyond the HBM prefix hit are loaded before the request is scheduled, so the load "
                "is on its TTFT, not on the step")
    out = [f"LMCache (--kv-offloading-backend lmcache): whole {LMCACHE_CHUNK_TOKENS}-token chunks of the prompt are "
           "stored to its local CPU backend as they are computed (its defaults save_unfull_chunk and "
           "save_decode_cache are off: no partial last chunk, no decoded tokens), which evicts the least recently "
           "used chunk and refreshes a chunk a lookup hits; a lookup counts whole chunks from the prompt's start "
           f"(the native connector's kv_offload LRU, ARC and store_threshold do not apply). {load}"]
    if below:
        out.append("below LMCache's CPU chunks: every stored chunk is also written to the disk (local_disk) and "
                   "remote tiers, off the critical path, each evicting its least recently used chunk (the remote "
                   "store's capacity and eviction are an assumption); a lookup goes on into the disk, then the remote "
                   "store, where the CPU hits end, and chunks read from them are put back into the CPU backend, one "
                   f"tier's read after the other's, {'in the same step' if in_step else 'on the TTFT'}")
    return out


def refuse_empty_host_tier(plan, t, unit_tokens: int, bpt: float, name: str) -> None:
    """Refuse a host tier that holds no whole stored unit (the engine would start with none), naming the least size
    that holds one (``name``: the unit, ``bpt``: KV bytes per token per GPU): the unit's bytes on every rank, rounded
    up to vLLM's 4 KiB host pages.

    Raises:
        InputError: always.
    """
    import math

    from kvledger.accounting.kv_tier_rules import HOST_PAGE_BYTES
    from kvledger.errors import InputError
    from kvledger.units import fmt_bytes

    s = plan.settings
    if s.engine == "sglang":
        raise InputError(f"the HiCache host pool holds no whole {name} of {unit_tokens} tokens "
                         f"({unit_tokens * bpt:,.0f} B): raise --hicache-size or --hicache-ratio")
    ranks = s.tp * s.pp
    need = -(-int(math.ceil(unit_tokens * bpt * ranks)) // HOST_PAGE_BYTES) * HOST_PAGE_BYTES
    raise InputError(f"--kv-offloading-size {fmt_bytes(t.kv_offloading_size_gib * 2**30)} holds no whole {name}: one "
                     f"{name} of {unit_tokens} tokens takes {unit_tokens * bpt:,.0f} B on each of {ranks} rank(s), "
                     f"{need:,} B in all (4 KiB pages); pass --kv-offloading-size {need / 2**20:,.2f}MiB or more")
