"""What ``simulate`` says of the engine it ran beyond the simulator's own settings: the prefix caching the launch has
when the simulator runs without it (a hybrid layout whose reuse is not modelled, or a workload with no shared
prefix)."""

from __future__ import annotations

from typing import Any

__all__ = ["launch_prefix_caching"]


def launch_prefix_caching(plan: Any, config: dict[str, Any]) -> dict[str, Any]:
    """``{"prefix_caching_at_launch": True}`` when vLLM launches with prefix caching on (given, or its default for the
    model) but the simulation ran it off; ``{}`` otherwise.

    The pool is the plan's, laid out as vLLM lays it out with prefix caching on (for a Mamba hybrid its "align" mode
    sets the block size: Qwen3-Next-80B at TP 4 on H100, 8,184 blocks of 320 tokens, against 9,629 of 272 without),
    so the engine line says the launch's setting and that its reuse was not simulated, rather than "off"; the
    recommended ``vllm serve`` line then needs no --no-enable-prefix-caching to match the simulated pool."""
    if plan is None or config.get("enable_prefix_caching") or plan.memory.engine != "vllm":
        return {}
    if plan.settings.enable_prefix_caching is False:
        return {}
    from kvledger.accounting.vllm_block_choice import mamba_rule
    from kvledger.accounting.vllm_rules import LATEST, parse_version

    rule = mamba_rule(plan.model, plan.settings, parse_version(plan.settings.engine_version or LATEST), plan.gpu.arch)
    on = rule.enable_prefix_caching if rule is not None else plan.layout is not None
    return {"prefix_caching_at_launch": True} if on else {}
