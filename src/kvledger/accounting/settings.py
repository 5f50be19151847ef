"""Validated engine settings for a plan, named as the engines name their flags."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kvledger.errors import InputError

__all__ = ["PlanSettings", "make_settings", "reason_in_words"]

_TOKENS_MAX = 1 << 26  # 64M tokens: beyond any real context window


class PlanSettings(BaseModel):
    """Engine settings for ``build_plan``. None means "the engine's default for this GPU and version".

    Attributes (units in names; vLLM flag names unless marked):
        engine: "vllm", "sglang" or "trtllm". engine_version: vLLM version ("0.10.2") or TensorRT-LLM version (before
        1.0:
            its TensorRT-engine executor); None = newest read.
        tp: tensor-parallel degree. pp: pipeline-parallel degree (vLLM ``--pipeline-parallel-size``). max_model_len:
        tokens; None = derived from the config.
        contexts: context lengths to report concurrency at, tokens.
        gpu_memory_utilization: vLLM fraction of the device total. mem_fraction_static: SGLang.
        free_gpu_memory_fraction: TensorRT-LLM fraction of free memory after load. trtllm_backend: TensorRT-LLM's
            runtime, "pytorch" or "tensorrt" (0.17–0.21 ship both); None = by version (PyTorch from 1.0).
        kv_cache_dtype: auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2.
        dtype: vLLM ``--dtype`` (the served dtype of weights, activations and "auto" KV). quantization: vLLM
            ``--quantization``; "fp8" quantizes an unquantized checkpoint on load.
        max_num_batched_tokens, max_num_seqs, block_size: as vLLM.
        available_kv_memory_bytes: the "Available KV cache memory" your engine printed, B; skips the memory model.
        num_gpu_blocks_override: vLLM's flag: the block count, bypassing memory entirely.
        weights_bytes, activation_peak_bytes, non_torch_bytes, cudagraph_bytes: measured terms, B, replacing the models.
        disable_hybrid_kv_cache_manager: vLLM flag (sliding/chunked layers allocated as full).
        enable_prefix_caching: vLLM ``--enable-prefix-caching`` / ``--no-enable-prefix-caching``; None = the
            version's default. It sets the Mamba cache mode of state-layer models (vllm_rules.mamba_cache_rule).
        mamba_ssm_cache_dtype: "auto" or "float32".
        achievable_flops_fraction / achievable_bandwidth_fraction: roofline efficiency (see roofline.py).
        cpu_overhead_s: per-step CPU time added by the step-cost model, s.
        disable_custom_all_reduce, enforce_eager: vLLM flags (custom all-reduce buffers; no CUDA graphs, so no 0.20+
            estimate). distributed_executor_backend: "mp" or "ray" (None: vLLM's default, mp on one node).
        nnodes: nodes the TP × PP group spans (custom all-reduce is off across nodes). sampler_backend: "auto" (the
            version's choice, vllm_sampler.py), "flashinfer" or "pytorch" (VLLM_USE_FLASHINFER_SAMPLER=1/0).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    engine: Literal["vllm", "sglang", "trtllm"] = "vllm"
    engine_version: str | None = None
    tp: int = Field(1, ge=1, le=1024)
    pp: int = Field(1, ge=1, le=256)
    max_model_len: int | None = Field(None, ge=1, le=_TOKENS_MAX)
    contexts: tuple[int, ...] | None = None
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1)
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    free_gpu_memory_fraction: float | None = Field(None, gt=0, le=1)
    trtllm_backend: Literal["pytorch", "tensorrt"] | None = Field(None, exclude=True)  # the plan's label names it
    kv_cache_dtype: str = "auto"
    dtype: Literal["auto", "bfloat16", "float16", "float32", "half", "float"] = "auto"
    quantization: Literal["fp8"] | None = None
    max_num_batched_tokens: int | None = Field(None, ge=1, le=_TOKENS_MAX)
    max_num_seqs: int | None = Field(None, ge=1, le=1 << 20)
    block_size: int | None = Field(None, ge=1, le=4096)
    available_kv_memory_bytes: int | None = Field(None, ge=0, le=1 << 45)
    num_gpu_blocks_override: int | None = Field(None, ge=1, le=1 << 32)
    weights_bytes: int | None = Field(None, ge=0, le=1 << 45)
    activation_peak_bytes: int | None = Field(None, ge=0, le=1 << 45)
    non_torch_bytes: int | None = Field(None, ge=0, le=1 << 45)
    cudagraph_bytes: int | None = Field(None, ge=-(1 << 40), le=1 << 45)
    disable_hybrid_kv_cache_manager: bool = False
    enable_prefix_caching: bool | None = None
    mamba_ssm_cache_dtype: str = "auto"
    achievable_flops_fraction: float = Field(0.7, gt=0, le=1)
    achievable_bandwidth_fraction: float = Field(0.8, gt=0, le=1)
    cpu_overhead_s: float = Field(0.0, ge=0, le=10)
    disable_custom_all_reduce: bool = False
    enforce_eager: bool = False
    distributed_executor_backend: Literal["mp", "ray"] | None = None
    nnodes: int = Field(1, ge=1, le=1024)
    sampler_backend: Literal["auto", "flashinfer", "pytorch"] = "auto"

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, v: object) -> object:
        return engine_name(v) if isinstance(v, str) else v

    @field_validator("contexts")
    @classmethod
    def _contexts(cls, v: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if v is not None:
            bad = [c for c in v if not (1 <= c <= _TOKENS_MAX)]
            if bad:
                raise ValueError(f"context lengths must be between 1 and {_TOKENS_MAX:,} tokens, got {bad[0]}")
        return v


ENGINE_ALIASES = {"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm", "tensorrtllm": "trtllm", "trt-llm": "trtllm",
                  "trt_llm": "trtllm"}
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
    try:
        return PlanSettings(**{k: v for k, v in kwargs.items()})
    except ValidationError as err:
        msgs = []
        for e in err.errors():
            loc = ".".join(str(x) for x in e["loc"])
            name = _FLAGS.get(loc, "--" + loc.replace("_", "-")) if loc else "settings"
            if e.get("type") == "value_error":  # our own validator's sentence, which names the value
                msgs.append(f"{name}: {reason_in_words(e)}")
            elif loc.endswith("_bytes") and isinstance(e.get("input"), int):
                gib = {k: v / 2**30 for k, v in (e.get("ctx") or {}).items() if isinstance(v, int)}
                msgs.append(f"{name} {reason_in_words({**e, 'ctx': gib})} GiB, got {e['input'] / 2**30:,.2f} GiB")
            else:
                msgs.append(f"{name} {reason_in_words(e)}, got {e.get('input')!r}")
        raise InputError("invalid setting: " + "; ".join(msgs)) from None


_FLAGS = {"contexts": "--context", "weights_bytes": "--weights-memory",
          "available_kv_memory_bytes": "--available-kv-memory",
          "activation_peak_bytes": "--activation-peak", "non_torch_bytes": "--non-torch-memory",
          "cudagraph_bytes": "--cudagraph-memory", "cpu_overhead_s": "--cpu-overhead"}
"""Settings whose command-line flag is not the field's name with dashes."""


def reason_in_words(e: dict) -> str:
    """One pydantic validation failure (an item of ``ValidationError.errors()``) in words: the allowed values or
    bounds, not pydantic's wording."""
    ctx, kind, value = e.get("ctx") or {}, e.get("type", ""), e.get("input")
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    bounds = {"greater_than": "> {gt}", "greater_than_equal": "≥ {ge}", "less_than": "< {lt}",
              "less_than_equal": "≤ {le}"}
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if kind in bounds:
        return "must be " + bounds[kind].format(**{k: f"{v:,}" if isinstance(v, int) else f"{v:,g}"
                                                   if isinstance(v, float) else v for k, v in ctx.items()})
    if kind == "finite_number":
        return "must be a finite number"
    if kind.startswith(("int_", "float_")):
        return "must be a whole number" if kind.startswith("int_") else "must be a number"
    return str(e.get("msg", "is not valid")).replace("Value error, ", "")
