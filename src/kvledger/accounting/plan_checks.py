"""The settings ``build_plan`` refuses before planning: another engine's memory fraction or vLLM-only flags with SGLang
or TensorRT-LLM, a KV figure above the device, a block size vLLM refuses, and the topology and platform checks."""

from __future__ import annotations

from kvledger.accounting.platforms import ENGINE_WORDS, check_engine_platform
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.topology import check_topology
from kvledger.accounting.trtllm_terms import check_trtllm_only
from kvledger.accounting.vllm_gpu_support import check_dtype
from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.accounting.wddm_engines import check_wddm
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import COMMAND, InputError
from kvledger.units import GiB

__all__ = ["VLLM_BLOCK_SIZES", "check_settings", "check_plan_args", "check_memory_fraction"]


VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128, 256)
"""Block sizes vLLM accepts for ``--block-size`` (config/cache.py; 256 only for backends that need it)."""


#: vLLM flags only vLLM's memory plan reads: (flag, PlanSettings attribute, its value when not given)
_VLLM_ONLY = (("--enforce-eager", "enforce_eager", False), ("--disable-custom-all-reduce", "disable_custom_all_reduce",
              False), ("--disable-hybrid-kv-cache-manager", "disable_hybrid_kv_cache_manager", False),
              ("--distributed-executor-backend", "distributed_executor_backend", None),
              ("--sampler-backend", "sampler_backend", "auto"), ("--cudagraph-memory", "cudagraph_bytes", None),
              ("--nnodes", "nnodes", 1), ("--num-gpu-blocks-override", "num_gpu_blocks_override", None),
              ("--model-runner", "model_runner", "auto"), ("--all2all-backend", "all2all_backend", None),
              ("--max-cudagraph-capture-size", "max_cudagraph_capture_size", None),
              ("--mamba-ssm-cache-dtype", "mamba_ssm_cache_dtype", "auto"))


_POLICY_COMMANDS = frozenset({"simulate", "goodput", "cost", "calibrate", "validate"})
"""The commands that pick the engine with --policy (they have no --engine): their refusals name that flag."""


def _engine_flag() -> str:
    return "--policy" if COMMAND.get() in _POLICY_COMMANDS else "--engine"


#: each engine's memory fraction: (the PlanSettings field, its flag)
_FRACTIONS = {"vllm": ("gpu_memory_utilization", "--gpu-memory-utilization"),
              "sglang": ("mem_fraction_static", "--mem-fraction-static"),
              "trtllm": ("free_gpu_memory_fraction", "--free-gpu-memory-fraction")}


def check_memory_fraction(engine: str, given: dict[str, float | None]) -> None:
    """Refuse another engine's memory fraction (``given``: fractions by field name, None where not given), which
    ``engine``'s plan would ignore: ``plan``'s rule, and ``report``'s and the web app's before any work.

    Raises:
        InputError: one line naming the flag, the engine and the fraction ``engine`` takes instead.
    """
    own = _FRACTIONS.get(engine)
    for other, (attr, flag) in _FRACTIONS.items():
        if other != engine and given.get(attr) is not None and own is not None:
            raise InputError(f"{flag} is {ENGINE_WORDS[other]}'s memory fraction; with --engine {engine} it would "
                             f"be ignored: use {own[1]} ({ENGINE_WORDS[engine]}'s), or --engine {other}")


def check_settings(gpu: GpuSpec, s: PlanSettings) -> None:
    """Reject combinations the engines would reject or that cannot be meant.

    Raises:
        InputError: a vLLM-only setting with another engine, a KV figure above the device, a block size vLLM refuses.
    """
    check_memory_fraction(s.engine, {attr: getattr(s, attr) for attr, _ in _FRACTIONS.values()})
    check_engine_platform(s.engine, gpu)
    check_dtype(s.engine, gpu, s.dtype)
    vllm_only = [flag for flag, attr, off in _VLLM_ONLY if getattr(s, attr) != off
                 and not (s.engine == "sglang" and attr == "nnodes")]  # SGLang's --nnodes: its TP group's nodes
    if s.engine != "vllm" and vllm_only:
        one, flag = len(vllm_only) == 1, _engine_flag()
        raise InputError(f"{', '.join(vllm_only)} {'is a vLLM flag' if one else 'are vLLM flags'}, modelled in vLLM's "
                         f"memory plan only; with {flag} {s.engine} {'it' if one else 'they'} would be ignored: drop "
                         f"{'it' if one else 'them'}, or use {flag} vllm"
                         + ("; SGLang's own SSM-state dtype flag is --mamba-ssm-dtype, which kvledger does not model"
                            if s.engine == "sglang" and "--mamba-ssm-cache-dtype" in vllm_only else ""))
    check_topology(s, parse_version(s.engine_version or LATEST) if s.engine == "vllm" else None)
    if s.engine == "trtllm":  # lazy: plan_other holds SGLang's and TRT-LLM's plans, not vLLM's
        from kvledger.accounting.plan_other import trtllm_runtime
    runtime = trtllm_runtime(s.engine_version, s.trtllm_backend)[0] if s.engine == "trtllm" else None
    check_trtllm_only(s, gpu, runtime)
    check_wddm(s, gpu)
    if s.engine != "vllm" and s.quantization is not None:
        raise InputError(f"--quantization {s.quantization} is modelled for vLLM only (its online FP8 weights); with "
                         f"{_engine_flag()} {s.engine} it would be ignored: plan a quantized checkpoint, or use "
                         f"{_engine_flag()} vllm")
    if s.engine != "sglang" and s.disable_prefill_cuda_graph:
        raise InputError(f"--disable-prefill-cuda-graph is an SGLang flag (its prefill CUDA graphs' reserve); with "
                         f"{_engine_flag()} {s.engine} it would be ignored: drop it, or use {_engine_flag()} sglang")
    if s.engine != "vllm" and s.pp > 1:
        raise InputError(f"--pp is modelled for vLLM only (its stage split, get_pp_indices, and per-stage profile); "
                         f"plan {s.engine} with --tp, or use {_engine_flag()} vllm")
    if s.available_kv_memory_bytes is not None and s.available_kv_memory_bytes > gpu.memory_bytes:
        raise InputError(f"--available-kv-memory {s.available_kv_memory_bytes / GiB:.2f} GiB is more than the whole "
                         f"device ({gpu.memory_bytes / GiB:.2f} GiB on {gpu.name}); pass one GPU's printed figure")
    if s.engine == "vllm" and s.block_size is not None and s.block_size not in VLLM_BLOCK_SIZES:
        raise InputError(f"--block-size {s.block_size}: vLLM accepts {', '.join(map(str, VLLM_BLOCK_SIZES))}")


def check_plan_args(model: object, gpu: object, settings: object) -> None:
    """Refuse arguments of the wrong type at ``build_plan``'s door, naming the call that makes the right one (an id
    where a ModelSpec belongs would otherwise fail deep in the plan).

    Raises:
        InputError: ``model`` not a ModelSpec, ``gpu`` not a GpuSpec, ``settings`` neither PlanSettings nor None.
    """
    for name, v, kind, how in (("model", model, ModelSpec, "kvledger.catalog.models.load_model(id)"),
                               ("gpu", gpu, GpuSpec, "kvledger.catalog.gpus.get_gpu(name)"),
                               ("settings", settings, (PlanSettings, type(None)),
                                "kvledger.accounting.settings.make_settings(...)")):
        if not isinstance(v, kind):
            raise InputError(f"build_plan({name}=...): expected what {how} returns, got {type(v).__name__} {v!r:.60}; "
                             "or call kvledger.plan(model_id, gpu_name, ...), which takes names")
