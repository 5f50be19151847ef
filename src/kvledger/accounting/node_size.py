"""TP × PP past one node: the nodes a vLLM plan must assume when ``--nnodes`` leaves more ranks on a node than that
hardware holds.

A plan's vLLM terms read the node count (custom all-reduce is off when a TP group spans nodes: ``vllm_custom_ar.py``),
so ``--tp 16`` on H100 SXM planned as one node of 16 GPUs keeps custom all-reduce's buffers no such deployment has.
vLLM itself runs TP across nodes (on Ray, or its own ``--nnodes`` mode from 0.11.1), so the plan does not refuse:
it assumes the fewest nodes that hold the ranks (``ParallelConfig.local_world_size`` = world_size ÷ nnodes, the same
on every node, ``topology.py``) and says so.

GPUs per node: where the catalog states it (gpus.csv ``form_factor``, "8 chips/host" for TPU boards), else 8 for an
SXM, HGX or OAM baseboard (HGX H100/H200/B200, AMD's OAM platforms); a PCIe card at most as many as the largest
PCIe GPU servers hold: 10 double-width cards (Supermicro SYS-421GE-TNRT, 4U: "up to 10 double-width GPUs"; the
8-slot servers are the common build, so 10 is the ceiling, not the usual), 20 low-profile or single-width ones
(Supermicro's 20-slot T4 inference server, PCIe x16 behind PLX switches); rack-scale NVLink domains (GB200/GB300
NVL72) have no figure, and nothing is assumed for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.gpus import GpuSpec

__all__ = ["BASEBOARD_GPUS", "PCIE_DOUBLE_WIDTH_GPUS", "PCIE_SINGLE_WIDTH_GPUS", "NodeAssumption", "gpus_per_node",
           "assume_nodes", "nodes_flag", "beyond_a_node", "dp_nnodes"]

BASEBOARD_GPUS = 8
"""GPUs on one SXM/HGX or OAM baseboard (HGX H100/H200/B200 8-GPU, AMD Instinct OAM platforms), one per node."""

PCIE_DOUBLE_WIDTH_GPUS = 10
"""Double-width PCIe GPUs one server holds at most: Supermicro SYS-421GE-TNRT (4U, dual Xeon 6/5th gen), "up to 10
double-width GPUs" on its specification page (supermicro.com/en/products/system/gpu/4u/sys-421ge-tnrt); the 8-GPU
PCIe servers (ASUS ESC8000, Supermicro SYS-521GE-TNRT) hold fewer. A consumer card (RTX 4090: 3 slots as sold) fits
only in its 2-slot server variants, so this is its ceiling as well."""

PCIE_SINGLE_WIDTH_GPUS = 20
"""Low-profile or single-width PCIe GPUs one server holds at most: Supermicro's inference server with 20 PCIe 3.0 x16
slots behind Broadcom PLX switches, shown with 20 Tesla T4 (AnandTech, "Scaling Inference with NVIDIA's T4: A
Supermicro Solution with 320 PCIe Lanes", 2018-11)."""

_STATED = re.compile(r"(\d+) (?:chips|GPUs)(?:/| per )(?:host|node)")


def gpus_per_node(gpu: GpuSpec) -> tuple[int, str] | None:
    """(GPUs one node of ``gpu`` holds, where the figure comes from), or None where nothing says."""
    m = _STATED.search(gpu.form_factor)
    if m:
        return int(m.group(1)), f"gpus.csv: {gpu.form_factor}"
    if any(k in gpu.form_factor for k in ("SXM", "HGX", "OAM")) and "72-GPU" not in gpu.interconnect:
        return BASEBOARD_GPUS, f"an {BASEBOARD_GPUS}-GPU {gpu.form_factor.split(' ')[0]} baseboard"
    if gpu.form_factor.startswith("PCIe"):
        if any(k in gpu.form_factor for k in ("low-profile", "single-slot")):
            return PCIE_SINGLE_WIDTH_GPUS, (f"the most single-width PCIe cards one server holds, "
                                            f"{PCIE_SINGLE_WIDTH_GPUS} slots behind PCIe switches")
        return PCIE_DOUBLE_WIDTH_GPUS, ("the most double-width PCIe cards one server holds, a 4U 10-slot server; most "
                                        "hold 8")
    return None


@dataclass(frozen=True)
class NodeAssumption:
    """The nodes a plan assumed beyond those given.

    Attributes:
        given: --nnodes as given (1 unless set).
        nnodes: the nodes the plan assumes, the fewest that hold the TP × PP ranks evenly.
        per_node: GPUs one node of the GPU holds; source: where that figure comes from.
        world: the TP × PP ranks; layout: "--tp 16" (with "× --pp 2" where PP > 1). tp: the TP degree (0: not given).
    """

    given: int
    nnodes: int
    per_node: int
    source: str
    world: int
    layout: str
    engine: str = "vllm"
    tp: int = 0

    @property
    def text(self) -> str:
        """The warning: what the plan assumes, why, and the flag that sets it."""
        if self.engine != "vllm":  # SGLang, TensorRT-LLM: their plans read no node count; the ranks still span nodes
            per = self.world // self.nnodes
            how = (f"SGLang's --nnodes {self.nnodes} with a --node-rank on each" if self.engine == "sglang"
                   else "one MPI world across them")
            return (f"{self.layout} is {self.world} GPUs, more than one node of this GPU holds ({self.per_node}: "
                    f"{self.source}), so it runs on {self.nnodes} nodes of {per} ({how}) and every layer's "
                    "all-reduces cross the network between them, priced as NCCL's ring over the nodes' NICs (one "
                    "400 Gb/s NIC per GPU assumed; --inter-node-link gives yours)")
        g = self.given
        where = f", {self.world // g} a node under --nnodes {g}" if g > 1 else ""
        return (f"{self.layout} is {self.world} GPUs{where}, more than one node of this GPU holds ({self.per_node}: "
                f"{self.source}); rather than plan {'nodes' if g > 1 else 'one node'} of {self.world // g} GPUs, which "
                f"this hardware does not have, the plan assumes {self.nnodes} nodes of {self.world // self.nnodes} "
                f"(--nnodes {self.nnodes}), as vLLM runs " + self._across() + "; pass --nnodes to set them")

    @property
    def brief(self) -> str:
        """The warning's facts in one line at 80 columns (the short plan; ``text`` is the whole of it): the GPUs, a
        node's, the nodes assumed and what crosses the network between them."""
        head = f"{self.world} GPUs, {self.per_node} a node: "
        if self.engine != "vllm":
            return head + f"runs on {self.nnodes} nodes; TP all-reduces over NICs"
        was = f" (not {self.given})" if self.given > 1 else ""
        spans = not (self.tp and (self.world // self.nnodes) % self.tp == 0)
        return head + f"assumes --nnodes {self.nnodes}{was}; " + (
            "TP all-reduces over NICs" if spans else "only PP sends over NICs")

    def _across(self) -> str:
        """What crosses the nodes: a TP group spanning them, or (whole TP groups on each node) only the pipeline's
        stage boundaries (vLLM's ranks are TP-innermost: rank = pp_rank × tp + tp_rank)."""
        if self.tp and (self.world // self.nnodes) % self.tp == 0:
            return (f"pipeline stages across nodes (on Ray, or its own --nnodes mode): each node holds whole TP "
                    f"groups of {self.tp}, whose all-reduces stay on the node's scale-up link (custom all-reduce on), "
                    "and only the stage-to-stage sends cross the network between them, priced over the nodes' NICs "
                    "(one 400 Gb/s NIC per GPU assumed; --inter-node-link gives yours)")
        return ("TP across nodes (on Ray, or its own --nnodes mode), custom all-reduce off where a TP group spans "
                "nodes, its all-reduces priced as NCCL's ring over the nodes' NICs (one 400 Gb/s NIC per GPU assumed; "
                "--inter-node-link gives yours)")


def assume_nodes(gpu: GpuSpec, s: PlanSettings) -> tuple[PlanSettings, NodeAssumption | None]:
    """(``s`` with the nodes its TP × PP ranks need, what was assumed): ``s`` as given, None, when its nodes hold the
    ranks or when nothing says how many GPUs a node of ``gpu`` holds. An engine whose plan reads no node count
    (SGLang, TensorRT-LLM: ``--nnodes`` is vLLM's) keeps ``s`` as given, with the warning alone."""
    per = gpus_per_node(gpu)
    world = s.tp * s.pp
    if per is None or world % s.nnodes or world // s.nnodes <= per[0]:
        return s, None  # the topology check refuses a node count that does not divide the ranks
    nnodes = next(n for n in range(s.nnodes, world + 1) if world % n == 0 and world // n <= per[0])
    layout = f"--tp {s.tp}" + (f" × --pp {s.pp}" if s.pp > 1 else "")
    if s.engine != "vllm":  # the warning only: --nnodes is vLLM's, and these plans read no node count
        return s, NodeAssumption(s.nnodes, nnodes, per[0], per[1], world, layout, s.engine)
    return s.model_copy(update={"nnodes": nnodes}), NodeAssumption(s.nnodes, nnodes, per[0], per[1], world, layout,
                                                                    tp=s.tp)


def nodes_flag(q, p) -> str:
    """`` --nnodes N`` for a fix whose re-plan ``q`` assumed N nodes, other than those the plan ``p`` it advises already
    runs on (a higher TP, another GPU), so that the suggested command says the nodes its figure holds; else "". SGLang's
    plan keeps --nnodes as given in its settings, but its ranks span the nodes its warning names (``nodes.nnodes``),
    and ``sglang.launch_server`` takes the same --nnodes (TensorRT-LLM's MPI world takes none: ""): an SGLang TP 16
    plan already on 2 nodes of 8 is not told --nnodes 2 again."""
    if q.nodes is None or q.nodes.engine not in ("vllm", "sglang"):
        return ""
    on = p.nodes.nnodes if p.nodes is not None else p.settings.nnodes
    return f" --nnodes {q.nodes.nnodes}" if q.nodes.nnodes != on else ""


def beyond_a_node(tp: int, gpu: GpuSpec) -> str:
    """The caveat of a TP degree past one server of 8 GPUs (HGX boards and 8-slot PCIe servers alike; a 72-GPU NVLink
    domain, GB200/GB300 NVL72, holds more): its all-reduces then cross the network between nodes."""
    n = BASEBOARD_GPUS
    if tp <= n or "72-GPU" in gpu.interconnect:
        return ""
    return (f"; TP {tp} spans {tp // n} servers of {n} GPUs, so every layer's all-reduces cross the network between "
            f"them, priced as NCCL's ring over their NICs (--pp {tp // n} --tp {n} keeps each all-reduce within a "
            "server)")


def dp_nnodes(gpu: GpuSpec, tp: int, dp: int) -> int:
    """The nodes ``dp`` DP ranks of ``tp`` GPUs span: the fewest that hold the DP × TP GPUs evenly (vLLM's
    ``engine/arg_utils.py`` asserts world_size % nnodes == 0) with whole ranks on a node or whole nodes to a rank
    (``gpus_per_node``; 1 where nothing says how many GPUs a node holds)."""
    per, world = gpus_per_node(gpu), dp * tp
    if per is None or world <= per[0]:
        return 1
    return next((n for n in range(2, world + 1) if world % n == 0 and (w := world // n) <= per[0]
                 and (w % tp == 0 or tp % w == 0)), world)
