"""``kvledger simulate --engine sglang --tp N --ep-size N --attn-dp-size N`` for a MoE model: SGLang
0.5.23's DP attention simulated as N DP ranks in lock-step (``dynamics/dp_lockstep.py``, the loop vLLM's DP ranks run:
SGLang's idle ranks run an IDLE batch while any rank has tokens, ``accounting/sglang_dp_cost.py``), routed round
robin (``dp_lockstep.RoundRobinBalancer``), each rank its own scheduler and KV pool as ``kvledger plan`` sizes them
(``accounting/dp_attention.py``), the MoE layers priced at EP N with backend none's gathers or DeepEP's all-to-all."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.accounting.attn_dp import dp_attention_words
from kvledger.errors import InputError

__all__ = ["WORKS", "check_sglang_dp", "sglang_dp_cost", "sglang_dp_note"]

WORKS = ("simulate takes SGLang's DP attention as --engine sglang --tp N --ep-size N --attn-dp-size "
         "N (attention TP 1, one node, a MoE model; --moe-a2a-backend none or deepep)")
"""What is simulated, for the refusals."""


def check_sglang_dp(plan: Any) -> None:
    """Refuse the DP-attention layouts the lock-step simulation does not model (exit 2 at the CLI).

    Raises:
        InputError: DP below TP (attention TP > 1), EP other than TP, a dense model, ranks over one node.
    """
    s = plan.settings
    dp, tp = s.data_parallel_size or 1, s.tp
    from kvledger.accounting.node_size import dp_nnodes
    from kvledger.accounting.sglang_ep import sglang_ep_size

    why = ("an attention DP size below --tp (attention TP > 1: the gather's reduce-scatter in the attention-TP group)"
           if dp != tp else f"{plan.model.name} is dense (no MoE layers)" if not plan.model.is_moe
           else f"--ep-size {s.ep_size or 1} (experts sliced within EP groups)" if sglang_ep_size(plan.model, s) != tp
           else f"{tp} GPUs over more than one node" if max(s.nnodes, dp_nnodes(plan.gpu, 1, tp)) > 1 else "")
    if why:
        flags = dp_attention_words(dp, s.engine_version)  # the release's spelling (attn_dp.py)
        raise InputError(f"{flags} --tp {tp}: {why} is not simulated; {WORKS}")


def _rank_cost(plan: Any) -> Any:
    """One DP rank's roofline: the plan's settings at attention TP 1 with the experts at EP ``--tp`` (whole attention
    per rank, ``dp_attention.py``; the busiest GPU's fused-MoE term, ``moe_kernel.py``)."""
    s = plan.settings
    rank = replace(s, tp=1, ep_size=s.tp, moe_a2a_backend=None, enable_dp_attention=None, data_parallel_size=None)
    cost = replace(plan, settings=rank).step_cost(overlap_cpu=True)
    return getattr(cost, "inner", cost)  # the CUDA-graph padding wrapper off: the lock-step cost pads (graph_padded)


def _capture_sizes(plan: Any) -> tuple[int, ...]:
    """The decode CUDA-graph sizes each DP rank captures: the plan's (``sglang_steps.sglang_capture_sizes`` at the
    server's ``--tp``, cut to the rank's request pool); none with ``--disable-cuda-graph`` or for a release whose list
    was not read."""
    from kvledger.accounting.sglang_steps import sglang_capture_sizes

    s = plan.settings
    if getattr(s, "no_cuda_graph", False):
        return ()
    got = sglang_capture_sizes(plan.gpu, s.tp, s.pp, s.engine_version, s.max_num_seqs, plan.memory.max_num_seqs or None)
    return got[0] if got else ()


def sglang_dp_cost(plan: Any) -> Any:
    """The lock-step step cost of ``plan``'s DP-attention ranks (``SglangDpStepCost``), its ``balancing_rule``
    "sglang round_robin" (``dp_lockstep.make_balancer``).

    Raises:
        InputError: what ``check_sglang_dp`` refuses.
    """
    from kvledger.accounting.sglang_dp_cost import SglangDpStepCost
    from kvledger.accounting.sglang_ep import sglang_a2a
    from kvledger.accounting.sglang_rules import (
        SGLANG_CA_V2_FROM,
        SGLANG_LATEST,
        parse_sglang_version,
        sglang_custom_ar_max_bytes,
    )

    check_sglang_dp(plan)
    s = plan.settings
    ver = parse_sglang_version(s.engine_version) if s.engine_version else SGLANG_LATEST
    # SUM_LEN's decode rule asks for the v2 kernel (isinstance(comm, CustomAllReduceV2)): CUDA, NVLink all-to-all
    v2 = ver >= SGLANG_CA_V2_FROM and plan.gpu.nvlink_all_to_all and not plan.gpu.gpu_id.startswith("amd_")
    ca = sglang_custom_ar_max_bytes(ver, s.tp, 1, plan.gpu, s.disable_custom_all_reduce) if v2 else 0
    out = SglangDpStepCost(_rank_cost(plan), s.tp, sglang_a2a(s), ca, _capture_sizes(plan))
    out.balancing_rule, out.version = "sglang round_robin", "0.5.23"
    return out


def sglang_dp_note(plan: Any, cost: Any) -> str:
    """The note that says what the run models and where each rule comes from."""
    dp, per_rank = cost.dp, plan.memory.num_gpu_blocks * plan.memory.block_size
    h = cost.hidden_size
    moe = ("--moe-a2a-backend none: every MLP layer's input gathered from all ranks and its output scattered back, "
           "per step SGLang's DpPaddingMode (SUM_LEN: two all-reduces of the summed rows at "
           f"{cost.call_latency_s * 1e6:,.4g} µs a call; MAX_LEN: an all-gather and a reduce-scatter of the rows "
           f"padded to the largest rank at {cost.gather_latency_s * 1e6:,.4g} µs a call; layers/dp_attention.py)"
           if cost.backend == "none" else
           f"--moe-a2a-backend deepep: the {cost.dense_layers} dense MLP layers gathered as under none, each of the "
           f"{cost.moe_layers} MoE layers a dispatch and a combine of the busier of a rank's sent and received "
           f"token-experts, uniform routing, at {cost.gather_latency_s * 1e6:,.4g} µs a call (NCCL's ring "
           "all-gather latency as a stand-in: DeepEP's kernel latency not fitted)")
    flags = dp_attention_words(dp, plan.settings.engine_version)  # the release's spelling (attn_dp.py)
    return (f"data parallel: {flags} simulated as {dp} DP ranks in lock-step on "
            f"{dp} GPUs (SGLang 0.5.23 managers/scheduler_components/dp_attn.py prepare_mlp_sync_batch_raw: while "
            "any rank has tokens an idle rank runs a 0-token IDLE batch, so each step lasts as long as the slowest "
            f"rank's), each rank its own scheduler and KV pool of {per_rank:,} tokens (the plan's, {dp} × "
            f"{per_rank:,} = {dp * per_rank:,} in all); requests routed round robin (data_parallel_controller.py "
            "round_robin_scheduler, --load-balance-method auto's choice); a rank's step: its own attention at "
            f"attention TP 1 and the MoE layers at EP {dp} over the gathered rows, {moe}; each row {h:,} hidden × "
            f"2 B over {cost.link_Bps / 1e9:,.4g} GB/s (sglang_dp_cost.py); {_graph_words(cost)}; not modelled: "
            "DeepEP's low-latency and FP8 modes, the dense MLP and LM head's TP split over gathered tokens, "
            "two-batch overlap, other load-balance methods; the error bands come from runs without data parallelism")


def _graph_words(cost: Any) -> str:
    """How the decode CUDA graphs are priced on the DP path (``SglangDpStepCost.graph_padded``), in words."""
    sizes = cost.capture_sizes
    if not sizes:
        return "decode steps eager, unpadded (no decode CUDA-graph sizes: graphs off or the release's list not read)"
    return ("a decode step with no rank prefilling runs every rank, an idle one too, at the captured CUDA-graph size "
            "≥ the largest rank's requests (model_executor/runner/decode_cuda_graph_runner.py: _pad_to_bucket of "
            f"_max_dp_batch_size; sizes {', '.join(map(str, sizes[:5]))}, … {sizes[-1]}), each padding row 1 KV token; "
            f"above {sizes[-1]} or with a prefill on any rank every rank eager, unpadded")


def sglang_dp_figures(dp: dict[str, Any]) -> dict[str, str]:
    """The rule source of the run's data-parallel figures (``sim_dp.dp_figures``)."""
    return {"rule_source": "SGLang 0.5.23 managers/scheduler_components/dp_attn.py prepare_mlp_sync_batch_raw "
                           "(lock-step), managers/data_parallel_controller.py round_robin_scheduler (routing, "
                           f"{dp['balancing_rule']})"}
