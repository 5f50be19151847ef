"""Validated engine settings for a plan, named as the engines name their flags.

The settings are a frozen dataclass whose values are checked as they are made. A value of the exact type its field
declares, within the field's bounds (:data:`BOUNDS`), is taken as it is; any other value (a string for a number, an
int for a float, a list for the contexts, an unknown name, something out of bounds) goes through the pydantic model of
the same fields (:func:`_model`), which converts it or raises its ``ValidationError``. So pydantic is imported only for
such values (never by ``kvledger simulate`` on a plain command line: tens of ms of start-up), each meaning the same."""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import typing
from dataclasses import dataclass
from typing import Any, Literal

from kvledger.accounting.settings_words import reason_in_words, settings_error
from kvledger.errors import InputError
from kvledger.jsonable import json_fields

__all__ = ["PlanSettings", "BOUNDS", "make_settings", "reason_in_words"]

_TOKENS_MAX, _B45 = 1 << 26, 1 << 45  # 64M tokens: beyond any real context window; 32 TiB
#: numeric fields' bounds: (lower, lower excluded, upper included); _model() declares them to pydantic
BOUNDS: dict[str, tuple[float, bool, float]] = {
    "tp": (1, False, 1024), "pp": (1, False, 256), "data_parallel_size": (1, False, 1024), "ep_size": (1, False, 1024),
    "max_model_len": (1, False, _TOKENS_MAX),
    "gpu_memory_utilization": (0, True, 1), "mem_fraction_static": (0, True, 1),
    "free_gpu_memory_fraction": (0, True, 1), "nnodes": (1, False, 1024),
    "max_num_batched_tokens": (1, False, _TOKENS_MAX), "max_num_seqs": (1, False, 1 << 20),
    "cuda_graph_max_batch_size": (1, False, 1 << 20), "max_cudagraph_capture_size": (1, False, 1 << 20),
    "block_size": (1, False, 4096), "available_kv_memory_bytes": (0, True, _B45), "weights_bytes": (0, False, _B45),
    "num_gpu_blocks_override": (1, False, 1 << 32), "max_total_tokens": (1, False, 1 << 40),
    "activation_peak_bytes": (0, False, _B45), "non_torch_bytes": (0, False, _B45), "cpu_overhead_s": (0, False, 10),
    "cudagraph_bytes": (-(1 << 40), False, _B45), "achievable_flops_fraction": (0, True, 1),
    "achievable_bandwidth_fraction": (0, True, 1), "allreduce_link_share": (0, True, 1),
    "inter_node_link_bytes_per_s": (0, True, 1e15)}


#: fields left out of ``model_dump`` and of the settings' JSON (pydantic's ``Field(exclude=True)`` when the settings
#: were a pydantic model)
_NOT_DUMPED = ("trtllm_backend", "trtllm_logits_dtype", "model_runner", "allow_long_max_model_len", "mxfp4_backend")
#: fields left out of both while None (not given) or False (off): the JSON of settings made before them is unchanged
_OPTIONAL = ("allreduce_link_share", "max_cudagraph_capture_size", "enable_expert_parallel", "data_parallel_size",
             "enable_dp_attention", "max_total_tokens", "disable_prefill_cuda_graph", "inter_node_link_bytes_per_s",
             "enable_hierarchical_cache", "all2all_backend", "auto_max_model_len", "ep_size", "moe_a2a_backend")


@json_fields(exclude=_NOT_DUMPED, read={"enable_expert_parallel": "expert_parallel_given"})
@dataclass(frozen=True)
class PlanSettings:
    """Engine settings for ``build_plan``. None means "the engine's default for this GPU and version".

    Attributes (units in names; vLLM flag names unless marked):
        engine: "vllm", "sglang" or "trtllm". engine_version: vLLM version ("0.10.2") or TensorRT-LLM version (before
            1.0: its TensorRT-engine executor); None = newest read.
        tp, pp: tensor- and pipeline-parallel degrees. enable_expert_parallel: vLLM ``--enable-expert-parallel`` (data
            parallel 1: the MoE layers' experts whole over the TP ranks, expert_parallel.py).
        data_parallel_size, enable_dp_attention: vLLM's --data-parallel-size, SGLang's --dp-size with
            --enable-dp-attention (dp_attention.py); None: data parallel 1, off. all2all_backend: vLLM's
            --all2all-backend (VLLM_ALL2ALL_BACKEND before 0.11.1; vllm_all2all.py), None: the version's default.
            ep_size, moe_a2a_backend: SGLang's --ep-size and --moe-a2a-backend (sglang_ep.py); None: 1, "none".
        max_model_len: tokens; None = derived from the config (auto_max_model_len: vLLM's -1/auto, then lowered to
            fit the KV pool, vllm_auto_len.py). contexts: context lengths to report concurrency at, tokens.
        gpu_memory_utilization: vLLM fraction of the device total. mem_fraction_static: SGLang.
        free_gpu_memory_fraction: TensorRT-LLM fraction of free memory after load. trtllm_backend: TensorRT-LLM's
            runtime, "pytorch" or "tensorrt" (0.17–0.21 ship both); None = by version (PyTorch from 1.0).
        trtllm_logits_dtype: the TensorRT engine's logits dtype (``PretrainedConfig.logits_dtype``; None: float32,
            the default; ModelOpt-exported checkpoints of bfloat16 models, quantize.py's, carry float16).
        cuda_graph_max_batch_size: TensorRT-LLM ``cuda_graph_config.max_batch_size`` (None: 128, the default).
        no_cuda_graph: TensorRT-LLM's PyTorch backend without CUDA graphs (``cuda_graph_config: null``; 0.x
            ``use_cuda_graph: false``): no graph pool. disable_prefill_cuda_graph: SGLang's prefill graphs off
            (sglang_prefill_graphs.py); None: not given. enable_hierarchical_cache: SGLang HiCache (None: off).
        wddm: the GPU runs the Windows display driver (Windows, WSL2): CUDA reports the whole board as its total and
            the driver's hold counts as used memory (every engine's plan; vLLM's by its version's rule, wddm_engines).
        kv_cache_dtype: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2.
        dtype: vLLM ``--dtype`` (the served dtype of weights, activations and "auto" KV). quantization: vLLM
            ``--quantization``; "fp8" (and "bitsandbytes" to 0.27; 0.28 removed it) quantize on load, a quantized
            checkpoint's own method is accepted as vLLM accepts it (catalog/quant_flag.py).
        max_num_batched_tokens, max_num_seqs, block_size: as vLLM.
        available_kv_memory_bytes: the "Available KV cache memory" your engine printed, B; skips the memory model.
        num_gpu_blocks_override: vLLM's flag: the block count, bypassing memory entirely.
        max_total_tokens: SGLang's KV pool in token slots as its server sized it (``server_info.max_total_num_tokens``
            of a measured run): it replaces the pool SGLang's plan computes (``engine_pools.recorded_sglang_pool``).
        weights_bytes, activation_peak_bytes, non_torch_bytes, cudagraph_bytes: measured terms, B, replacing the models.
        disable_hybrid_kv_cache_manager: vLLM flag (sliding/chunked layers allocated as full).
        enable_prefix_caching: vLLM ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; None = the
            version's default. It sets the Mamba cache mode of state-layer models (vllm_rules.mamba_cache_rule).
        mamba_ssm_cache_dtype: "auto", "float32", "float16" or "bfloat16" (vLLM config/cache.py MambaDType).
        achievable_flops_fraction / achievable_bandwidth_fraction: roofline efficiency (see roofline.py).
        allreduce_link_share: the TP all-reduces' share of their link's one-direction bandwidth, in (0, 1] (given, or
            a GPU profile's fit); None, left out of the JSON: ``tp_comm``'s rule (0.35 over PCIe, NVLink as catalogued).
            inter_node_link_bytes_per_s: a GPU's NIC, B/s one direction, for a TP group over nodes (None: tp_network's).
        cpu_overhead_s: per-step CPU time added by the step-cost model, s.
        disable_custom_all_reduce, enforce_eager: vLLM flags (custom all-reduce buffers; no CUDA graphs, so no 0.20+
            estimate). max_cudagraph_capture_size: vLLM's largest CUDA-graph batch (None: min(2 × max_num_seqs, 512)).
            distributed_executor_backend: "mp" or "ray" (None: vLLM's default, mp on one node).
        nnodes: nodes the TP × PP group spans (custom all-reduce off when a TP group spans nodes, ceil(nnodes / pp) > 1,
            and under mp from vLLM 0.11.1: vllm_custom_ar.engine_disables_ca). sampler_backend: "auto" (the version's
            choice, vllm_sampler.py), "flashinfer" or "pytorch" (VLLM_USE_FLASHINFER_SAMPLER=1/0), "aiter" (ROCm ≥0.12
            with VLLM_ROCM_USE_AITER=1). model_runner: vLLM's model runner, "auto" (the version's default for the model,
            vllm_runner.py), "v1" or "v2" (VLLM_USE_V2_MODEL_RUNNER=0/1); not dumped: the notes name the runner.
            mxfp4_backend: MXFP4 experts' backend, "auto" (vllm_mxfp4_backend.py) or vLLM's name; not dumped."""

    engine: Literal["vllm", "sglang", "trtllm"] = "vllm"
    engine_version: str | None = None
    tp: int = 1
    pp: int = 1
    enable_expert_parallel: bool = False
    data_parallel_size: int | None = None
    enable_dp_attention: bool | None = None
    all2all_backend: str | None = None
    ep_size: int | None = None
    moe_a2a_backend: str | None = None
    max_model_len: int | None = None
    contexts: tuple[int, ...] | None = None
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    trtllm_backend: Literal["pytorch", "tensorrt"] | None = None  # not in model_dump / JSON: the plan's label names it
    trtllm_logits_dtype: Literal["float32", "float16"] | None = None  # not dumped either: the deductions name it
    cuda_graph_max_batch_size: int | None = None
    no_cuda_graph: bool = False
    disable_prefill_cuda_graph: bool | None = None
    enable_hierarchical_cache: bool | None = None
    wddm: bool = False
    kv_cache_dtype: str = "auto"
    dtype: Literal["auto", "bfloat16", "float16", "float32", "half", "float"] = "auto"
    quantization: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    available_kv_memory_bytes: int | None = None
    num_gpu_blocks_override: int | None = None
    max_total_tokens: int | None = None
    weights_bytes: int | None = None
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    disable_hybrid_kv_cache_manager: bool = False
    enable_prefix_caching: bool | None = None
    mamba_ssm_cache_dtype: str = "auto"
    achievable_flops_fraction: float = 0.7
    achievable_bandwidth_fraction: float = 0.8
    allreduce_link_share: float | None = None
    inter_node_link_bytes_per_s: float | None = None
    cpu_overhead_s: float = 0.0
    disable_custom_all_reduce: bool = False
    enforce_eager: bool = False
    max_cudagraph_capture_size: int | None = None
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    nnodes: int = 1
    sampler_backend: Literal["auto", "flashinfer", "pytorch", "aiter"] = "auto"
    model_runner: Literal["auto", "v1", "v2"] = "auto"
    mxfp4_backend: Literal["auto", "marlin", "triton", "flashinfer_trtllm", "flashinfer_cutlass"] = "auto"
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; not dumped: max_model_len's source says
    auto_max_model_len: bool | None = None
    __json_optional__ = _OPTIONAL  # kvledger.jsonable: these keys are left out while None

    def __post_init__(self) -> None:
        values = self.__dict__
        if not all(_plain(name, v) for name, v in values.items()):
            try:
                checked = _validated(values)
            except Exception as err:  # pydantic's ValidationError, in words (imported only with it)
                if type(err).__name__ != "ValidationError":
                    raise
                raise _invalid(err) from None
            for name, v in checked.items():
                object.__setattr__(self, name, v)

    def model_copy(self, *, update: dict[str, Any] | None = None) -> PlanSettings:
        """A copy with ``update`` applied, unchecked (as pydantic's ``model_copy``)."""
        new = copy.copy(self)
        for name, v in (update or {}).items():
            object.__setattr__(new, name, v)
        return new

    def model_dump(self) -> dict[str, Any]:
        """Every field in order but those of :data:`_NOT_DUMPED` (as pydantic's ``model_dump`` with ``exclude``) and
        those of :data:`_OPTIONAL` while None or False."""
        return {name: v for name, v in self.__dict__.items()
                if name not in _NOT_DUMPED and not ((v is None or v is False) and name in _OPTIONAL)}

    @property
    def expert_parallel_given(self) -> bool | None:
        """``enable_expert_parallel`` as the JSON writes it: None (left out) while off."""
        return self.enable_expert_parallel or None

    def __str__(self) -> str:  # as pydantic's: name=value pairs
        return " ".join(f"{name}={v!r}" for name, v in self.__dict__.items())


def _kinds() -> dict[str, tuple[Any, bool, tuple | None]]:
    """field → (its type without None, whether None is allowed, a Literal's values or None)."""
    out = {}
    for name, hint in typing.get_type_hints(PlanSettings).items():
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, type(int | None)) else (hint,)
        base = [a for a in args if a is not type(None)][0]
        allowed = typing.get_args(base) if typing.get_origin(base) is Literal else None
        out[name] = (base, len(args) > 1, allowed)
    return out


_KINDS: dict[str, tuple[Any, bool, tuple | None]] = {}  # _kinds(), filled on first use


def _plain(name: str, v: Any) -> bool:
    """Whether ``v`` is a value pydantic would take unchanged for field ``name`` (exact type, within bounds)."""
    if not _KINDS:
        _KINDS.update(_kinds())
    base, optional, allowed = _KINDS[name]
    if v is None or allowed is not None:
        return optional if v is None else type(v) is str and v in allowed
    if base is int or base is float:
        if type(v) is not base or (base is float and not math.isfinite(v)):
            return False
        lo, excluded, hi = BOUNDS.get(name, (-math.inf, False, math.inf))
        return (v > lo if excluded else v >= lo) and v <= hi
    if base is bool or base is str:
        return type(v) is base
    # contexts: a tuple of token counts (the model's own check: 1 ≤ c ≤ 64M)
    return type(v) is tuple and all(type(c) is int and 1 <= c <= _TOKENS_MAX for c in v)


def _validated(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as the pydantic model of the fields converts them (every field), or pydantic's ValidationError."""
    return dict(_model()(**values))


@functools.cache
def _model() -> Any:
    """The pydantic model of PlanSettings' fields, made from the dataclass's fields, types, defaults and
    :data:`BOUNDS` on first use (so the two cannot drift apart): frozen, no extra names. It converts a value as
    pydantic does (``"8"`` → 8, 1 → 1.0, a list → a tuple, ``TensorRT-LLM`` → ``trtllm``) or refuses it."""
    from pydantic import ConfigDict, Field, create_model, field_validator

    hints = typing.get_type_hints(PlanSettings)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(PlanSettings):
        bound = BOUNDS.get(f.name)
        kw = {} if bound is None else {"gt" if bound[1] else "ge": bound[0], "le": bound[2]}
        fields[f.name] = (hints[f.name], Field(f.default, **kw))
    return create_model("PlanSettings", __config__=ConfigDict(frozen=True, extra="forbid"),
                        __validators__={"_engine": field_validator("engine", mode="before")(_engine_before),
                                        "_contexts": field_validator("contexts")(_check_contexts)}, **fields)


def _engine_before(cls: type, v: object) -> object:
    return engine_name(v) if isinstance(v, str) else v


def _check_contexts(cls: type, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if v is not None:
        bad = [c for c in v if not (1 <= c <= _TOKENS_MAX)]
        if bad:
            raise ValueError(f"context lengths must be between 1 and {_TOKENS_MAX:,} tokens, got {bad[0]}")
    return v


ENGINE_ALIASES = {a: "trtllm" for a in ("tensorrt-llm", "tensorrt_llm", "tensorrtllm", "trt-llm", "trt_llm")}
"""Common spellings of the engines' names (case-insensitive) → the name the settings use."""


def engine_name(text: str) -> str:
    """``--engine`` as written (``TensorRT-LLM``, ``trt-llm``, ``vLLM``) → ``vllm``, ``sglang`` or ``trtllm``; any
    other text is returned lower-cased (and refused by the settings' check)."""
    key = text.strip().lower()
    return ENGINE_ALIASES.get(key, key)


def make_settings(**kwargs) -> PlanSettings:
    """Build PlanSettings; a validation failure becomes an InputError naming the setting.

    Raises:
        InputError: a zero, negative, absurd or unknown setting.
    """
    from_names = set(kwargs) <= _FIELD_NAMES  # an unknown name: the model's extra_forbidden error
    try:
        if from_names:
            return PlanSettings(**kwargs)
        return PlanSettings(**_validated(kwargs))
    except Exception as err:
        from pydantic import ValidationError  # imported already when the model refused a value

        if not isinstance(err, ValidationError):
            raise
        raise _invalid(err) from None


def _invalid(err: Any) -> InputError:
    """The ValidationError in words, naming flags inside a command (``errors.COMMAND``), else the Python names."""
    from kvledger.errors import COMMAND

    return settings_error(err, _FIELD_NAMES, cli=COMMAND.get() is not None)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(PlanSettings))
