"""A data-parallel plan's figures across its DP ranks (KV tokens per rank and in all, requests per rank and in all at
each context), and the computed DP-attention remedy for an MLA model whose latent KV is copied on every TP rank.

Each DP rank has its own KV pool and scheduler, and a request is routed to one rank (SGLang's
``managers/data_parallel_controller.py``, vLLM's DP coordinator), so one request never spans two ranks' pools: the
totals are the ranks' figures times the rank count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kvledger.accounting.dp_attention import SGLANG_DP_ATTENTION_ARCHS, attention_tp, dp_gpus, dp_size, dp_words
from kvledger.accounting.vllm_all2all import all2all_rows, settings_choice
from kvledger.accounting.vllm_dp_moe import DP_MOE_RULE
from kvledger.catalog.layers import MLAAttention
from kvledger.errors import InputError
from kvledger.jsonable import json_fields

__all__ = ["RankRequests", "DataParallelFacts", "data_parallel_facts", "dp_remedy", "dp_hint"]


@dataclass(frozen=True)
class RankRequests:
    """Requests of one context held at once: on one DP rank and on all of them, count."""

    context_tokens: int
    per_rank: int
    total: int


@json_fields(rename={"ranks": "data_parallel_size", "rule": "rule_source"})  # simulate's names (sim_dp.py), vLLM's flag
@dataclass(frozen=True)
class DataParallelFacts:
    """A data-parallel plan across its ranks; its JSON writes ``ranks`` as ``data_parallel_size`` (vLLM's flag) and
    ``rule`` as ``rule_source``, the names ``simulate --json`` gives the same facts.

    Attributes:
        flags: the engine's own flags for it. ranks: DP ranks, count. gpus: GPUs of the deployment, count.
        attention_tp: the TP size each rank's attention and KV are split over.
        kv_tokens_per_rank: one rank's KV pool, tokens. kv_tokens_total: all ranks' pools, tokens.
        requests: per context, the whole requests one rank and all ranks hold (KV limit and max_num_seqs).
        rule: the engine rule (version) the split follows.
        moe_profile_tokens: the rows each GPU's MoE layers run in vLLM's profile forward under DP + EP, DP ×
            max_num_batched_tokens (vllm_dp_moe.py), which size its fused-MoE workspace; None otherwise.
    """

    flags: str
    ranks: int
    gpus: int
    attention_tp: int
    kv_tokens_per_rank: int
    kv_tokens_total: int
    requests: tuple[RankRequests, ...]
    rule: str
    moe_profile_tokens: int | None = None
    __json_optional__ = ("moe_profile_tokens",)  # left out off vLLM's DP + EP


def data_parallel_facts(s, mem, rows) -> DataParallelFacts | None:
    """The DP figures of settings ``s``, memory plan ``mem`` and its concurrency rows (build_plan adds the max_model_len
    row where --context leaves it out, so the verdict states that total); None at DP 1."""
    dp = dp_size(s)
    if dp == 1:
        return None
    per_rank = mem.num_gpu_blocks * mem.block_size
    if s.engine == "sglang":
        rule = ("SGLang 0.5.23: attn_tp_size = tp / dp_size per DP rank (layers/dp_attention.py), each rank its own "
                "scheduler and KV pool")
    else:
        rule = (f"vLLM {mem.engine_version.split()[0]}: one engine core and KV pool per DP rank, attention at TP "
                f"{s.tp}" + (f", experts whole over EP {dp * s.tp} (fused_moe/config.py)" if s.enable_expert_parallel
                             else ", independent replicas of a dense model"))
    reqs = tuple(RankRequests(r.context_tokens, r.max_running, r.max_running * dp)
                 for r in rows if r.within_max_model_len)
    moe = None
    if s.engine == "vllm" and s.enable_expert_parallel:  # the rows as the all2all backend moves them (vllm_all2all)
        a2a, t = settings_choice(mem.engine_version, s.all2all_backend), mem.max_num_batched_tokens
        moe = all2all_rows(a2a, t, dp)
        how = "DP × max_num_batched_tokens" if moe == dp * t else "DP × min(max_num_batched_tokens, 256)"
        words = a2a.words if a2a.given or a2a.backend != "allgather_reducescatter" else DP_MOE_RULE
        rule += f"; the profile run's MoE layers over {how} = {moe:,} rows ({words})"
    return DataParallelFacts(dp_words(s), dp, dp_gpus(s), attention_tp(s), per_rank, per_rank * dp, reqs, rule, moe)


def _dp_settings(model, s):
    """The DP-attention settings on the same GPUs as TP ``s.tp``, or None where no engine rule gives one."""
    if s.engine == "sglang" and SGLANG_DP_ATTENTION_ARCHS.intersection(model.architectures):
        return replace(s, data_parallel_size=s.tp, enable_dp_attention=True)
    if s.engine == "vllm" and model.is_moe:
        return replace(s, tp=1, data_parallel_size=s.tp, enable_expert_parallel=True)
    return None


def _dp_gain(plan, build: Callable[..., Any]):
    """(the DP settings, this plan's KV tokens, one DP rank's, all ranks', the rules' words) for an MLA model at
    TP > 1 without data parallelism, computed by ``build`` (``build_plan``); None where it does not apply, fails or
    does not fit."""
    s, mem = plan.settings, plan.memory
    mla = any(isinstance(layer, MLAAttention) for layer in plan.model.layers)
    if not mla or s.tp <= 1 or s.pp > 1 or dp_size(s) > 1 or not plan.fits or mem.kv_free:
        return None
    alt = _dp_settings(plan.model, s)
    if alt is None:
        return None
    try:
        other = build(plan.model, plan.gpu, alt, with_roofline=False, with_advice=False)
    except InputError:
        return None
    if not other.fits:
        return None
    rank = other.memory.num_gpu_blocks * other.memory.block_size
    rules = (f"{'SGLang' if s.engine == 'sglang' else 'vLLM'} {other.memory.engine_version.removesuffix(' rules')} "
             "rules")
    return alt, mem.num_gpu_blocks * mem.block_size, rank, rank * s.tp, rules


def _flags(alt) -> str:
    return dp_words(alt) + (" --tp 1" if alt.tp == 1 else "")


def dp_remedy(plan, build: Callable[..., Any]) -> tuple[str, str] | None:
    """For an MLA model at TP > 1 without data parallelism: what DP attention on the same GPUs would hold, computed by
    ``build`` (``build_plan``) with the engine's DP flags, as (the whole note, its facts in one note of the short plan,
    at most 3 lines at 80 columns); None where it does not apply, fails or does not fit."""
    gain = _dp_gain(plan, build)
    if gain is None:
        return None
    alt, now, rank, total, rules = gain
    tp = plan.settings.tp
    return (f"MLA keeps one latent KV head, copied on each of the {tp} TP ranks: this TP {tp} replica holds "
            f"{now:,} KV tokens on {tp} GPUs; {_flags(alt)} gives each GPU its own pool: {tp} × {rank:,} = {total:,} "
            f"KV tokens on the same {tp} GPUs ({total / now:.2f}×, {rules}, computed by the same plan; `kvledger "
            "plan` with those flags shows it)",
            f"MLA's latent KV is copied on all {tp} TP ranks: {_flags(alt)} holds {total / now:.2f}× the KV tokens "
            f"on these GPUs ({tp} × {rank:,} against {now:,}, {rules})")


def dp_hint(plan, build: Callable[..., Any]) -> str | None:
    """The simulator commands' one line: the KV capacity is TP-replicated, and DP on the same GPUs would hold this many
    times the KV tokens; vLLM's DP ranks of a MoE model (with --enable-expert-parallel) the simulator steps in lock-step
    (``analyses/serving/sim_dp.py``), SGLang's DP attention at EP = TP too (``sim_sglang_dp.py``). None where
    ``dp_remedy`` gives none."""
    gain = _dp_gain(plan, build)
    if gain is None:
        return None
    alt, now, _, total, rules = gain
    how = ("`kvledger simulate` with those flags simulates its DP ranks in lock-step" if plan.settings.engine == "vllm"
           else f"`kvledger simulate` with those flags and --ep-size {plan.settings.tp} simulates its DP ranks in "
           "lock-step")
    return (f"MLA's KV capacity is TP-replicated (one latent head on each of the {plan.settings.tp} TP ranks): "
            f"{_flags(alt)} would hold {total / now:.2f}× the KV tokens on these GPUs ({total:,} against {now:,}, "
            f"{rules}; {how})")
