"""The TP all-reduce of a group that spans nodes: NCCL's ring over the nodes' network cards, with the network's hops
in its per-call latency.

A TP group past one node (``--tp 16`` on 8-GPU HGX boards: ``node_size.assume_nodes``) runs its all-reduces through
NCCL across the nodes: vLLM's custom all-reduce is off there (``vllm_custom_ar.custom_all_reduce``: the group spans
nodes), and so is SGLang's. Modelled: **NCCL's ring all-reduce** (``src/graph/tuning.cc``: ring bus bandwidth =
channels × each channel's bandwidth, every rank moving ``2(n − 1)/n · S`` bytes; tree and CollNet/SHARP not modelled).
A ring over N nodes crosses each node boundary once a channel; NCCL lays its channels over the node's NICs (one per
GPU on HGX H100/H200/B200, "rail-aligned"), so the ``g`` ranks a node holds of the group carry the crossings on ``g``
NICs together, and the ring's bus bandwidth per GPU is

    link = min(the scale-up link as the all-reduce prices it one node wide, g × NIC bandwidth a GPU, one direction)

``NIC_BYTES_PER_S`` = 50 GB/s per GPU, one direction: one 400 Gb/s NIC per GPU (NVIDIA ConnectX-7, 400 Gb/s
InfiniBand NDR or Ethernet, as on DGX/HGX H100, H200 and B200 systems: 8 NICs for 8 GPUs), the same assumption the
disaggregated KV link across nodes takes (``kv_tier_rules.NETWORK_BYTES_PER_S``); ``--inter-node-link`` gives yours
(per GPU, one direction, as a NIC's speed is quoted). At 8 GPUs a node that is 400 GB/s, under NVLink 4's 450 GB/s.

Per-call latency: the one-node figure this module's caller already prices (``tp_comm.allreduce_latency_s``: Vidur's
measured NCCL medians, at the ``g`` ranks a node holds) plus what NCCL's own tuning model adds for the same call across
the nodes (NCCL ``src/graph/tuning.cc``, ``ncclTopoTuneModel``, NVIDIA/nccl 2.23.4 and later: commit 68b54236, the same
at master 5067397c): a ring all-reduce takes ``2(n − 1)`` steps, ``2(N − 1)`` of them over the network (``nInterSteps``
for N > 1 nodes), so ``2(n − N)`` within the nodes, never negative (``ring_steps``; the ``2N`` network steps of NCCL
before 2.23.4, e.g. 2.20.3, left ``−2`` intra-node ones at one rank a node); small messages (decode steps) run its LL
protocol, whose per-step latencies are ``hwLat`` = 0.6 µs over NVLink (``NVLINK_HOP_LATENCY_S``; 1.0 µs over PCIe,
``PCIE_HOP_LATENCY_S``) and 2.7 µs over the network (``NET_HOP_LATENCY_S``; 5.0 µs, the tree's, where the ring holds one
rank a node, ``NET_HOP_LATENCY_PPN1_S``: "with ppn=1 latencies are fully exposed"), and across nodes every intra-node
step costs at least the network's post overhead, 1 µs on x86 Intel hosts (``getNetOverhead``, ``NET_OVERHEAD_S``; 2 µs
on AMD hosts)::

    extra = [2(n − N) · max(intra, overhead) + 2(N − 1) · net] − 2(g − 1) · intra

TP 16 over two nodes of 8 on NVLink: (28 × 1.0 + 2 × 2.7) − 14 × 0.6 = 33.4 − 8.4 = 25.0 µs a call; two ranks on two
nodes: 0 × 1.0 + 2 × 5.0 − 0 = 10.0 µs. The LL protocol's own bandwidth is a quarter of the ring's (NCCL switches to its
Simple protocol for large messages, whose network latency is 14 µs a hop): the figure prices decode-size calls' latency
and prefill-size calls' bytes, each at the protocol NCCL picks for them. vLLM's DP ranks of a MoE model take the same
link for their MoE layers' all-gather and reduce-scatter across nodes, at an all-gather's steps (``gather_latency_s``,
``dp_lockstep_cost.py``). Pipeline parallelism's send/recv is priced in the plan's roofline only (``pipeline_pass.py``;
the simulator refuses --pp). TP with --enable-expert-parallel and no DP ranks (TP 16 over two nodes of 8) runs no expert
all-to-all: vLLM 0.33's ``FusedMoEParallelConfig.use_all2all_kernels`` needs ``dp_size > 1`` (or PCP or
sequence-parallel MoE), and ``runner/moe_runner.py`` combines the experts' outputs with
``tensor_model_parallel_all_reduce``, one of the TP all-reduces priced here across the nodes (``expert_parallel.py``); a
roofline asked for an all-to-all (``RooflineStepCost(all_to_all=True)``) prices it over the same link this module gives
the TP group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.accounting.kv_tier_rules import NETWORK_BYTES_PER_S

__all__ = ["NIC_BYTES_PER_S", "NET_HOP_LATENCY_S", "NVLINK_HOP_LATENCY_S", "PCIE_HOP_LATENCY_S", "NET_OVERHEAD_S",
           "NIC_SOURCE", "NET_HOP_LATENCY_PPN1_S", "SpanningLink", "ring_steps", "spanning_link", "extra_latency_s",
           "gather_latency_s", "grouped_broadcast_latency_s",
           "allreduce_terms", "span_words", "span_data", "unused_nic_note"]

NIC_BYTES_PER_S = NETWORK_BYTES_PER_S
"""One 400 Gb/s NIC per GPU, one direction, B/s: NVIDIA ConnectX-7 (400 Gb/s NDR InfiniBand / Ethernet), one per GPU
on DGX/HGX H100, H200 and B200 (an assumption for other nodes; ``--inter-node-link``)."""
NIC_SOURCE = "assumed: one 400 Gb/s NIC per GPU, ConnectX-7 class, as on DGX/HGX H100/H200/B200; --inter-node-link"
NET_HOP_LATENCY_S = 2.7e-6
"""NCCL ring LL's latency per step over the network, s (``tuning.cc`` ``hwLat[NET][Ring][LL]``)."""
NET_HOP_LATENCY_PPN1_S = 5.0e-6
"""NCCL ring LL's latency per network step where the ring holds one rank a node, s (``tuning.cc`` 2.23.4 on:
``ppn == 1`` takes ``hwLat[NET][Tree][LL]``)."""
NVLINK_HOP_LATENCY_S = 0.6e-6
"""NCCL ring LL's latency per step over NVLink, s (``hwLat[NVLINK][Ring][LL]``)."""
PCIE_HOP_LATENCY_S = 1.0e-6
"""NCCL ring LL's latency per step over PCIe, s (``hwLat[PCI][Ring][LL]``)."""
NET_OVERHEAD_S = 1.0e-6
"""NCCL's network post overhead on x86 Intel hosts, s (``getNetOverhead``: 1 µs; 2 µs on AMD hosts): the least an
intra-node step of a ring across nodes costs."""


@dataclass(frozen=True)
class SpanningLink:
    """The all-reduce's link and added latency for a TP group over ``nodes`` nodes of ``ranks_per_node`` ranks.

    Attributes:
        nodes: nodes the TP group spans; ranks_per_node: its ranks on each.
        link_bytes_per_s: the ring's bus bandwidth per GPU, one direction, B/s (min of the node's link and the NICs).
        one_node_bytes_per_s: the link a one-node all-reduce is priced at, B/s one direction.
        nic_bytes_per_s: one GPU's NIC, one direction, B/s; nic_source: where that figure comes from.
        extra_latency_s: NCCL's added latency per call across the nodes, s (``extra_latency_s``).
    """

    nodes: int
    ranks_per_node: int
    link_bytes_per_s: float
    one_node_bytes_per_s: float
    nic_bytes_per_s: float
    nic_source: str
    extra_latency_s: float

    def words(self) -> str:
        """The pricing in words: the ring, its bandwidth's bound and the added latency."""
        g, nic, one = self.ranks_per_node, self.nic_bytes_per_s, self.one_node_bytes_per_s
        bound = "the NICs" if g * nic < one else "the node's link"
        return (f"across {self.nodes} nodes: NCCL's ring at {self.link_bytes_per_s / 1e9:,.4g} GB/s a direction "
                f"(bound by {bound}: {g} GPUs a node × {nic / 1e9:,.4g} GB/s NIC each = {g * nic / 1e9:,.4g} GB/s, "
                f"against {one / 1e9:,.4g} GB/s within a node; NIC {self.nic_source}) and "
                f"+{self.extra_latency_s * 1e6:.3g} µs a call for its network steps (NCCL tuning.cc's ring LL model: "
                "accounting/tp_network.py)")

    def brief(self) -> str:
        """``words`` in one line at 80 columns: the ring and its bandwidth (one direction), its bound and added latency
        left to ``words``."""
        return f"as NCCL's ring across {self.nodes} nodes at {self.link_bytes_per_s / 1e9:,.4g} GB/s"

    def data(self, latency_s: float) -> dict[str, Any]:
        """The terms for ``--json`` (``latency_s``: the per-call latency priced, this one's extra included)."""
        return {"allreduce_tp_nodes": self.nodes, "allreduce_algorithm": "NCCL ring across nodes",
                "allreduce_link_bytes_per_s": self.link_bytes_per_s,
                "inter_node_link_bytes_per_s": self.nic_bytes_per_s, "inter_node_link_source": self.nic_source,
                "allreduce_latency_s": latency_s,
                "allreduce_inter_node_latency_s": self.extra_latency_s, "allreduce_pricing": self.words()}


def span_words(cost: Any) -> str:
    """" " + the words of a step cost's TP all-reduce across nodes (``allreduce_span``), or "" within one node."""
    span = getattr(cost, "allreduce_span", None)
    return f" {span.words()}" if span is not None else ""


def span_data(cost: Any) -> dict[str, Any]:
    """A step cost's TP all-reduce across nodes for ``--json`` (``SpanningLink.data``), or {} within one node."""
    span = getattr(cost, "allreduce_span", None)
    return span.data(cost.allreduce_latency_s) if span is not None else {}


def ring_steps(n: int, nodes: int, collective: str = "all_reduce") -> tuple[int, int]:
    """(steps within a node, steps over the network) of NCCL's ring ``collective`` over ``n`` ranks on ``nodes`` nodes
    (NCCL 2.23.4 ``tuning.cc``: an all-reduce's ``nsteps`` 2(n − 1) and ``nInterSteps`` 2(N − 1); an all-gather's or
    reduce-scatter's ("all_gather") n − 1 and N − 1; a ring of n ranks spans at most n nodes): both ≥ 0."""
    n, nodes = max(1, n), max(1, min(nodes, n))
    k = 2 if collective == "all_reduce" else 1
    return k * (n - nodes), k * (nodes - 1)


def extra_latency_s(tp: int, nodes: int, over_pcie: bool = False, collective: str = "all_reduce") -> float:
    """NCCL's ring LL latency of one ``collective`` (``ring_steps``) over ``tp`` ranks on ``nodes`` nodes less that of
    its ``tp ÷ nodes`` ranks on one node, s (module doc); 0 on one node."""
    if nodes <= 1:
        return 0.0
    g = -(-tp // nodes)
    intra = PCIE_HOP_LATENCY_S if over_pcie else NVLINK_HOP_LATENCY_S
    within, over = ring_steps(tp, nodes, collective)
    net = NET_HOP_LATENCY_PPN1_S if g == 1 else NET_HOP_LATENCY_S  # NCCL's ppn == 1: the tree's network latency
    return within * max(intra, NET_OVERHEAD_S) + over * net - ring_steps(g, 1, collective)[0] * intra


def gather_latency_s(gpu, n: int, nodes: int = 1) -> float:
    """Per-call latency of NCCL's ring all-gather (or reduce-scatter: the same steps) over ``n`` ranks on ``nodes``
    nodes of ``gpu``, s: the all-reduce's fitted one-node latency at the ``g`` ranks a node holds
    (``tp_comm.allreduce_latency_s``) less the ``g − 1`` ring steps an all-gather does not take (NCCL's ring model,
    ``tuning.cc`` ``nsteps``: an all-reduce 2(g − 1) steps, an all-gather g − 1, each at the one-node hop latency), plus
    the all-gather's own steps across the nodes (``extra_latency_s``: n − N within the nodes, N − 1 over the network);
    0 for one rank."""
    from kvledger.accounting.tp_comm import allreduce_latency_s, over_pcie

    if n <= 1:
        return 0.0
    nodes = max(1, min(nodes, n))
    g, pcie = -(-n // nodes), over_pcie(gpu)
    hop = PCIE_HOP_LATENCY_S if pcie else NVLINK_HOP_LATENCY_S
    one_node = allreduce_latency_s(gpu, g) - ring_steps(g, 1, "all_gather")[0] * hop
    return one_node + extra_latency_s(n, nodes, pcie, "all_gather")


def grouped_broadcast_latency_s(gpu, n: int, nodes: int = 1) -> float:
    """Per-call latency of vLLM's ``all_gatherv`` / ``reduce_scatterv`` at unequal counts over ``n`` ranks on
    ``nodes`` nodes of ``gpu``, s: one NCCL group of ``n`` ring broadcasts (reduces), one from each rank (vLLM 0.19.0
    and 0.33.0 ``pynccl.py``). NCCL bins a group's broadcasts as one (function, type) aggregate and prices it once
    (``enqueue.cc``: ``numPipeOps`` = the group's tasks ÷ channels, 1 while ``n`` is at most the channels), at a ring
    broadcast's latency, ``baseLat`` + one step at the ring's hop latency (``tuning.cc``, 2.23.4 to master 5067397c:
    ``sameChannels``, which the ring search tries first and keeps where it finds its rings; ``nsteps`` = n steps
    where it does not: not modelled), that hop NVLink's (PCIe's) on one node, the network's across nodes
    (``hwLat[NET][Ring][LL]``). ``baseLat`` is taken as the all-reduce's fitted one-node latency at the ``g`` ranks a
    node holds (``tp_comm.allreduce_latency_s``) less its 2(g − 1) ring steps; 0 for one rank."""
    from kvledger.accounting.tp_comm import allreduce_latency_s, over_pcie

    if n <= 1:
        return 0.0
    nodes = max(1, min(nodes, n))
    g, pcie = -(-n // nodes), over_pcie(gpu)
    hop = PCIE_HOP_LATENCY_S if pcie else NVLINK_HOP_LATENCY_S
    base = allreduce_latency_s(gpu, g) - ring_steps(g, 1)[0] * hop
    return base + (hop if nodes == 1 else NET_HOP_LATENCY_S)


def spanning_link(tp: int, nodes: int, one_node_Bps: float, nic_Bps: float | None = None,
                  over_pcie: bool = False) -> SpanningLink | None:
    """The all-reduce's link for a TP group of ``tp`` ranks over ``nodes`` nodes (None on one node): ``one_node_Bps``,
    the link a one-node all-reduce is priced at (B/s, one direction); ``nic_Bps``: a GPU's NIC (None: the assumed
    ``NIC_BYTES_PER_S``)."""
    if nodes <= 1 or tp <= 1:
        return None
    g = -(-tp // nodes)
    nic = NIC_BYTES_PER_S if nic_Bps is None else nic_Bps
    source = NIC_SOURCE if nic_Bps is None else "given (--inter-node-link)"
    return SpanningLink(nodes, g, min(one_node_Bps, g * nic), one_node_Bps, nic, source,
                        extra_latency_s(tp, nodes, over_pcie))


def allreduce_terms(gpu, tp: int, nodes: int = 1, share: float | None = None, latency_s: float | None = None,
                    nic_Bps: float | None = None) -> tuple[float, float, SpanningLink | None]:
    """(link B/s one direction, per-call latency s, the spanning link or None) of the TP all-reduce of ``tp`` ranks
    over ``nodes`` nodes on ``gpu`` (a ``GpuSpec``): the one-node link and fitted latency (``tp_comm``), across nodes
    the ring's bound and NCCL's added latency (module doc); ``latency_s`` given: taken whole, nothing added."""
    from kvledger.accounting.tp_comm import allreduce_latency_s, link_bytes_per_s, over_pcie

    if tp <= 1:
        return 0.0, 0.0, None
    one_node = link_bytes_per_s(gpu, share)
    span = spanning_link(tp, nodes, one_node, nic_Bps, over_pcie(gpu))
    if span is None:
        return one_node, allreduce_latency_s(gpu, tp) if latency_s is None else latency_s, None
    lat = allreduce_latency_s(gpu, span.ranks_per_node) + span.extra_latency_s if latency_s is None else latency_s
    return span.link_bytes_per_s, lat, span


def unused_nic_note(nic_text: str | None, cost: Any) -> str | None:
    """The note for ``--inter-node-link`` given where nothing crosses a node (no TP group nor DP ranks past one: the
    step cost has no ``allreduce_span`` nor ``span``), None where it prices something or was not given."""
    inner = getattr(cost, "inner", cost)  # DP ranks: the lock-step cost around one rank's roofline
    if nic_text is None or getattr(inner, "allreduce_span", None) is not None or getattr(cost, "span", None):
        return None
    return (f"--inter-node-link {nic_text} has no effect here: every collective stays inside one node (the TP group "
            "and any DP ranks fit it); it prices a TP group or DP ranks over several nodes (--tp 16 on 8-GPU boards)")
