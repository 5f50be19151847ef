"""Pipeline parallelism in the plan's roofline: a step is one pass through the PP stages in turn, plus the sends
between them.

The roofline (``roofline.RooflineStepCost``) prices a step of the whole model at TP ``tp``: under ``--pp P`` that is
the time a batch takes through all P stages one after another (each stage's ``tp`` GPUs run their 1/P of the layers,
then hand the activations on), not one GPU's step: each GPU reads only its own stage's weights and KV, about 1/P of
the step's bytes. Between consecutive stages vLLM sends the model's intermediate tensors (``IntermediateTensors``:
``hidden_states`` and ``residual``, each tokens × hidden_size in the activation dtype, for the Llama, Qwen and DeepSeek
model files' ``make_empty_intermediate_tensors_factory``) with ``send_tensor_dict(…, all_gather_group=tp_group)``
(vLLM ``v1/worker/gpu_worker.py::execute_model``; ``distributed/parallel_state.py::GroupCoordinator
.send_tensor_dict``): each of the ``tp`` ranks sends its 1/tp slice to its peer of the next stage, which all-gathers
the slices over its own scale-up link. vLLM places ranks TP-innermost (rank = pp_rank × tp + tp_rank), so a boundary
crosses nodes where a node's last rank and the next node's first meet; there the slice rides the GPU's NIC
(``tp_network.NIC_BYTES_PER_S``, or ``--inter-node-link``), elsewhere the scale-up link (``tp_comm.link_bytes_per_s``).

Priced per boundary: one network step's latency (NCCL's LL figure, ``tp_network.NET_HOP_LATENCY_S``, or NVLink's) +
the slice at the link's one-direction bandwidth + the receivers' all-gather of the slices ((tp − 1)/tp of the tensors
over the scale-up link, (tp − 1) NVLink steps). Not priced: the metadata each send first passes over the CPU group
(``send_object``), and the pipeline bubble: vLLM keeps up to P batches in flight (the engine core's batch queue), so a
stage idles while fewer than P batches are ready; the decode rows are one batch's pass, its tokens per second a lower
bound on what P batches in flight give when the running requests split into them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["PipelineSends", "pipeline_sends", "pipeline_roofline"]

SENT_TENSORS = 2
"""Tensors a stage hands the next per token: hidden_states and residual (module doc)."""


@dataclass(frozen=True)
class PipelineSends:
    """The stage-to-stage sends of one pass through ``pp`` stages of ``tp`` GPUs.

    Attributes:
        pp, tp: stages and GPUs per stage. bytes_per_token: what one boundary carries per token, B (all tp slices).
        across_nodes / within_node: boundaries whose slices cross the network / stay on the scale-up link.
        nic_bytes_per_s, scaleup_bytes_per_s: one-direction bandwidth a GPU sends its slice at, B/s.
        nic_source: where the NIC figure comes from. hidden: elements per token of each sent tensor (hidden_size;
            0: taken as divisible). vLLM 0.19's ``GroupCoordinator._should_use_all_gather`` splits a tensor where tp
            divides its elements, tokens × hidden (``numel() % world_size``), so each rank sends 1/tp; else every rank
            sends the whole tensor and nothing is gathered.
    """

    pp: int
    tp: int
    bytes_per_token: int
    across_nodes: int
    within_node: int
    nic_bytes_per_s: float
    scaleup_bytes_per_s: float
    nic_source: str
    hidden: int = 0
    crossing: tuple[bool, ...] = ()  # per boundary (stage b to b + 1): whether it crosses nodes (``pipeline_sends``)

    def seconds(self, tokens: int) -> float:
        """Time the pass spends on its sends for a step of ``tokens`` tokens, s (module doc)."""
        from kvledger.accounting.tp_network import NET_HOP_LATENCY_S, NVLINK_HOP_LATENCY_S

        whole = tokens * self.bytes_per_token
        split = self.tp > 1 and tokens * self.hidden % self.tp == 0  # numel() % tp: each step's own tokens
        sl = whole / self.tp if split else whole
        net = self.across_nodes * (NET_HOP_LATENCY_S + sl / self.nic_bytes_per_s)
        near = self.within_node * (NVLINK_HOP_LATENCY_S + sl / self.scaleup_bytes_per_s)
        gather = 0.0 if not split else (self.pp - 1) * (
            (self.tp - 1) * NVLINK_HOP_LATENCY_S + whole * (self.tp - 1) / self.tp / self.scaleup_bytes_per_s)
        return net + near + gather

    def boundary_s(self, tokens: int, b: int) -> float:
        """One boundary's send (stage ``b`` to ``b`` + 1) for a step of ``tokens`` tokens, s: its link's latency and
        the slice at its bandwidth, plus the receivers' all-gather (``seconds`` prices the pass's P − 1 of them)."""
        from kvledger.accounting.tp_network import NET_HOP_LATENCY_S, NVLINK_HOP_LATENCY_S

        whole = tokens * self.bytes_per_token
        split = self.tp > 1 and tokens * self.hidden % self.tp == 0
        sl = whole / self.tp if split else whole
        across = self.crossing[b] if self.crossing else False
        link = NET_HOP_LATENCY_S + sl / self.nic_bytes_per_s if across else (
            NVLINK_HOP_LATENCY_S + sl / self.scaleup_bytes_per_s)
        return link + (0.0 if not split else (self.tp - 1) * NVLINK_HOP_LATENCY_S
                       + whole * (self.tp - 1) / self.tp / self.scaleup_bytes_per_s)

    def data(self, decode_tokens: int, prefill_tokens: int) -> dict[str, Any]:
        """The figures for JSON and the report: the sends of a decode step and of a prefill chunk."""
        return {"stages": self.pp, "gpus_per_stage": self.tp, "step_scope": "one pass through every stage in turn",
                "send_bytes_per_token": self.bytes_per_token, "boundaries_across_nodes": self.across_nodes,
                "boundaries_within_node": self.within_node, "nic_bytes_per_s": self.nic_bytes_per_s,
                "nic_source": self.nic_source, "scaleup_bytes_per_s": self.scaleup_bytes_per_s,
                "decode_tokens": decode_tokens, "decode_send_s": self.seconds(decode_tokens),
                "prefill_tokens": prefill_tokens, "prefill_send_s": self.seconds(prefill_tokens)}


def pipeline_sends(model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> PipelineSends | None:
    """The sends of ``s``'s pipeline (None at PP 1): which boundaries cross nodes under ``s.nnodes`` and at what
    bandwidth (module doc)."""
    from kvledger.accounting.tp_comm import link_bytes_per_s
    from kvledger.accounting.tp_network import NIC_BYTES_PER_S, NIC_SOURCE

    if s.pp <= 1:
        return None
    per_node = s.tp * s.pp // max(1, s.nnodes)
    crossing = tuple((b * s.tp - 1) // per_node != (b * s.tp) // per_node for b in range(1, s.pp))
    across = sum(crossing)
    nic, src = ((s.inter_node_link_bytes_per_s, "--inter-node-link") if s.inter_node_link_bytes_per_s
                else (NIC_BYTES_PER_S, NIC_SOURCE))
    has_link = gpu.interconnect_bytes_per_s > 0 or gpu.host_link_bytes_per_s > 0
    scaleup = link_bytes_per_s(gpu, s.allreduce_link_share) if has_link else nic
    return PipelineSends(s.pp, s.tp, SENT_TENSORS * model.hidden_size * model.dtype_bytes, across, s.pp - 1 - across,
                         nic, scaleup, src, model.hidden_size, crossing)


def pipeline_roofline(roof: Any, model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> Any:
    """``roof`` (a ``RooflineReport``) with each decode row's and the prefill chunk's time lengthened by the pass's
    sends and its ``pipeline`` figures set; ``roof`` itself at PP 1 or without a roofline."""
    p = pipeline_sends(model, gpu, s) if roof is not None else None
    if p is None:
        return roof
    rows = []
    for r in roof.decode:
        extra = p.seconds(r.batch)
        t = r.step_s + extra
        rows.append(replace(r, step_s=t, step_s_lower_bound=r.step_s_lower_bound + extra, tok_per_s_per_seq=1 / t,
                            tok_per_s=r.batch / t))
    pf = dict(roof.prefill)
    chunk = int(pf["chunk_tokens"])
    extra = p.seconds(chunk)
    pf.update(step_s=pf["step_s"] + extra, step_s_lower_bound=pf["step_s_lower_bound"] + extra,
              tok_per_s=chunk / (pf["step_s"] + extra), pipeline_send_s=extra)
    return replace(roof, decode=tuple(rows), prefill=pf, pipeline=p.data(1, chunk))
