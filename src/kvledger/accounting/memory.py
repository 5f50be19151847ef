"""Engine-faithful memory plans: how vLLM, SGLang and TensorRT-LLM turn a GPU into a KV pool.

Each plan is an itemised ledger: the device total, the engine's fraction, every term it
subtracts (with its source), the KV bytes left, and the pool in blocks or tokens. Rules:
vLLM ``v1/worker/gpu_worker.py::determine_available_memory`` and ``v1/core/kv_cache_planning.py``;
SGLang ``mem_cache/kv_cache_configurator.py`` and ``arg_groups/memory_hook.py``; TensorRT-LLM
``_torch/pyexecutor/_util.py::KvCacheCreator`` (docs/engine-model.md §1, §3, §4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.units import GiB

__all__ = ["Deduction", "MemoryPlan", "StartupCheck", "sglang_mem_fraction_static", "sglang_reserved_mib"]


@dataclass(frozen=True)
class Deduction:
    """One deduction of the memory ledger (a term taken from the budget before the KV pool is sized).

    Attributes:
        name: what it is. bytes: its size, B (a term subtracted from the budget is positive here).
        source: where the number comes from (engine rule, measurement, model, user).
    """

    __json__ = ("name", "bytes", "gib", "low_bytes", "high_bytes", "source", "range_source")
    name: str
    bytes: float
    source: str
    low: float | None = None
    high: float | None = None
    range_source: str = ""
    """Why the term spans low–high (the evidence, or its absence, for this version, GPU and topology)."""

    @property
    def low_bytes(self) -> float:
        """The smallest value the evidence allows, B (the point value when the term is exact or given)."""
        return self.bytes if self.low is None else self.low

    @property
    def high_bytes(self) -> float:
        """The largest value the evidence allows, B."""
        return self.bytes if self.high is None else self.high

    @property
    def gib(self) -> float:
        """``bytes`` in GiB (2^30 B)."""
        return self.bytes / GiB

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class StartupCheck:
    """Whether vLLM starts where other memory is in use on its GPU (``plan --wddm``: the display driver's hold): the
    free memory at its start-up snapshot against what ``gpu_memory_utilization`` asks.

    Attributes:
        free_bytes / free_low_bytes / free_high_bytes: free memory at the snapshot, B: device total − the driver's hold
            − the engine process's own memory by then (each term's low/high at the ends).
        requested_bytes: ceil(total × gpu_memory_utilization), B.
        max_utilization / max_utilization_low / max_utilization_high: the largest gpu_memory_utilization that starts,
            free ÷ total at the point and at each end.
        verdict: "starts" (even at the range's low end), "may_refuse" (the point starts, the low end does not),
            "refuses" (the point does not); "may_run_out" / "runs_out" where the version has no start-up check.
        message: the sentence the plan prints.
    """

    free_bytes: float
    free_low_bytes: float
    free_high_bytes: float
    requested_bytes: int
    max_utilization: float
    max_utilization_low: float
    max_utilization_high: float
    verdict: str
    message: str

    @property
    def warns(self) -> bool:
        """True unless the engine starts even at the range's low end."""
        return self.verdict != "starts"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class MemoryPlan:
    """The KV pool one engine builds on one GPU.

    Attributes:
        engine: "vllm", "sglang" or "trtllm"; engine_version: as given or the default.
        gpu_total_bytes: device total as CUDA reports it, B.
        fraction_name / fraction: the engine's knob and its value.
        requested_bytes: what the engine may use before the KV pool (vLLM: ceil(total × util)), B.
        requested_label: how ``requested_bytes`` is obtained, for the ledger's row label; requested_source: where
            it comes from, for the row's source ("" : the fraction's engine rule).
        deductions: terms subtracted before the KV pool (weights, activation peak, ...).
        available_kv_bytes: KV bytes per GPU, B (negative: does not fit).
        available_given: True when the user passed the engine's printed figure.
        block_size: tokens per block (SGLang: page size). bytes_per_block: B per block across layers.
        num_gpu_blocks: blocks in the pool (vLLM: including the null block), count.
        usable_blocks: blocks requests can use, count. pool_tokens: token slots the engine reports.
        printed_lines: the engine's own capacity log lines for these settings.
        max_model_len, max_num_batched_tokens, max_num_seqs: the settings used.
        notes: rule choices and assumptions.
        stages: with pipeline parallelism, one summary per stage (rank, layers, each term, available KV,
            blocks, ``binds``: the stage with the fewest blocks sets the engine's pool); empty without PP.
        kv_free: the model keeps no KV cache or state of its own (a draft model whose every layer reads its
            target's cache): vLLM builds no KV cache group, skips the memory profile and gives the cache 0 bytes
            (``v1/engine/core.py : EngineCore._initialize_kv_caches``, "Attention free models"), so
            ``available_kv_bytes`` is 0 and only max_num_seqs limits concurrency.
        startup: vLLM under ``--wddm``: whether it starts with the display driver's hold in use (None otherwise).
    """

    __json__ = ("engine", "engine_version", "gpu_total_bytes", "fraction_name", "fraction", "requested_bytes",
                "deductions", "available_kv_bytes", "available_kv_gib", "available_given", "block_size",
                "bytes_per_block", "num_gpu_blocks", "usable_blocks", "pool_tokens", "printed_lines", "max_model_len",
                "max_num_batched_tokens", "max_num_seqs", "notes", "requested_label", "stages", "kv_free", "ranges",
                "startup", "check_num_gpu_blocks")
    __json_optional__ = ("startup", "check_num_gpu_blocks")
    engine: str
    engine_version: str
    gpu_total_bytes: int
    fraction_name: str
    fraction: float
    requested_bytes: int
    deductions: tuple[Deduction, ...]
    available_kv_bytes: int
    available_given: bool
    block_size: int
    bytes_per_block: int
    num_gpu_blocks: int
    usable_blocks: int
    pool_tokens: int
    printed_lines: tuple[str, ...]
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    requested_label: str = ""
    stages: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    kv_free: bool = False
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Low and high of available_kv_bytes, num_gpu_blocks, pool_tokens and max_concurrency (at max_model_len) from the
    device total's and each term's range (kvledger.accounting.kv_range); empty when not computed."""
    startup: StartupCheck | None = None
    requested_source: str = ""
    cuda_graph_max_bs: int | None = None
    """SGLang: the largest decode CUDA graph (``cuda_graph_max_bs``; None with graphs off and for other engines)."""
    check_num_gpu_blocks: int | None = None
    """vLLM V1 before 0.21 with ``--num-gpu-blocks-override``: the blocks the profiled memory holds, which its start-up
    check compares one max_model_len request with instead of the override (``advice_len.check_blocks``), count;
    None otherwise."""

    @property
    def headroom_bytes(self) -> float:
        """What the engine's budget leaves after every deduction, B (negative: the deductions alone do not fit)."""
        return self.requested_bytes - sum(d.bytes for d in self.deductions)

    @property
    def fits(self) -> bool:
        """True when the pool holds at least one block (a model without KV: when the deductions fit the budget) and the
        engine would run a request (SGLang: not when its Mamba state slots serve none, ``state_refused``)."""
        if self.kv_free:
            return self.headroom_bytes >= 0
        return self.available_kv_bytes > 0 and self.usable_blocks > 0 and not self.state_refused

    @property
    def state_refused(self) -> bool:
        """SGLang's Mamba state pool serves no request (max_running_requests 0): SGLang refuses to start."""
        return self.engine == "sglang" and self.max_num_seqs < 1

    @property
    def available_kv_gib(self) -> float:
        """``available_kv_bytes`` in GiB (2^30 B)."""
        return self.available_kv_bytes / GiB

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def sglang_reserved_mib(gpu_mem_mib: float, tp: int, chunked_prefill_size: int, cuda_graph_max_bs: int,
                        extra_mib: float = 0.0) -> float:
    """SGLang 0.5.23's reserve, MiB: 512 + 1.5·max(chunked_prefill_size, 2048) + (tp/8)·1024 + 2·cuda_graph_max_bs
    + ``extra_mib`` (DP attention's graph terms, ``dp_attention.sglang_dp_defaults``), at least 10 GiB on GPUs over
    60 GiB (``arg_groups/memory_hook.py``)."""
    reserved = 512 + 1.5 * max(chunked_prefill_size, 2048) + (tp / 8) * 1024 + 2 * cuda_graph_max_bs + extra_mib
    return max(reserved, 10 * 1024) if gpu_mem_mib > 60 * 1024 else reserved


def sglang_mem_fraction_static(gpu_mem_mib: float, tp: int, chunked_prefill_size: int,
                               cuda_graph_max_bs: int) -> tuple[float, str]:
    """SGLang's default ``mem_fraction_static`` (``arg_groups/memory_hook.py::handle_gpu_memory_settings``).

    reserved_MiB = 512 + 1.5·max(chunked_prefill_size, 2048) + (tp/8)·1024 + 2·cuda_graph_max_bs,
    at least 10 GiB on GPUs over 60 GiB; fraction = round((gpu_mem − reserved)/gpu_mem, 3).
    """
    reserved = sglang_reserved_mib(gpu_mem_mib, tp, chunked_prefill_size, cuda_graph_max_bs)
    frac = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    return (
        frac,
        f"SGLang default: round(({gpu_mem_mib:,.0f} − {reserved:,.0f} MiB reserved) / {gpu_mem_mib:,.0f} MiB, 3)",
    )


def sglang_defaults(gpu_mem_mib: float, tp: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode cuda_graph_max_bs) by GPU memory (docs/engine-model.md §3.1)."""
    gib = gpu_mem_mib / 1024
    table = [(20, 2048, 8, 8), (35, 4096, 48, 160), (60, 4096, 32, 160), (90, 8192, 256, 512), (160, 8192, 256, 512)]
    for lim, cps, bs_lo, bs_hi in table:
        if gib < lim:
            return cps, bs_lo if tp < 4 else bs_hi
    return 16384, 512


def floor_div(a: float, b: float) -> int:
    """floor(a / b) for a possibly negative budget (never below 0)."""
    return max(0, math.floor(a / b))

