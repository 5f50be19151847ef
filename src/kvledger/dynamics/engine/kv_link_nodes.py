"""Which link a prompt's KV crosses between a prefill and a decode replica, given the nodes they need.

A node holds ``gpus_per_node`` GPUs (``accounting/node_size.py``: 8 on an SXM/HGX/OAM baseboard). A prefill replica of
TP p and a decode replica of TP d share one node's NVLink only when p + d GPUs fit on it; past that the pair sits on two
nodes and the KV crosses the network between them (NIXL / Mooncake over RDMA), whatever the scale-up link. ``auto``
takes the scale-up link where the pair fits one node (PCIe where the GPU has no NVLink) and otherwise the network at
``NETWORK_BYTES_PER_S`` per GPU, one direction (an assumption: one 400 Gb/s NIC per GPU, as on HGX H100/H200/B200
systems; ``--link 50GB/s`` gives yours). A given ``nvlink`` across nodes is kept, with a warning.
"""

from __future__ import annotations

from kvledger.accounting.kv_tier_rules import NETWORK_BYTES_PER_S
from kvledger.accounting.node_size import gpus_per_node
from kvledger.dynamics.engine.kv_transfer import KVLink, link_from_gpu

__all__ = ["pair_link"]


def pair_link(gpu, link: str, prefill_tp: int, decode_tp: int, latency_s: float,
              nic_Bps: float | None = None) -> tuple[KVLink, str | None]:
    """(the KV link of a prefill TP ``prefill_tp`` / decode TP ``decode_tp`` pair on ``gpu`` for ``link`` — "auto",
    "nvlink", "pcie" or a bandwidth —, a note or warning on the choice, None where there is nothing to say);
    ``nic_Bps``: a GPU's NIC where "auto" crosses nodes (``--inter-node-link``; None: the assumed 400 Gb/s).

    Raises:
        InputError: as ``link_from_gpu`` (no such link for this GPU, an unreadable bandwidth).
    """
    key = link.strip().lower()
    node = gpus_per_node(gpu)
    pair = prefill_tp + decode_tp
    across = node is not None and pair > node[0]
    where = (f"a prefill replica (TP {prefill_tp}) and a decode replica (TP {decode_tp}) need {pair} GPUs, more than "
             f"one node holds ({node[0]}: {node[1]})") if across else ""
    if key == "auto":
        if not across:
            return link_from_gpu(gpu, "nvlink" if gpu.interconnect_bytes_per_s else "pcie", latency_s), None
        bw = NETWORK_BYTES_PER_S if nic_Bps is None else nic_Bps
        given = "assumed: one 400 Gb/s NIC per GPU; --link gives yours" if nic_Bps is None else "--inter-node-link"
        src = f"network: {bw / 1e9:,.4g} GB/s per GPU, one direction ({given}), because {where}"
        return KVLink("network", bw, latency_s, src), f"KV link: {where}, so the KV crosses the network between nodes"
    chosen = link_from_gpu(gpu, link, latency_s)
    if across and chosen.name == "nvlink":
        return chosen, (f"warning: --link nvlink, but {where}: the KV crosses the network between them, not NVLink "
                        f"(--link auto or --link 50GB/s prices it)")
    return chosen, None
