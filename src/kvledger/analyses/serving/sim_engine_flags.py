"""The flags of the other engine's memory plan a simulation refuses (``plan``'s rule, in ``simulate``'s words): its
policy picks the plan that sizes the KV pool (SGLang's for ``--policy sglang``, vLLM's otherwise, ``sim_setup``), and a
fraction or block count of the other engine's would be ignored. An unknown --engine/--policy is refused here, before
any plan: a typo (``sglnag``) was planned as vLLM's pool and answered "the model does not fit" at --tp 1."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.from_plan import POLICY_PRESETS
from kvledger.errors import InputError, UnknownNameError

__all__ = ["check_engine_flags"]


def check_engine_flags(a: Any, engine: str) -> None:
    """Refuse a flag of the other engine's memory plan, which would be ignored (``plan``'s rule, in simulate's words).

    Raises:
        InputError: --mem-fraction-static without --policy sglang; --gpu-memory-utilization or
            --num-gpu-blocks-override with it (--engine-version then names the SGLang release, sglang_rules.py).
        UnknownNameError: an --engine/--policy not in ``POLICY_PRESETS``.
    """
    if a.policy is not None and a.policy not in POLICY_PRESETS:
        raise UnknownNameError("--engine/--policy", a.policy, POLICY_PRESETS, hint="Known: vllm, sglang (the engines); "
                               "static, contiguous (vLLM with static batching or contiguous KV, kvledger's presets).")
    if engine != "sglang":
        if a.mem_fraction_static is not None:
            raise InputError("--mem-fraction-static is SGLang's memory fraction and applies only with --policy sglang "
                             "(whose pool comes from SGLang's memory plan); other policies size the pool by vLLM's "
                             "plan: use --gpu-memory-utilization, or add --policy sglang")
        return
    vllm_only = [(a.gpu_memory_utilization, "--gpu-memory-utilization is vLLM's memory fraction",
                  "use --mem-fraction-static (SGLang's), or another policy"),
                 (a.num_gpu_blocks_override, "--num-gpu-blocks-override is vLLM's block count",
                  "size SGLang's pool with --mem-fraction-static (its --max-total-tokens is not modelled), or use "
                  "another policy")]
    for value, what, fix in vllm_only:
        if value is not None:
            raise InputError(f"{what}; with --policy sglang the KV pool comes from SGLang's memory plan (`kvledger "
                             f"plan --engine sglang`), so it would be ignored: {fix}")
