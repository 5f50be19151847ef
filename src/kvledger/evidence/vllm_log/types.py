"""The typed, serializable result of reading a vLLM server log: start-up facts, metrics samples, preemption events."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["StartupFacts", "StatsSample", "PreemptionEvent", "VllmLog", "STARTUP_FIELDS"]

#: Start-up fields and their units. Byte figures are converted from the GiB vLLM prints
#: (2 decimals, so ±0.005 GiB); "GB" in old vLLM lines is GiB as well (bytes / 2**30).
STARTUP_FIELDS: dict[str, str] = {
    "vllm_version": "version as printed", "engine_generation": "'v0' or 'v1' engine",
    "model": "model id or path", "served_model_name": "name", "dtype": "model dtype", "quantization": "method",
    "max_model_len": "tokens", "tensor_parallel_size": "GPUs", "pipeline_parallel_size": "stages",
    "data_parallel_size": "engines", "gpu_memory_utilization": "fraction of the device total",
    "kv_cache_dtype": "vLLM name", "block_size": "tokens per block", "max_num_batched_tokens": "tokens per step",
    "max_num_seqs": "requests", "enable_prefix_caching": "bool", "enable_chunked_prefill": "bool",
    "device_name": "torch.cuda.get_device_name, as a kernel-config file name spells it",
    "flash_attn_version": "FlashAttention version of the attention backend (3: Hopper only)",
    "num_gpu_blocks_override": "blocks", "max_cudagraph_capture_size": "sequences (largest CUDA-graph batch)",
    "weights_bytes": "B per GPU", "total_gpu_memory_bytes": "B (CUDA device total)",
    "requested_memory_bytes": "B (total × gpu_memory_utilization)", "peak_torch_memory_bytes": "B (V0 0.6: weights + "
        "activations)",
    "activation_peak_bytes": "B (torch peak increase during the profile run)", "non_torch_bytes": "B",
    "non_kv_total_bytes": "B (weights + activation peak + non-torch)", "cudagraph_estimate_bytes": "B",
    "cudagraph_actual_bytes": "B", "cudagraph_estimate_applied": "bool (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS)",
    "available_kv_bytes": "B per GPU",
    "kv_memory_to_gpu_limit_bytes": "B (vLLM's DEBUG '--kv-cache-memory=N … to fully utilize gpu memory')",
    "kv_memory_in_use_bytes": "B (the same line's 'Current kv cache memory in use')",
    "num_gpu_blocks": "blocks (V1: null block included)", "num_cpu_blocks": "blocks (V0 swap space)",
    "kv_cache_tokens": "tokens (as printed)", "concurrency_context_tokens": "tokens (= max_model_len)",
    "max_concurrency": "× (requests of concurrency_context_tokens)",
    "startup_error": "text", "error_max_model_len": "tokens", "error_kv_capacity_tokens": "tokens",
    "estimated_max_model_len": "tokens",
}


@dataclass(frozen=True)
class StartupFacts:
    """What the start-up lines say. Every field is None when the log does not print it.

    ``lines`` maps a field name to the 1-based line it was read from; ``field_workers`` to the process tag of that
    line ("Worker_PP1 pid=443"), where it has one; ``notes`` records conversions (for example "the 'GB' label in
    'Loading model weights took' is GiB").
    """

    vllm_version: str | None = None
    engine_generation: str | None = None
    model: str | None = None
    served_model_name: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    max_model_len: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    block_size: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    num_gpu_blocks_override: int | None = None
    max_cudagraph_capture_size: int | None = None
    weights_bytes: int | None = None
    total_gpu_memory_bytes: int | None = None
    device_name: str | None = None
    flash_attn_version: int | None = None
    requested_memory_bytes: int | None = None
    peak_torch_memory_bytes: int | None = None
    activation_peak_bytes: int | None = None
    non_torch_bytes: int | None = None
    non_kv_total_bytes: int | None = None
    cudagraph_estimate_bytes: int | None = None
    cudagraph_actual_bytes: int | None = None
    cudagraph_estimate_applied: bool | None = None
    available_kv_bytes: int | None = None
    kv_memory_to_gpu_limit_bytes: int | None = None
    kv_memory_in_use_bytes: int | None = None
    num_gpu_blocks: int | None = None
    num_cpu_blocks: int | None = None
    kv_cache_tokens: int | None = None
    concurrency_context_tokens: int | None = None
    max_concurrency: float | None = None
    startup_error: str | None = None
    error_max_model_len: int | None = None
    error_kv_capacity_tokens: int | None = None
    estimated_max_model_len: int | None = None
    workers: tuple[str, ...] = ()
    lines: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    field_workers: dict[str, str] = field(default_factory=dict)
    unreadable: tuple[tuple[int, str, str], ...] = ()
    """Start-up figures printed as nan or inf: (line, label, text as printed); the doctor stops on them."""
    dp_ranks: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    """Per data-parallel engine ("0", "1", … from its process tag ``EngineCore_DP1 pid=…``): its own capacity lines,
    field → (value, line), the first each prints (kv_cache_tokens, num_gpu_blocks, max_concurrency,
    available_kv_bytes). Each DP engine profiles and sizes its own pool (v1/engine/core.py::_initialize_kv_caches)."""

    def found(self) -> list[str]:
        """Names of the fields the log printed (or that were derived from printed ones)."""
        return [f.name for f in fields(self) if f.name in STARTUP_FIELDS and getattr(self, f.name) is not None]

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class StatsSample:
    """One periodic metrics line (V1 ``loggers.py`` "Engine 000: ..." or V0 ``metrics.py``).

    Attributes:
        line_no: 1-based line. time_text: the timestamp as printed ("03-21 20:15:45"), or None.
        t_s: seconds since the first timestamped metrics line, s; None without timestamps.
        engine: "000" (V1 engine index), "aggregated" (DP aggregate line: running, waiting and preemptions summed
            over its engines, GPU KV usage their mean) or None (V0 / early V1).
        prompt_tokens_per_s / generation_tokens_per_s: averages over the logging interval, tokens/s.
        running_reqs, waiting_reqs: requests (V0 "Pending" is waiting). swapped_reqs: V0 only.
        preemptions: V1 preemptions during the interval; None when the line does not print the field
            (V1 prints it only when > 0; V0 never prints it).
        gpu_kv_usage_pct / cpu_kv_usage_pct: % of blocks in use. prefix_cache_hit_pct: % of queried
            prompt tokens found in the cache (V1: over a window of recent requests; V0: separate line).
    """

    line_no: int
    time_text: str | None
    t_s: float | None
    engine: str | None
    prompt_tokens_per_s: float
    generation_tokens_per_s: float
    running_reqs: int
    waiting_reqs: int
    swapped_reqs: int | None = None
    preemptions: int | None = None
    gpu_kv_usage_pct: float | None = None
    cpu_kv_usage_pct: float | None = None
    prefix_cache_hit_pct: float | None = None
    external_prefix_cache_hit_pct: float | None = None
    engines_aggregated: int | None = None
    """N of an aggregated line's ``{N} Engines Aggregated: `` prefix (``--aggregate-engine-logging``, 0.11.1 on);
    None for one engine's line."""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class PreemptionEvent:
    """A per-preemption line: V0 "Sequence group X is preempted by PreemptionMode.M" or V1 "Preempted request X has
    been resumed".

    Attributes:
        kind: "preempted" (V0 warning) or "resumed" (V1 scheduler line, printed with KV connectors).
        mode: "RECOMPUTE" or "SWAP" (V0); None otherwise. cumulative: V0 total_num_cumulative_preemption.
    """

    line_no: int
    time_text: str | None
    t_s: float | None
    request_id: str
    kind: str
    mode: str | None = None
    cumulative: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class VllmLog:
    """A read log.

    Attributes:
        source: file path or "<text>". engine: "vllm", or the other engine recognised ("sglang", "tgi",
            "trtllm", "llama.cpp"), or "unknown". engine_evidence: the first line that identified it.
        version / version_source: vLLM version (printed or inferred) and how it was found.
        rules_version: the version whose ledger rules match this log (see version.py).
        total_lines, vllm_lines (lines that yielded a value), skipped_lines (everything else).
    """

    source: str
    engine: str
    engine_evidence: str | None
    version: str | None
    version_source: str
    generation: str | None
    rules_version: str | None
    rules_reason: str
    startup: StartupFacts
    stats: tuple[StatsSample, ...]
    preemptions: tuple[PreemptionEvent, ...]
    total_lines: int
    vllm_lines: int
    skipped_lines: int
    notes: tuple[str, ...] = ()
    failures: tuple[Any, ...] = ()
    """Start-up failure lines (failures.StartupFailure), in log order."""
    failure_cause: tuple[int, str] | None = None
    """(line, "ExceptionType: message") of the first exception after the first traceback: the root cause (when the
    server died while serving, the first traceback after ``serving_line``)."""
    serving_line: int | None = None
    """The first line showing the server up and serving (an API-server-ready line, a metrics line or a preemption
    line), or None: the start-up is over from here on."""
    not_a_log: str | None = None
    """What the input is when it is plainly not a log ("a CSV table (…)", "a JSON document"; not_log.py), else None."""
    cut_metrics: tuple[int, ...] = ()
    """Lines holding a metrics line ("Avg prompt throughput: …") without its Running, Waiting/Pending or GPU KV usage
    figure (cut short, as a log's last line often is, or garbled): not read, so no missing figure becomes 0."""
    failure_in_profile: tuple[int, str] | None = None
    """(line, function) of the first frame of vLLM's profile run (``profile_run``, ``determine_available_memory``,
    ``_dummy_run``, …) in the traceback that ends in ``failure_cause``, where it runs through one; else None."""
    request_errors: tuple[int, ...] = ()
    """Traceback lines of requests that failed while the server served on (a 400 for a prompt over max_model_len):
    no crash (serving_end.py)."""
    request_error_cause: tuple[int, str] | None = None
    """(line, "ExceptionType: message") of the first request error's exception."""
    excused_failures: tuple[int, ...] = ()
    """Failure lines after serving began that are no crash: the request errors' and those of an operator's stop."""
    stopped_line: int | None = None
    """The first shutdown line of a stop the operator asked for (no failure before it), else None."""
    first_line: int = 1
    """The first line of this start-up: a log holding several (restarts) is read from its last (restarts.py)."""
    last_line: int | None = None
    """The last line of this start-up where a later one follows (in ``earlier``), else None (the log's end)."""
    failure_in_graph_capture: tuple[int, str] | None = None
    """(line, function) of the first CUDA-graph capture frame (``capture_model``, ``_capture_cudagraphs``) in the
    traceback that ends in ``failure_cause``, where it runs through one (after the KV cache was sized); else None."""
    earlier: tuple[VllmLog, ...] = ()
    """The start-ups before this one in the same log, each read on its own, first first."""

    @property
    def prints_preemption_counts(self) -> bool:
        """True when some metrics line carries "Preemptions: N" (so its absence elsewhere means 0)."""
        return any(s.preemptions is not None for s in self.stats)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)
