"""The engine defaults a plan resolved where no flag was given, each with its value and where it came from: the plan
JSON's ``resolved_from`` (and ``settings.enable_prefix_caching``), so a script comparing two releases reads what each
applied (Qwen3-Next-80B: prefix caching off in vLLM 0.19, on in 0.33) instead of the ``null`` the user typed.

Rules, each from vLLM's code for the release (0.19 and 0.33 read):

- ``gpu_memory_utilization``: ``config/cache.py::CacheConfig`` (vllm_rules.default_gpu_memory_utilization).
- ``max_num_batched_tokens`` / ``max_num_seqs``: ``engine/arg_utils.py::EngineArgs.get_batch_defaults`` (the plan's
  values, vllm_rules.default_batch_limits).
- ``enable_prefix_caching``: ``EngineArgs`` sets it to ``ModelConfig.is_prefix_caching_supported`` when not given:
  a generative decoder model on, a hybrid model off in 0.19 and on from 0.26 (0.33: "Generative hybrid models support
  prefix caching"), an attention-free model off (vllm_rules.mamba_cache_rule); ``mamba_cache_mode`` follows it.
- ``model_runner``: ``config/vllm.py::use_v2_model_runner`` (vllm_runner.model_runner).
- ``async_scheduling``: ``SchedulerConfig.async_scheduling`` None, turned on by ``VllmConfig.__post_init__`` from
  0.14 (read in 0.14.0, 0.19.0 and 0.33.0); 0.33 turns it off for the V1 runner under PP ("pipeline parallelism").
  A speculative method or an executor without async support that turns it off is not modelled here.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting import vllm_rules as R
from kvledger.accounting.vllm_block_choice import mamba_rule
from kvledger.accounting.vllm_runner import model_runner

__all__ = ["ASYNC_DEFAULT_FROM", "resolved_from", "resolved_prefix_caching"]

ASYNC_DEFAULT_FROM = (0, 14, 0)
"""First vLLM release scheduling asynchronously by default (``VllmConfig.__post_init__``, read in 0.11.0–0.14.0)."""


def resolved_prefix_caching(plan: Any) -> tuple[bool, str] | None:
    """(prefix caching on, why) for a vLLM plan, as given or as the release's default; None for another engine."""
    s = plan.settings
    if plan.memory.engine != "vllm":
        return None
    if s.enable_prefix_caching is not None:
        return s.enable_prefix_caching, "given"
    ver = R.parse_version(s.engine_version or R.LATEST)
    rule = mamba_rule(plan.model, s, ver, plan.gpu.arch)
    if rule is not None:  # "prefix caching on by default for hybrid models in vLLM 0.33.0 (…)": its first clause
        return rule.enable_prefix_caching, rule.source.split(": mamba_cache_mode")[0]
    return True, (f"prefix caching on by default for generative decoder models in vLLM {'.'.join(map(str, ver))} "
                  "(ModelConfig.is_prefix_caching_supported, set by EngineArgs when not given)")


def _async(plan: Any, ver: tuple[int, int, int], v2: bool) -> tuple[bool, str]:
    """Async scheduling as vLLM ``ver`` resolves it at these settings (module docstring)."""
    vtxt = ".".join(map(str, ver))
    if ver < ASYNC_DEFAULT_FROM:
        return False, f"vLLM {vtxt}: off unless --async-scheduling (on by default from 0.14)"
    if ver >= (0, 33, 0) and plan.settings.pp > 1 and not v2:
        return False, (f"vLLM {vtxt}: off for the V1 model runner under pipeline parallelism "
                       "(config/vllm.py::VllmConfig.__post_init__)")
    return True, f"vLLM {vtxt}: on by default from 0.14 (config/vllm.py::VllmConfig.__post_init__)"


def resolved_from(plan: Any) -> dict[str, dict[str, Any]]:
    """Each default the plan resolved (no flag given for it): ``{"value": …, "source": …}`` by vLLM's setting name;
    only the memory fraction for SGLang and TensorRT-LLM (their other defaults are in ``settings``)."""
    s, g, m = plan.settings, plan.given or plan.settings, plan.memory
    out: dict[str, dict[str, Any]] = {}
    if m.engine != "vllm" and m.fraction_name and getattr(g, m.fraction_name, None) is None:
        said = next((n for n in m.notes if n.startswith(f"{m.fraction_name} ")), f"{m.engine}'s default")
        out[m.fraction_name] = {"value": m.fraction, "source": m.requested_source or said}
    if m.engine != "vllm":
        return out
    ver = R.parse_version(s.engine_version or R.LATEST)
    vtxt = ".".join(map(str, ver))
    if g.gpu_memory_utilization is None:
        out["gpu_memory_utilization"] = dict(zip(("value", "source"), R.default_gpu_memory_utilization(ver)))
    for name in ("max_num_batched_tokens", "max_num_seqs"):
        if getattr(g, name) is None:
            out[name] = {"value": getattr(m, name), "source": f"vLLM {vtxt} EngineArgs.get_batch_defaults "
                                                              f"(engine/arg_utils.py) for {plan.gpu.name}"}
    if g.max_num_seqs is None and g.max_num_batched_tokens is not None and ver >= (0, 11, 0):
        out["max_num_seqs"]["source"] = (f"vLLM {vtxt}: min(the default, the given --max-num-batched-tokens) "
                                         "(engine/arg_utils.py, max_num_seqs not given)")
    pc = resolved_prefix_caching(plan)
    if pc is not None and s.enable_prefix_caching is None:
        out["enable_prefix_caching"] = {"value": pc[0], "source": pc[1]}
    rule = mamba_rule(plan.model, s, ver, plan.gpu.arch)
    if rule is not None:
        out["mamba_cache_mode"] = {"value": rule.mode, "source": rule.source}
    runner = model_runner(plan.model, ver, s.model_runner, plan.gpu.gpu_id.startswith("amd_"), bool(s.quantization))
    if s.model_runner == "auto":
        out["model_runner"] = {"value": "v2" if runner.v2 else "v1", "source": runner.why}
    on, why = _async(plan, ver, runner.v2)
    out["async_scheduling"] = {"value": on, "source": why}
    return out
