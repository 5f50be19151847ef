"""The largest KV tier one server can hold: the host-memory and NVMe bounds every command's tier sizes are checked
against, per node, before any planning.

A replica's tier lies on the nodes its GPUs are on: ``GiB per GPU × the replica's GPUs on one node`` (all of them up
to a node's GPUs, ``node_size.gpus_per_node``; 8 where nothing says). A size beyond the bound is a unit slip
(``64TiB`` for ``64GiB``, GB for MB), so it is refused with the figures rather than planned.
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["HOST_GIB_PER_NODE_MAX", "HOST_BOUND_SOURCE", "NVME_GIB_PER_NODE_MAX", "NVME_BOUND_SOURCE",
           "refuse_beyond_a_node", "check_tier_bounds"]

HOST_GIB_PER_NODE_MAX = 32 * 256
"""Host DRAM one GPU server holds at most, GiB (8 TiB): kvledger's bound, 32 DIMM slots (two sockets × 8 channels ×
2 DIMMs per channel, the DGX B200's 32 DIMMs) × 256 GiB, the largest RDIMM sold. NVIDIA's own 8-GPU systems ship
less: DGX H100/H200 2 TB, DGX B200 2 TB "upgradable to 4 TB" (NVIDIA DGX B200 User Guide, hardware overview)."""

HOST_BOUND_SOURCE = ("kvledger's bound: 32 DIMM slots × 256 GiB RDIMMs; NVIDIA's DGX B200 has 2 TB on 32 DIMMs, "
                     "upgradable to 4 TB, its DGX H100/H200 2 TB")

NVME_GIB_PER_NODE_MAX = 16 * 122_880_000_000_000 // 2**30
"""Local NVMe one GPU server holds at most, GiB (about 1,788 TiB): kvledger's bound, 16 U.2 bays (Supermicro's 8-GPU
HGX server SYS-821GE-TNHR has 16 front NVMe bays; the DGX B200 8 × 3.84 TB) × 122.88 TB, the largest U.2 SSD sold
(Solidigm D5-P5336)."""

NVME_BOUND_SOURCE = ("kvledger's bound: 16 U.2 NVMe bays × 122.88 TB, the largest U.2 SSD sold; NVIDIA's DGX B200 "
                     "has 8 × 3.84 TB")


def _node_gpus(gpu: Any, world: int) -> tuple[int, str]:
    """(the replica's GPUs on one node, in words where the node's size comes from)."""
    from kvledger.accounting.node_size import BASEBOARD_GPUS, gpus_per_node

    per = gpus_per_node(gpu) if gpu is not None else None
    per_node, source = per if per is not None else (BASEBOARD_GPUS, f"{BASEBOARD_GPUS} GPUs a node, assumed")
    return min(world, per_node), source


def refuse_beyond_a_node(what: str, kind: str, gib_per_gpu: float, gpu: Any, world: int) -> None:
    """Refuse a tier of ``gib_per_gpu`` (``kind`` "host" or "nvme") on a replica of ``world`` GPUs of ``gpu`` (a
    GpuSpec, None: 8 GPUs a node) whose GPUs on one node would need more than that node holds; ``what``: the flag and
    its size in words, as given.

    Raises:
        InputError: one paragraph with the per-GPU and per-node figures, the bound and its source.
    """
    n, source = _node_gpus(gpu, world)
    bound, why, medium = ((HOST_GIB_PER_NODE_MAX, HOST_BOUND_SOURCE, "host memory") if kind == "host"
                          else (NVME_GIB_PER_NODE_MAX, NVME_BOUND_SOURCE, "NVMe"))
    if gib_per_gpu * n <= bound:
        return
    name = getattr(gpu, "name", "the GPU")
    raise InputError(f"{what} is {gib_per_gpu:,.0f} GiB of {medium} per GPU, {gib_per_gpu * n:,.0f} GiB on one "
                     f"node for this replica's {n} GPU{'' if n == 1 else 's'} there ({name}: {source}), more than a "
                     f"server holds: at most {bound:,} GiB of {medium} per node ({why}). A bare number is GiB; "
                     "check the size and its unit.")


def check_tier_bounds(t: Any, gpu: Any, tp: int, pp: int = 1) -> None:
    """Check a ``kv_tier_rules.TierSettings``'s host and disk sizes against one node (``refuse_beyond_a_node``):
    vLLM's ``--kv-offloading-size`` (summed over the TP × PP ranks), SGLang's ``--hicache-size`` (GB per GPU) and
    ``--kv-tier-nvme`` (GiB per GPU); ``--hicache-ratio`` scales the planned pool and is not known before the plan.

    Raises:
        InputError: a size beyond what a node holds.
    """
    world = tp * pp
    size = t.kv_offloading_size_gib
    if size is not None and size > 0:
        refuse_beyond_a_node(f"--kv-offloading-size {size:,.6g} GiB over {world} GPU{'' if world == 1 else 's'} "
                             "(vLLM's size is summed over the TP × PP ranks)", "host", size / world, gpu, world)
    if t.hicache_size_gb:
        refuse_beyond_a_node(f"--hicache-size {t.hicache_size_gb:,} GB (SGLang's, per GPU)", "host",
                             t.hicache_size_gb * 1e9 / 2**30, gpu, world)
    if t.nvme_gib is not None and t.nvme_gib > 0:
        refuse_beyond_a_node(f"--kv-tier-nvme {t.nvme_gib:,.6g} GiB (per GPU)", "nvme", t.nvme_gib, gpu, world)
