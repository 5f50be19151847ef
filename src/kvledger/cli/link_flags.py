"""``--inter-node-link``: the network a TP group over several nodes runs its all-reduces on, in ``--link``'s words
(``disagg``: a bandwidth per GPU and direction)."""

from __future__ import annotations

__all__ = ["INTER_NODE_LINK_HELP", "inter_node_link"]

INTER_NODE_LINK_HELP = (
    "A TP group over several nodes (--tp 16 on 8-GPU boards): one GPU's network bandwidth, one direction, as a NIC's "
    "speed is quoted: 50GB/s, 400Gbps (default: one 400 Gb/s NIC per GPU, as on HGX H100/H200/B200). Its all-reduces "
    "are priced as NCCL's ring over the nodes' NICs, with the network's steps in each call's latency; so are vLLM's "
    "DP ranks' MoE all-gathers and reduce-scatters where the DP × TP GPUs span nodes, and in search a disaggregated "
    "unit's KV link between nodes.")


def inter_node_link(text: str | None) -> float | None:
    """``--inter-node-link`` as B/s one direction per GPU, None when not given (``kv_transfer.nic_bytes_per_s``).

    Raises:
        InputError: an unreadable bandwidth (``kv_transfer.parse_link_bandwidth``'s words, naming this flag).
    """
    from kvledger.dynamics.engine.kv_transfer import nic_bytes_per_s

    return nic_bytes_per_s(text)
