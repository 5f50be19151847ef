"""The Python API's ``plan`` by model and GPU name, through the same functions as its command (``plan_inputs`` and
``build_plan``), so ``to_dict()`` is the command's ``--json`` for the same inputs (``simulate`` and ``goodput``:
``sim_call.py``). Arguments are checked against their annotations first (``argtypes.checked``); an error names the
parameters, not the flags."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from kvledger.api.results import PlanResult, check_ranges, in_python_terms, python_document
from kvledger.argtypes import checked

__all__ = ["plan"]


@checked
def plan(model: str, gpu: str, *, engine: str = "vllm", engine_version: str | None = None, tp: int = 1, pp: int = 1,
         max_model_len: int | str | None = None, contexts: Sequence[int | str] | None = None,
         gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
         kv_cache_dtype: str = "auto", quantization: str | None = None, max_num_batched_tokens: int | str | None = None,
         max_num_seqs: int | None = None, block_size: int | None = None, enable_prefix_caching: bool | None = None,
         gpu_profile: str | None = None, enable_expert_parallel: bool = False, data_parallel_size: int | None = None,
         enable_dp_attention: bool = False, all2all_backend: str | None = None, nnodes: int = 1,
         inter_node_link: str | None = None, kv_offloading_size: float | str | None = None, ep_size: int | None = None,
         kv_offloading_backend: str | None = None, enable_hierarchical_cache: bool | None = None,
         hicache_ratio: float | None = None, hicache_size: int | None = None, hicache_write_policy: str | None = None,
         kv_tier_nvme: float | str | None = None, nvme_read_bandwidth: float | None = None,
         kv_tier_remote: float | str | None = None, network_bandwidth: float | None = None, link_fraction: float = 0.8,
         moe_a2a_backend: str | None = None, attn_dp_size: int | None = None, suffix_tokens: int = 1) -> PlanResult:
    """The KV-cache ledger, as ``kvledger plan MODEL --gpu GPU`` computes it.

    Args:
        model: a bundled model (HF id or alias), a config.json path or a Hub id. gpu: a catalog GPU name or a GPU file.
        engine: "vllm", "sglang" or "trtllm"; the others are the engines' own settings by their flag names
            (``contexts``: the context lengths to report concurrency at, tokens: 8192 or "8K"); the parallel layouts
            as the command's flags: ``enable_expert_parallel``, ``data_parallel_size`` (vLLM's DP ranks of a MoE
            model, or SGLang's with ``enable_dp_attention``), ``all2all_backend``, ``nnodes``, ``inter_node_link``,
            SGLang's ``ep_size``, ``moe_a2a_backend``; the KV tiers below HBM as the tier flags (``kv_offloading_size``
            in GiB, a number or "256GiB", ``kv_offloading_backend``, SGLang's ``enable_hierarchical_cache`` and
            ``hicache_*``, ``kv_tier_nvme``, ``kv_tier_remote`` and their bandwidths, ``link_fraction``,
            ``suffix_tokens``): ``.kv_tiers`` and the document's ``kv_tiers``, as ``plan --json`` with those flags.

    Returns:
        PlanResult: ``.plan`` (the Plan: ``kv``, ``memory``, ``concurrency``, ``row_at(ctx)``), ``.fits``, ``.advice``
        and ``.to_dict()``, equal to ``kvledger plan … --json``.

    Raises:
        InputError, UnknownNameError, ConfigError: a wrong type, an unknown name, impossible settings.
    """
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.plans import plan_document
    from kvledger.cli.plan_flags import PlanFlags, PlanMoreFlags, plan_inputs
    from kvledger.cli.plan_tiers import plan_tier_plan, plan_tier_settings
    from kvledger.errors import InputError

    if contexts is not None and not contexts:  # as the command refuses --context ''
        raise InputError("kvledger.plan: contexts is empty; give one context length or more (8192 or \"8K\"), or "
                         "leave it None for the default contexts")
    text = {"max_model_len": max_model_len, "max_num_batched_tokens": max_num_batched_tokens}
    flags = PlanFlags(engine=engine, engine_version=engine_version, tp=tp, pp=pp, moe_a2a_backend=moe_a2a_backend,
                      context=[str(c) for c in contexts] if contexts is not None else None, attn_dp_size=attn_dp_size,
                      gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
                      kv_cache_dtype=kv_cache_dtype, quantization=quantization, max_num_seqs=max_num_seqs,
                      block_size=block_size, enable_prefix_caching=enable_prefix_caching, gpu_profile=gpu_profile,
                      enable_expert_parallel=enable_expert_parallel, data_parallel_size=data_parallel_size,
                      enable_dp_attention=enable_dp_attention, all2all_backend=all2all_backend, ep_size=ep_size,
                      **{k: None if v is None else str(v) for k, v in text.items()})
    with in_python_terms("plan", _PLAN_PARAMS):
        check_ranges("plan", {k: v for k, v in locals().items() if k in _PLAN_PARAMS})
        more = PlanMoreFlags(nnodes=nnodes, inter_node_link=inter_node_link, link_fraction=link_fraction,
                             suffix_tokens=suffix_tokens)
        spec, g, settings, prof = plan_inputs(model, gpu, flags, more)
        settings_t, settings = plan_tier_settings(tiers := _tier_flags(locals()), more, g, settings)
        p = build_plan(spec, g, settings)
        doc, tier_plan = plan_document(p, prof, False), plan_tier_plan(p, tiers, settings_t, flags, more)
    return _result(p, doc, tier_plan)


def _result(p: object, doc: dict, tier_plan: object) -> PlanResult:
    """The call's result: ``plan --json``'s document with its notes naming the call's parameters, not the flags
    (``results.python_document``), and the tier plan's own ``to_dict()`` as its ``kv_tiers``."""
    doc = python_document(doc, _PLAN_PARAMS)
    return PlanResult(p, doc | ({"kv_tiers": tier_plan.to_dict()} if tier_plan is not None else {}), tier_plan)


def _tier_flags(values: dict) -> object:
    """The command's tier flag group from the call's parameters (a size as its text: 256 or "256GiB")."""
    import dataclasses

    from kvledger.cli.flag_groups import TierFlags

    sizes = ("kv_offloading_size", "kv_tier_nvme", "kv_tier_remote")
    return TierFlags(**{f.name: (str(values[f.name]) if f.name in sizes and values[f.name] is not None
                                 else values[f.name]) for f in dataclasses.fields(TierFlags) if f.name in values})


_PLAN_PARAMS = frozenset(inspect.signature(plan).parameters)
