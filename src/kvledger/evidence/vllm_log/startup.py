"""vLLM start-up lines, version by version: one rule per message, into start-up facts (docs/engine-model.md §1.2–§1.7).

Formats covered (oldest first):
* V0 ≤0.6: ``Loading model weights took X GB`` (the label says GB, the figure is bytes / 2**30, i.e. GiB),
  ``Memory profiling results: total_gpu_memory=… peak_torch_memory=… non_torch_memory=… kv_cache_size=…``,
  ``# GPU blocks: N, # CPU blocks: M``, ``Maximum concurrency for L tokens per request: Cx``.
* V0 0.7–0.8 and early V1: ``the current vLLM instance can use total_gpu_memory (T) x gpu_memory_utilization (U) = R``,
  ``model weights take …; non_torch_memory takes …; PyTorch activation peak memory takes …; the rest of the memory
  reserved for KV Cache is …``, ``# cuda blocks: N, # CPU blocks: M``; V1 0.7: ``# GPU blocks: N``.
* V1 0.8+: ``Model loading took X GiB``, ``Memory profiling takes … Total non KV cache memory: …; torch peak memory
  increase: …; non-torch forward increase memory: …; weights memory: …`` (DEBUG), ``Available KV cache memory: X GiB``,
  ``Estimated CUDA graph memory: X GiB total``, ``GPU KV cache size: N tokens`` and ``Maximum concurrency for L tokens
  per request: Cx`` (two lines; one line in 0.33); 0.18–0.19 DEBUG: ``worker init memory snapshot: … total_memory=X
  GiB``,
  ``Requested memory: U (util), X GiB``, ``Free memory on device (F/T GiB)``.
* Any version: PyTorch's ``CUDA out of memory. … GPU 0 has a total capacity of T GiB …`` (the device total, read
  where no other line prints one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kvledger.evidence.vllm_log.settings_echo import from_arg_dict, from_command_line, from_key_values
from kvledger.units import GiB

__all__ = ["RULES", "NOTICES", "apply_rules", "oom_device_total", "unreadable_figure"]

_V = r"v?(\d+\.\d+[\w.+-]*)"
# Numbers as vLLM prints them, and nothing else: a figure such as "1.2.3" or a run of 40 digits does not match
# (the line is then not read) instead of reaching float()/int() and failing there.
_NUM = r"\d{1,15}(?:\.\d{1,15})?(?![\d.])"
_INT = r"\d{1,15}(?!\d)"
_GROUPED = r"\d{1,3}(?:,\d{3}){0,4}(?![\d,])|\d{1,15}(?![\d,])"


def _gib(x: str) -> int:
    return int(round(float(x) * GiB))


def _int(x: str) -> int:
    return int(x.replace(",", ""))


def _weights(m: re.Match) -> dict[str, Any]:
    out: dict[str, Any] = {"weights_bytes": _gib(m.group(1))}
    if m.group(2) == "GB":
        out["_note"] = ("'Loading model weights took … GB': vLLM divided bytes by 2**30, so the figure is GiB "
                        "despite the label (model_runner.py::load_model)")
    return out


def _profiling_results(m: re.Match) -> dict[str, Any]:
    kv = dict(re.findall(r"(\w+)=(" + _NUM + r")", m.group(1)))
    names = {"total_gpu_memory": "total_gpu_memory_bytes", "peak_torch_memory": "peak_torch_memory_bytes",
             "non_torch_memory": "non_torch_bytes", "kv_cache_size": "available_kv_bytes"}
    out: dict[str, Any] = {f: _gib(kv[k]) for k, f in names.items() if k in kv}
    if "gpu_memory_utilization" in kv:
        out["gpu_memory_utilization"] = float(kv["gpu_memory_utilization"])
    out["_marker"] = "v0_profiling_results"
    return out


def _capacity(m: re.Match) -> dict[str, Any]:
    return {"concurrency_context_tokens": _int(m.group(1)), "max_concurrency": float(m.group(2))}


def _blocks(m: re.Match) -> dict[str, Any]:
    out: dict[str, Any] = {"num_gpu_blocks": int(m.group(1)), "_marker": "blocks_only"}
    if m.group(2) is not None:
        out.update(num_cpu_blocks=int(m.group(2)), _marker="blocks_with_cpu")
    return out


def _engine_init(m: re.Match) -> dict[str, Any]:
    out = from_key_values(m.group(3) or "")
    out["vllm_version"] = m.group(2)
    if m.group(1):
        out["engine_generation"] = m.group(1).lower()
    return out


def _fixed(**values: Any) -> Callable[[re.Match], dict[str, Any]]:
    return lambda m: {k: (f(m) if callable(f) else f) for k, f in values.items()}


#: notices read as markers with the line of their first sighting (parse.py): the KV dtype where no echo names it
#: (cache.py), a WSL2 host (interface.py's pin_memory warning)
NOTICES = {"fp8_kv_notice": "Using fp8 data type to store kv cache", "wsl": "WSL is detected"}

# (needle that must appear in the message, pattern, handler). Every rule is tried on every message.
RULES: list[tuple[str, re.Pattern, Callable[[re.Match], dict[str, Any]]]] = [
    ("version", re.compile(r"vLLM API server version " + _V), _fixed(vllm_version=lambda m: m.group(1))),
    ("LLM engine", re.compile(r"Initializing an? (?:(V[01]) )?LLM engine \(" + _V + r"\) with config:(.*)"),
     _engine_init),
    ("version", re.compile(r"[█▄▀].*\bversion\s+" + _V), _fixed(vllm_version=lambda m: m.group(1))),
    ("model", re.compile(r"[█▄▀].*\bmodel\s+(\S+)"), _fixed(model=lambda m: m.group(1))),
    ("non-default args", re.compile(r"non-default args: (\{.*)"), lambda m: from_arg_dict(m.group(1))),
    ("Namespace(", re.compile(r"args: Namespace\((.*)"), lambda m: from_key_values(m.group(1))),
    ("serve", re.compile(r"(?:vllm serve|vllm\.entrypoints\.openai\.api_server)\s+(.*)"),
     lambda m: from_command_line(m.group(0))),
    ("Chunked prefill is enabled",
     re.compile(r"Chunked prefill is enabled with max_num_batched_tokens=(" + _INT + r")"),
     _fixed(max_num_batched_tokens=lambda m: int(m.group(1)), enable_chunked_prefill=True)),
    # engine/arg_utils.py (V1, DEBUG): the batch limits vLLM chose where the user set none, after its caps
    # (min(default, max_num_seqs × max_model_len) tokens; min(default, tokens) seqs; read in the 0.19.0 wheel): the
    # default depends on the GPU (≥70 GiB and not an A100: 8192/1024 for the server), so the log's figure is the one
    ("Defaulting max_num_batched_tokens", re.compile(r"Defaulting max_num_batched_tokens to (" + _INT + r")"),
     _fixed(max_num_batched_tokens=lambda m: int(m.group(1)))),
    ("Defaulting max_num_seqs", re.compile(r"Defaulting max_num_seqs to (" + _INT + r")"),
     _fixed(max_num_seqs=lambda m: int(m.group(1)))),
    ("max model len", re.compile(r"Using max model len (" + _INT + r")"),
     _fixed(max_model_len=lambda m: int(m.group(1)))),
    ("weights took", re.compile(r"Loading model weights took (" + _NUM + r") ?(GB|GiB)"), _weights),
    ("Model loading took", re.compile(r"Model loading took (" + _NUM + r") ?(GiB|GB)"), _weights),
    ("Memory profiling results", re.compile(r"Memory profiling results: (.*)"), _profiling_results),
    ("total_gpu_memory (",
     re.compile(r"total_gpu_memory \((" + _NUM + r")\s*GiB\) x gpu_memory_utilization \((" + _NUM + r")\) = ("
                + _NUM + r")\s*GiB"),
     _fixed(total_gpu_memory_bytes=lambda m: _gib(m.group(1)), gpu_memory_utilization=lambda m: float(m.group(2)),
            requested_memory_bytes=lambda m: _gib(m.group(3)), _marker="worker_profile")),
    # V1 0.18–0.19 DEBUG lines of gpu_worker.py: the device total (torch.cuda.mem_get_info) at worker start-up and
    # after the KV pool is sized, and the budget ("Requested memory: 0.950000 (util), 75.23 GiB").
    ("worker init memory snapshot", re.compile(r"\btotal_memory=(" + _NUM + r")\s*GiB"),
     _fixed(total_gpu_memory_bytes=lambda m: _gib(m.group(1)))),
    # PyTorch's CUDA out-of-memory error (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. Tried to allocate
    # X GiB. GPU 0 has a total capacity of T GiB of which F GiB is free." T is cudaMemGetInfo's total, the device total
    # vLLM prints, in PyTorch's format_size (2 decimals, GiB = 2**30 B); read only where no other line prints one
    # (oom_device_total)
    ("has a total capacity of", re.compile(r"CUDA out of memory\..*?\bGPU \d+ has a total capacity of (" + _NUM
                                           + r")\s*GiB"),
     _fixed(oom_total_gpu_memory_bytes=lambda m: _gib(m.group(1)))),
    # the device's name where a tuned kernel config is looked up (fused MoE, block-FP8 GEMMs): vLLM names the file
    # after torch.cuda.get_device_name() with spaces as underscores ("device_name=NVIDIA_H100_80GB_HBM3")
    ("device_name=", re.compile(r"device_name=([A-Za-z][A-Za-z0-9_-]{2,60}?)(?:,|\.json|\]|'|$)"),
     _fixed(device_name=lambda m: m.group(1).replace("_", " "))),
    # the attention backend's FlashAttention version (v1 flash_attn.py): vLLM picks 3 only on Hopper (sm90)
    ("Using FlashAttention version", re.compile(r"Using FlashAttention version (\d)"),
     _fixed(flash_attn_version=lambda m: int(m.group(1)))),
    ("Free memory on device", re.compile(r"Free memory on device \((" + _NUM + r")/(" + _NUM + r")\s*GiB\)"),
     _fixed(total_gpu_memory_bytes=lambda m: _gib(m.group(2)))),
    # 0.10.2–0.11 after graph capture (gpu_worker.py::compile_or_warm_up_model): "Desired GPU memory utilization is
    # (U, R GiB). Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory, and C GiB
    # for CUDAGraph memory." (later releases fold weights and non-torch into "consumed memory"); A and N are the profile
    # run's torch peak and non-torch increases, the terms the budget subtracted
    ("esired GPU memory utilization", re.compile(r"[Dd]esired GPU memory utilization (?:is )?\((" + _NUM + r"), ("
                                                 + _NUM + r")\s*GiB\)"),
     _fixed(gpu_memory_utilization=lambda m: float(m.group(1)), requested_memory_bytes=lambda m: _gib(m.group(2)))),
    ("for peak activation", re.compile(r"(" + _NUM + r")\s*GiB for peak activation"),
     _fixed(activation_peak_bytes=lambda m: _gib(m.group(1)))),
    ("for non-torch memory", re.compile(r"(" + _NUM + r")\s*GiB for non-torch memory"),
     _fixed(non_torch_bytes=lambda m: _gib(m.group(1)))),
    ("Requested memory:", re.compile(r"Requested memory: (" + _NUM + r") \(util\), (" + _NUM + r")\s*GiB"),
     _fixed(gpu_memory_utilization=lambda m: float(m.group(1)), requested_memory_bytes=lambda m: _gib(m.group(2)))),
    ("model weights take", re.compile(r"model weights take (" + _NUM + r")\s*GiB"),
     _fixed(weights_bytes=lambda m: _gib(m.group(1)))),
    ("non_torch_memory takes", re.compile(r"non_torch_memory takes (" + _NUM + r")\s*GiB"),
     _fixed(non_torch_bytes=lambda m: _gib(m.group(1)))),
    ("activation peak memory", re.compile(r"PyTorch activation peak memory takes (" + _NUM + r")\s*GiB"),
     _fixed(activation_peak_bytes=lambda m: _gib(m.group(1)))),
    ("reserved for KV Cache", re.compile(r"the rest of the memory reserved for KV Cache is (" + _NUM + r")\s*GiB"),
     _fixed(available_kv_bytes=lambda m: _gib(m.group(1)))),
    ("Total non KV cache memory", re.compile(r"Total non KV cache memory: (" + _NUM + r")\s*GiB"),
     _fixed(non_kv_total_bytes=lambda m: _gib(m.group(1)))),
    ("torch peak memory increase", re.compile(r"torch peak memory increase: (" + _NUM + r")\s*GiB"),
     _fixed(activation_peak_bytes=lambda m: _gib(m.group(1)))),
    ("non-torch forward increase", re.compile(r"non-torch forward increase memory: (" + _NUM + r")\s*GiB"),
     _fixed(non_torch_bytes=lambda m: _gib(m.group(1)))),
    ("weights memory:", re.compile(r"weights memory: (" + _NUM + r")\s*GiB"),
     _fixed(weights_bytes=lambda m: _gib(m.group(1)))),
    ("Available KV cache memory", re.compile(r"Available KV cache memory: (" + _NUM + r")\s*GiB"),
     _fixed(available_kv_bytes=lambda m: _gib(m.group(1)), _marker="available_kv")),
    ("Estimated CUDA graph memory", re.compile(r"Estimated CUDA graph memory: (" + _NUM + r")\s*GiB"),
     _fixed(cudagraph_estimate_bytes=lambda m: _gib(m.group(1)))),
    ("Graph capturing finished", re.compile(r"Graph capturing finished in [\d.]+ secs?, took (" + _NUM + r")\s*GiB"),
     _fixed(cudagraph_actual_bytes=lambda m: _gib(m.group(1)))),
    ("CUDA graph pool memory",
     re.compile(r"CUDA graph pool memory: (" + _NUM + r")\s*GiB \(actual\), (" + _NUM + r")\s*GiB \(estimated\)"),
     _fixed(cudagraph_actual_bytes=lambda m: _gib(m.group(1)), cudagraph_estimate_bytes=lambda m: _gib(m.group(2)))),
    # gpu_worker.py::determine_available_memory subtracts the estimate only with
    # VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
    # (default off in 0.18–0.19, on from 0.20) and says which after the budget line: 0.18–0.19 "In v0.19, … will be
    # enabled
    # by default" (off) or "… is enabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1)"; 0.20+ "… is enabled (default
    # since
    # v0.21.0)" or "… is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)".
    ("CUDA graph memory profiling will be enabled by default", re.compile(r"CUDA graph memory profiling will be "
                                                                          r"enabled by default"),
     _fixed(cudagraph_estimate_applied=False)),
    ("CUDA graph memory profiling is", re.compile(r"CUDA graph memory profiling is (enabled|disabled)"),
     _fixed(cudagraph_estimate_applied=lambda m: m.group(1) == "enabled")),
    # the largest CUDA-graph batch, as the engine echo's compilation_config (resolved: 512 by default) or the
    # non-default args (--max-cudagraph-capture-size) print it
    # gpu_worker.py::compile_or_warm_up_model, DEBUG, after graph capture (read in 0.10.2, 0.19, 0.28, 0.29): "… or
    # `--kv-cache-memory=N` (X GiB) to fully utilize gpu memory. Current kv cache memory in use is Y GiB." (0.10.2: no
    # "(X GiB)", Y in bytes). N (B) = the memory free at start-up − weights − activation peak − non-torch − CUDA
    # graphs − a 150 MiB buffer; Y the KV cache allocated
    ("to fully utilize gpu memory", re.compile(r"--kv-cache-memory=(" + _INT + r")`?(?: \([\d.]+ ?GiB\))? to fully "
                                               r"utilize gpu memory\. Current kv cache memory in use is (" + _NUM
                                               + r")\s*(GiB|bytes)"),
     _fixed(kv_memory_to_gpu_limit_bytes=lambda m: int(m.group(1)),
            kv_memory_in_use_bytes=lambda m: _gib(m.group(2)) if m.group(3) == "GiB" else int(float(m.group(2))))),
    ("max_cudagraph_capture_size", re.compile(r"'max_cudagraph_capture_size': (" + _INT + r")"),
     _fixed(max_cudagraph_capture_size=lambda m: int(m.group(1)))),
    *((words, re.compile(re.escape(words)), _fixed(_notice=marker)) for marker, words in NOTICES.items()),
    # 0.20+ after the budget line: "The current --gpu-memory-utilization=0.9500 is equivalent to
    # --gpu-memory-utilization=0.9417 without CUDA graph memory profiling" (the setting, then its equivalent)
    ("The current --gpu-memory-utilization=",
     re.compile(r"The current --gpu-memory-utilization=(" + _NUM + r") is equivalent"),
     _fixed(gpu_memory_utilization=lambda m: float(m.group(1)))),
    ("--gpu-memory-utilization from", re.compile(r"--gpu-memory-utilization from (" + _NUM + r") to (" + _NUM + r")"),
     _fixed(gpu_memory_utilization=lambda m: float(m.group(1)))),
    ("blocks:",
     re.compile(r"(?:GPU|cuda|npu|xpu|hpu|neuron) blocks: (" + _INT + r")(?:,\s*#\s*CPU blocks: (" + _INT + r"))?",
                re.I), _blocks),
    # Not read as a setting here: vLLM 0.18–0.19 print it for their CUDA-graph profiling pass too (override.py decides).
    ("num_gpu_blocks_override=", re.compile(r"Overriding num_gpu_blocks=(-?" + _INT + r") with "
        r"num_gpu_blocks_override=(" + _INT + r")"),
     _fixed(_override=lambda m: (int(m.group(1)), int(m.group(2))))),
    ("GPU KV cache size", re.compile(r"GPU KV cache size: (" + _GROUPED + r") tokens"),
     _fixed(kv_cache_tokens=lambda m: _int(m.group(1)), _marker="kv_tokens")),
    ("Maximum concurrency",
     re.compile(r"Maximum concurrency for (" + _GROUPED + r") tokens per request: (" + _NUM + r")x"), _capacity),
    ("larger than the maximum number of tokens", re.compile(
        r"max seq len \((" + _INT + r")\) is larger than the maximum number of tokens that can be stored in KV cache "
                                    r"\((" + _INT + r")\)"),
     _fixed(startup_error=lambda m: m.group(0), error_max_model_len=lambda m: int(m.group(1)),
            error_kv_capacity_tokens=lambda m: int(m.group(2)))),
    ("To serve at least one request", re.compile(
        r"To serve at least one request with the models?'s max seq len \((" + _INT + r")\).*?estimated maximum model "
            r"length is (" + _INT + r")"),
     _fixed(startup_error=lambda m: m.group(0), error_max_model_len=lambda m: int(m.group(1)),
            estimated_max_model_len=lambda m: int(m.group(2)))),
    ("No available memory for the cache blocks", re.compile(r"No available memory for the cache blocks"),
     _fixed(startup_error=lambda m: m.group(0))),
]


_OOM_TOTAL = "oom_total_gpu_memory_bytes"  # the key of the rule's value until oom_device_total takes it out


def oom_device_total(values: dict[str, Any], lines: dict[str, int], workers: dict[str, str]) -> str | None:
    """Take the device total of a CUDA out-of-memory error (the rule above) out of the start-up values; where no other
    line printed a device total, it becomes the device total (its line kept), and the note saying so is returned."""
    total, line = values.pop(_OOM_TOTAL, None), lines.pop(_OOM_TOTAL, None)
    worker = workers.pop(_OOM_TOTAL, None)
    if total is None or values.get("total_gpu_memory_bytes") is not None:
        return None
    values["total_gpu_memory_bytes"], lines["total_gpu_memory_bytes"] = total, line
    if worker:
        workers["total_gpu_memory_bytes"] = worker
    return (f"device total {total / GiB:.2f} GiB: from line {line}, the CUDA out-of-memory error's 'total capacity' "
            "(PyTorch prints the device's CUDA total there, in GiB of 2**30 B); the log prints no other device total")


def apply_rules(message: str) -> list[dict[str, Any]]:
    """Every start-up rule's result on one message (usually none, sometimes several)."""
    out = []
    for needle, pattern, handler in RULES:
        if needle in message:
            for m in pattern.finditer(message):
                out.append(handler(m))
    return out


# A start-up figure printed as nan or inf (Python's float formatting of a broken computation): the rules above do not
# read it, and a comparison without it would be silently partial, so the doctor reports it (checks.py).
_UNREADABLE = re.compile(
    r"(Available KV cache memory|GPU KV cache size|Maximum concurrency for [\d,]+ tokens per request|"
    r"(?:GPU|cuda) blocks|Model loading took|Loading model weights took|Total non KV cache memory|"
    r"torch peak memory increase|non-torch forward increase memory|weights memory|Estimated CUDA graph memory)"
    r":?\s*([-+]?(?:nan|inf(?:inity)?))\b", re.I)


def unreadable_figure(message: str) -> tuple[str, str] | None:
    """(label, text) when a start-up figure on this message is printed as nan or inf, else None."""
    low = message.lower()
    if "nan" not in low and "inf" not in low:
        return None
    m = _UNREADABLE.search(message)
    return (m.group(1), m.group(2)) if m else None
