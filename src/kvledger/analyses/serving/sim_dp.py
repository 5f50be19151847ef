"""``kvledger simulate --data-parallel-size N --enable-expert-parallel`` for a MoE model under vLLM: the checks, the
lock-step step cost (``accounting/dp_lockstep_cost.py``) around one rank's roofline, the balancing rule of the release
(``dynamics/dp_lockstep.py``), its note, and the run's data-parallel figures (KV per rank and in all, requests each
rank was sent, KV usage per rank)."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["DP_FROM", "check_dp_request", "lockstep_cost", "lockstep_with_note", "dp_note", "dp_figures"]

DP_FROM = (0, 19, 0)
"""The first vLLM release whose DP engine loop and balancing rule were read (0.19.0; also 0.26.0, 0.27.0, 0.33.0)."""


def check_dp_request(a: Any) -> None:
    """Refuse what the lock-step simulation does not model, before any planning.

    Raises:
        InputError: SGLang's policy without --enable-dp-attention (or it off SGLang), several replicas or a router, a
            step cost other than the roofline.
    """
    dp, sg = a.data_parallel_size, getattr(a, "enable_dp_attention", None)
    if (a.policy == "sglang") != bool(sg):
        from kvledger.accounting.attn_dp import dp_attention_words
        from kvledger.analyses.serving.sim_sglang_dp import WORKS

        raise InputError(f"--dp-size {dp} without --enable-dp-attention: SGLang runs {dp} whole replicas of TP "
                         f"{a.tp} ({dp * a.tp} GPUs, as `kvledger plan` says), simulated as --replicas {dp} (drop "
                         f"--dp-size), or give {dp_attention_words(dp, a.engine_version)} for DP attention; {WORKS}"
                         if not sg else
                         f"--enable-dp-attention is SGLang's: give --engine sglang; {WORKS}")
    if a.replicas > 1 or a.router != "round_robin":
        raise InputError(f"--data-parallel-size {dp} with --replicas/--router: the simulation models one vLLM "
                         "deployment of DP ranks behind vLLM's own load balancer, not several behind a router; "
                         "drop --replicas and --router")
    if a.step_cost != "roofline":
        raise InputError(f"--data-parallel-size {dp} with --step-cost {a.step_cost}: the ranks' lock-step steps are "
                         "priced by the roofline (its MoE term over every rank's tokens); measured step tables price "
                         "one TP group's steps alone: drop --step-cost")


def _refuse_dense(plan: Any, dp: int) -> None:
    if plan.model.is_moe:
        return
    tp = plan.settings.tp
    raise InputError(f"--data-parallel-size {dp} for the dense model {plan.model.name}: vLLM runs its DP ranks as "
                     f"{dp} independent engine cores (they step together only for a MoE model: v1/engine/core.py "
                     "DPEngineCoreProc asserts is_moe), which the lock-step simulation does not model; simulate "
                     f"them as independent replicas: --replicas {dp} --tp {tp} (each its own KV pool, a router in "
                     "front)")


def lockstep_cost(plan: Any, config: Any, cost: Any) -> Any:
    """The lock-step step cost of ``plan``'s DP ranks around one rank's roofline ``cost``, its ``balancing_rule``
    (``dp_lockstep.balancer_rule``) set from the plan's vLLM release.

    Raises:
        InputError: a dense model, a release before 0.19.0, a model without fused-MoE layers, a cost other than the
            roofline (a GPU profile's roofline is one).
    """
    from kvledger.accounting.dp_lockstep_cost import LockstepStepCost
    from kvledger.accounting.vllm_rules import LATEST, parse_version
    from kvledger.dynamics.dp_lockstep import balancer_rule

    s = plan.settings
    dp = s.data_parallel_size
    if s.engine == "sglang":  # SGLang's DP attention (sim_sglang_dp.py)
        from kvledger.analyses.serving.sim_sglang_dp import sglang_dp_cost

        return sglang_dp_cost(plan)
    _refuse_dense(plan, dp)
    ver = parse_version(s.engine_version or LATEST)
    if ver < DP_FROM:
        raise InputError(f"--data-parallel-size {dp} with --engine-version {s.engine_version}: the DP engine loop and "
                         "balancing rule were read from vLLM 0.19.0 on; simulate a release from 0.19.0")
    if not (hasattr(cost, "costs") and getattr(cost, "moe_layers", 0) > 0):
        raise InputError(f"--data-parallel-size {dp}: {plan.model.name} has no fused-MoE layers the roofline prices "
                         "over every rank's tokens; the lock-step simulation needs them")
    capture = None if s.enforce_eager else min(2 * config.max_num_seqs, 512)
    from kvledger.accounting.node_size import dp_nnodes

    nodes = max(s.nnodes, dp_nnodes(plan.gpu, s.tp, dp))  # the DP × TP GPUs' nodes: the collectives' ring across them
    out = LockstepStepCost(cost, dp, capture, nodes, s.inter_node_link_bytes_per_s)
    out.balancing_rule = balancer_rule(ver)
    out.version = ".".join(map(str, ver))
    return out


def lockstep_with_note(plan: Any, config: Any, cost: Any, notes: list[str]) -> Any:
    """``lockstep_cost``, its note (``dp_note``) appended to ``notes``: vLLM's DP ranks of a MoE model or SGLang's DP
    attention (sim_sglang_dp.py)."""
    cost = lockstep_cost(plan, config, cost)
    notes.append(dp_note(plan, cost))
    return cost


def dp_note(plan: Any, cost: Any) -> str:
    """The note that says what the run models and where each rule comes from."""
    s, dp = plan.settings, cost.dp
    if s.engine == "sglang":
        from kvledger.analyses.serving.sim_sglang_dp import sglang_dp_note

        return sglang_dp_note(plan, cost)
    per_rank = plan.memory.num_gpu_blocks * plan.memory.block_size
    pad = ("up to max_cudagraph_capture_size " f"{cost.capture_size:,} (vLLM's default, min(2 × max_num_seqs, 512))"
           if cost.capture_size else "none: --enforce-eager runs no CUDA graphs")
    return (f"data parallel: --data-parallel-size {dp} --enable-expert-parallel simulated as {dp} DP ranks in "
            f"lock-step on {dp * s.tp} GPUs (vLLM {cost.version} v1/engine/core.py DPEngineCoreProc.run_busy_loop: "
            "every rank runs a forward each step while any has work, an idle rank a one-token dummy batch, so each "
            "step lasts as long as the slowest rank's), each rank its own scheduler and KV pool of "
            f"{per_rank:,} tokens (the plan's, {dp} × {per_rank:,} = {dp * per_rank:,} in all); requests routed by "
            f"vLLM {cost.balancing_rule}'s DPLBAsyncMPClient rule (v1/engine/core_client.py, one API server, the DP "
            "coordinator's counts refreshed every 100 ms, coordinator.py); a rank's step: its own attention and "
            f"dense layers, the MoE layers over every rank's tokens at EP {dp * s.tp} priced as the default "
            "allgather_reducescatter all-to-all (an all-gather and a reduce-scatter of the other ranks' hidden "
            f"states per MoE layer{_span_words(cost)}; {_latency_words(cost)}), DP padding {pad}; not modelled: "
            "several API servers, the "
            "CUDA-graph sizes' rounding, another all2all backend's kernels and buffers (the all2all note); the error "
            "bands come from measured runs without data parallelism (none with it)")


def _latency_words(cost: Any) -> str:
    """The gathers' bytes and per-call latency in words: the other ranks' tokens' 16-bit hidden states over the link,
    plus NCCL's ring all-gather latency where the ranks send equal counts, the grouped ring broadcasts of vLLM's
    all_gatherv otherwise (``dp_lockstep_cost.py``)."""
    h = cost.hidden_size
    return (f"each call moves the other ranks' tokens × {h:,} hidden × 2 B = {2 * h:,} B a token (16-bit hidden "
            f"states; the top-k ids and weights not counted) at {cost.link_Bps / 1e9:,.4g} GB/s "
            f"(dp_lockstep_cost.gather_s), plus {cost.gather_latency_s * 1e6:,.4g} µs where the ranks send equal "
            "counts (NCCL's ring all-gather, n − 1 steps against an all-reduce's 2(n − 1): the all-reduce's fitted "
            f"latency less the steps it does not take, tp_network.gather_latency_s), else "
            f"{cost.gatherv_latency_s * 1e6:,.4g} µs (vLLM's all_gatherv / reduce_scatterv, pynccl.py: one NCCL group "
            "of ring broadcasts / reduces, priced as one ring broadcast, the all-reduce's fitted latency less its "
            "2(n − 1) steps plus one, tp_network.grouped_broadcast_latency_s)")


def _span_words(cost: Any) -> str:
    """", " + the DP group's collectives across nodes (``tp_network.SpanningLink.words``), or "" within one node."""
    return f", {cost.span.words()}" if cost.span is not None else ""


def dp_figures(setup: Any, result: Any, growths: list[Any] | None = None, **run_read: bool) -> dict[str, Any] | None:
    """The run's data-parallel figures for the document; None without data parallelism. ``growths``: each rank's
    queue growth in an open loop (``dp_saturation.rank_growths``), which adds the ranks judged saturated; ``run_read``:
    the run's own read, ``too_short`` and ``run_grew`` (``dp_saturation.saturation_figures``)."""
    dp = result.extra.get("data_parallel")
    if dp is None:
        return None
    mem = setup.plan.memory
    per_rank = mem.num_gpu_blocks * mem.block_size
    from kvledger.analyses.serving.dp_saturation import saturation_figures
    from kvledger.analyses.serving.sim_sglang_dp import sglang_dp_figures

    usage = result.summary.kv_usage.get("per_replica", [result.summary.kv_usage])
    src = (sglang_dp_figures(dp) if setup.plan.settings.engine == "sglang" else
           {"rule_source": f"vLLM {setup.cost.version} v1/engine/core.py DPEngineCoreProc (lock-step), "
                           f"v1/engine/core_client.py DPLBAsyncMPClient (routing, {dp['balancing_rule']})"})
    gpus = dp["data_parallel_size"] * (1 if setup.plan.settings.engine == "sglang" else setup.tp)
    return {**dp, "ranks_in_lockstep": True, "gpus": gpus,
            "kv_tokens_per_rank": per_rank, "kv_tokens_total": per_rank * dp["data_parallel_size"],
            "kv_usage_mean_per_rank": [u["mean"] for u in usage], **src,
            **(saturation_figures(growths, **run_read) if growths is not None else {})}
