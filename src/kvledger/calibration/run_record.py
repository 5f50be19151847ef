"""What a measured run's own record says about the engine that served it (LLMServingSim's ``meta.json``), as simulate
flags.

A record names the engine it measured: replaying it under the tool's defaults would be another engine. Read, in order
of trust (the engine's resolved ``VllmConfig`` first, then the launch ``engine_kwargs``, then the ``kv_cache`` block):
tensor/pipeline/data parallel sizes, expert parallelism, KV block count and block size, async scheduling, prefix
caching, chunked prefill, ``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, ``gpu_memory_utilization``,
``kv_cache_dtype`` and the engine version; a benchmark file naming SGLang as its backend (SGLang's bench_serving) is
replayed with the ``sglang`` policy (its scheduler, radix cache and memory plan). ``unmodelled`` names what kvledger
cannot replay as one engine (data parallelism, with or without expert parallelism; pipeline parallelism).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["RecordedSettings", "recorded_settings"]

#: SimRequestArgs field → where the record states it: (resolved_config section, key), then engine_kwargs key
_SOURCES: dict[str, tuple[tuple[str, str] | None, str | None, str | None]] = {
    # field: ((resolved section, key), engine_kwargs key, kv_cache key)
    "tp": (("parallel_config", "tensor_parallel_size"), "tensor_parallel_size", None),
    "max_num_seqs": (("scheduler_config", "max_num_seqs"), "max_num_seqs", None),
    "max_num_batched_tokens": (("scheduler_config", "max_num_batched_tokens"), "max_num_batched_tokens", None),
    "async_scheduling": (("scheduler_config", "async_scheduling"), "async_scheduling", None),
    "enable_chunked_prefill": (("scheduler_config", "enable_chunked_prefill"), "enable_chunked_prefill", None),
    "enable_prefix_caching": (("cache_config", "enable_prefix_caching"), "enable_prefix_caching",
                              "enable_prefix_caching"),
    "block_size": (("cache_config", "block_size"), "block_size", "block_size"),
    "num_gpu_blocks_override": (("cache_config", "num_gpu_blocks"), None, "num_gpu_blocks"),
    "gpu_memory_utilization": (("cache_config", "gpu_memory_utilization"), "gpu_memory_utilization",
                               "gpu_memory_utilization"),
    "max_model_len": (None, "max_model_len", None),
    "kv_cache_dtype": (("cache_config", "cache_dtype"), "kv_cache_dtype", None),
    "batching": (None, "batching", None),  # a Deployment's VLLM_USE_V1=0 (evidence.k8s_manifests): the V0 engine
}
_PARALLEL = {"pp": (("parallel_config", "pipeline_parallel_size"), "pipeline_parallel_size"),
             "dp": (("parallel_config", "data_parallel_size"), "data_parallel_size"),
             "ep": (("parallel_config", "enable_expert_parallel"), "enable_expert_parallel")}


@dataclass
class RecordedSettings:
    """The engine settings a run's record states.

    Attributes:
        flags: SimRequestArgs field → value (only what the record states).
        engine_version: the vLLM version it names, or None.
        pp / dp: pipeline- and data-parallel sizes (1 when not stated). ep: expert parallelism on.
        unmodelled: sentences naming what kvledger cannot replay as one engine (empty when all is modelled).
    """

    flags: dict[str, Any] = field(default_factory=dict)
    engine_version: str | None = None
    pp: int = 1
    dp: int = 1
    ep: bool = False
    unmodelled: list[str] = field(default_factory=list)


def _lookup(extra: dict[str, Any], where: tuple[str, str] | None, kw_key: str | None, kv_key: str | None = None):
    resolved = extra.get("resolved_config") or {}
    if where is not None and isinstance(resolved.get(where[0]), dict) and resolved[where[0]].get(where[1]) is not None:
        return resolved[where[0]][where[1]]
    kwargs = extra.get("engine_kwargs") or {}
    if kw_key is not None and kwargs.get(kw_key) is not None:
        return kwargs[kw_key]
    kv = extra.get("kv_cache") or {}
    if kv_key is not None and kv.get(kv_key) is not None:
        return kv[kv_key]
    return None


def recorded_settings(extra: dict[str, Any]) -> RecordedSettings:
    """The settings in a run's ``metadata.extra`` (the reader keeps ``vllm_version``, ``engine_kwargs``, ``kv_cache``
    and the resolved ``scheduler_config``/``parallel_config``/``cache_config``)."""
    out = RecordedSettings()
    for name, (where, kw_key, kv_key) in _SOURCES.items():
        v = _lookup(extra, where, kw_key, kv_key)
        if v is not None:
            out.flags[name] = v
    if out.flags.get("kv_cache_dtype") == "auto":
        out.flags.pop("kv_cache_dtype")
    if extra.get("backend") == "sglang":  # SGLang's bench_serving names the server it measured
        out.flags["policy"] = "sglang"
    version = extra.get("vllm_version")
    out.engine_version = version if isinstance(version, str) else None
    out.pp = int(_lookup(extra, *_PARALLEL["pp"]) or 1)
    out.dp = int(_lookup(extra, *_PARALLEL["dp"]) or 1)
    out.ep = bool(_lookup(extra, *_PARALLEL["ep"]) or False)
    if out.dp > 1:
        what = f"data parallel {out.dp}" + (" with expert parallelism (experts sharded over the ranks, tokens "
                                            "exchanged all-to-all)" if out.ep else "")
        out.unmodelled.append(f"{what}: {out.dp} engines that share the load, which kvledger would replay as one "
                              "engine on one GPU's share")
    if out.pp > 1:
        out.unmodelled.append(f"pipeline parallel {out.pp}: stages kvledger does not model as one engine")
    return out
