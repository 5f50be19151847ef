"""Sentences that go with a tier plan: the engine rule each tier follows and the assumptions behind its numbers."""

from __future__ import annotations

__all__ = ["tier_notes"]


def tier_notes(plan, tiers, out) -> list[str]:
    """Notes for ``build_tier_plan``: store/load rule, what is assumed, what is not modelled."""
    eng = plan.settings.engine
    notes = []
    if eng == "vllm":
        notes.append("vLLM OffloadingConnector: every newly computed full block is stored to the CPU tier as it is "
                     "computed (write-through, kv_offload LRU; ARC and store_threshold reuse gating are opt-in "
                     "extra_config in 0.33.0); a request whose prefix hits the CPU tier waits for the load "
                     "(WAITING_FOR_REMOTE_KVS) before it is scheduled, so the load is on its TTFT, not on the step")
        if (tiers.kv_offloading_backend or "native") == "lmcache":
            notes.append("LMCache stores 256-token chunks: a prefix hits only in whole chunks")
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
        notes.append("NVMe and remote bandwidths are assumptions (one PCIe Gen4 x4 drive; a 400 Gb/s NIC per GPU); "
                     "pass measured figures with --nvme-read-bandwidth / --network-bandwidth")
    notes.append(f"host link achievable fraction {tiers.link_fraction:g} of the per-direction peak is an assumption "
                 "(--link-fraction); the recompute side is the plan's roofline at its achievable fractions")
    return notes
