"""The roofline's settings-derived terms that a plan's two rooflines share (``plan.Plan.step_cost`` for the simulator,
``plan.build_plan``'s report): the model as its steps read it, the achievable fractions, the given weight bytes,
the engine's custom all-reduce bound, the all-reduce link share, expert parallelism and which fused-MoE config vLLM runs
(moe_config.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.accounting.expert_parallel import ep_size
from kvledger.accounting.moe_config import MoeConfigChoice, moe_config_choice
from kvledger.accounting.moe_kernel import moe_layer_count
from kvledger.accounting.moe_rows import OGS_RAGGED_VLLM
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import SGLANG_LATEST, parse_sglang_version, sglang_custom_ar_max_bytes
from kvledger.accounting.vllm_custom_ar import custom_ar_max_bytes, tp_group_nodes
from kvledger.accounting.vllm_mxfp4_backend import mxfp4_plan
from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.quant_flag import ONLINE_METHODS, online_scheme

__all__ = ["roofline_model", "roofline_terms", "plan_moe_config", "mxfp4_moe_kernel", "tp_nodes", "tp_span"]


def roofline_model(model: ModelSpec, s: PlanSettings) -> ModelSpec:
    """The model as its steps read it: under vLLM's online ``--quantization fp8`` an unquantized checkpoint's linear
    layers are FP8 (1 B per weight; W8A8 on GPUs with FP8 tensor cores), as the memory plan loads them."""
    if s.quantization in ONLINE_METHODS and model.quant.method == "none":
        return replace(model, quant=online_scheme(s.quantization))
    return model


def plan_moe_config(model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> MoeConfigChoice | None:
    """``moe_config_choice`` for plan settings ``s``: vLLM only (``s.engine_version``, else the latest modelled
    release), on the roofline's model (``roofline_model``); None for other engines and dense models."""
    if s.engine != "vllm" or not model.is_moe:
        return None
    text, m = s.engine_version or LATEST, roofline_model(model, s)
    return moe_config_choice(m, gpu, s.tp, ep_size(model, s), parse_version(text), moe_layer_count(m), text)


def mxfp4_moe_kernel(model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> str:
    """The kernel vLLM ``s.engine_version`` (else the latest modelled) runs MXFP4 experts with, for
    ``moe_rows.expert_kernel``: "marlin" where the release's backend is Marlin (``vllm_mxfp4_backend.mxfp4_plan``:
    release × GPU × ``--mxfp4-backend``; e.g. Hopper before 0.10.2, whose torch 2.7.1 fails ``_should_use_marlin``'s
    2.8 check, and a stock 0.10.2–0.11.x install without triton_kernels); for the Triton backend matmul_ogs' block by
    the release's vendored triton_kernels: "ogs_ragged" in ``moe_rows.OGS_RAGGED_VLLM`` (0.17–0.21), else "ogs";
    "fused" for a FlashInfer backend (priced with fused_moe's block rule); "" for other engines (SGLang's triton_kernel
    runner imports ``triton_kernels.routing``, the 3.4–3.5 API, in 0.5.3 and 0.5.9: the GPU rule) and models."""
    if s.engine != "vllm" or (rm := roofline_model(model, s)).quant.method != "mxfp4":
        return ""
    ver = parse_version(s.engine_version or LATEST)
    mx = mxfp4_plan(rm, gpu.exact_arch, ver, s.mxfp4_backend)
    if mx is None:
        return ""
    if mx[0] == "marlin":
        return "marlin"
    if mx[0] == "triton":
        lo, hi = OGS_RAGGED_VLLM
        return "ogs_ragged" if lo <= ver <= hi else "ogs"
    return "fused"


def _custom_ar_bytes(s: PlanSettings, gpu: GpuSpec) -> int:
    """The engine's custom all-reduce bound, B: vLLM's (vllm_custom_ar.py) or SGLang's (sglang_rules.py); 0 else."""
    if s.engine == "sglang":
        ver = parse_sglang_version(s.engine_version) if s.engine_version else SGLANG_LATEST
        return sglang_custom_ar_max_bytes(ver, s.tp, tp_nodes(gpu, s), gpu,
                                          s.disable_custom_all_reduce)
    return custom_ar_max_bytes(s, gpu)


def tp_nodes(gpu: GpuSpec, s: PlanSettings) -> int:
    """Nodes one TP group spans: ``tp_group_nodes`` over the nodes one DP rank spans (vLLM) or ``--nnodes`` (SGLang),
    and at least the nodes its ranks need where a node of ``gpu`` holds fewer (``node_size.gpus_per_node``: the
    engines whose plans keep ``--nnodes`` as given still run such a group over several nodes)."""
    from kvledger.accounting.node_size import gpus_per_node
    from kvledger.accounting.topology import nodes_within_dp

    nodes = tp_group_nodes(s.tp, s.pp, max(1, nodes_within_dp(s) if s.engine == "vllm" else s.nnodes))
    per = gpus_per_node(gpu)
    return max(nodes, -(-s.tp // per[0])) if per is not None else nodes


def tp_span(gpu: GpuSpec, s: PlanSettings):
    """The TP all-reduce's link across nodes for settings ``s`` (``tp_network.SpanningLink``), None within a node."""
    from kvledger.accounting.tp_network import allreduce_terms

    return allreduce_terms(gpu, s.tp, tp_nodes(gpu, s), s.allreduce_link_share, 0.0, s.inter_node_link_bytes_per_s)[2]


def roofline_terms(model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> dict[str, Any]:
    """``RooflineStepCost`` keyword arguments from plan settings ``s`` for ``model`` on ``gpu``."""
    return {"flops_fraction": s.achievable_flops_fraction, "bandwidth_fraction": s.achievable_bandwidth_fraction,
            "weights_bytes": s.weights_bytes, "custom_allreduce_max_bytes": _custom_ar_bytes(s, gpu),
            "allreduce_link_share": s.allreduce_link_share, "ep": ep_size(model, s),
            "moe_config": plan_moe_config(model, gpu, s), "tp_nodes": tp_nodes(gpu, s),
            "inter_node_link_bytes_per_s": s.inter_node_link_bytes_per_s, "mxfp4_moe": mxfp4_moe_kernel(model, gpu, s)}
