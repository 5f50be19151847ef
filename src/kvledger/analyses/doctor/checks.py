"""Start-up figures a vLLM log cannot have printed: each is a clear error naming the log line and the value.

Four rules. (0) A start-up figure printed as nan or inf is no figure. (1) A per-GPU memory figure (weights,
activation peak, non-torch memory, CUDA graphs, the non-KV total, the available KV memory) cannot exceed the device's
whole memory: the total the log prints, else the ``--gpu`` given; without either, the largest per-GPU figure the
ledger accepts. (2) A setting or count the log echoes (``max_model_len``, ``gpu_memory_utilization``, block size,
batch limits, TP/PP, block count) must lie within what vLLM accepts as the ledger bounds it (``PlanSettings``' field
limits). (3) The printed block count, KV cache size and concurrency cannot exceed what the whole device holds for the
model (``check_capacity``). Any failure means the log was edited, damaged, or comes from another GPU than ``--gpu``:
the doctor stops (exit status 2) instead of comparing it.
"""

from __future__ import annotations

import re
from typing import Any

from kvledger.accounting.settings import BOUNDS
from kvledger.accounting.vllm_rules import parse_version, printed_capacity_lines
from kvledger.catalog.gpus import custom_gpu
from kvledger.errors import FormatError, InputError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["ImpossibleLogValueError", "check_log_values", "check_setting", "check_capacity", "printed_figures"]


class ImpossibleLogValueError(FormatError):
    """A start-up figure in a vLLM log that vLLM cannot have printed (see the module docstring)."""


_MEMORY = [  # (StartupFacts field, what the log calls it)
    ("weights_bytes", "model weights"), ("peak_torch_memory_bytes", "peak torch memory"),
    ("activation_peak_bytes", "activation peak"), ("non_torch_bytes", "non-torch memory"),
    ("non_kv_total_bytes", "total non-KV cache memory"), ("cudagraph_estimate_bytes", "estimated CUDA graph memory"),
    ("cudagraph_actual_bytes", "CUDA graph memory"), ("available_kv_bytes", "available KV cache memory"),
    ("requested_memory_bytes", "requested memory"),
]
_SETTINGS = [  # (StartupFacts field, PlanSettings field it becomes)
    ("max_model_len", "max_model_len"), ("gpu_memory_utilization", "gpu_memory_utilization"),
    ("max_num_batched_tokens", "max_num_batched_tokens"), ("max_num_seqs", "max_num_seqs"), ("block_size",
        "block_size"),
    ("tensor_parallel_size", "tp"), ("pipeline_parallel_size", "pp"), ("num_gpu_blocks_override",
                                                                       "num_gpu_blocks_override"),
    ("num_gpu_blocks", "num_gpu_blocks_override"),
]


def _bounds(setting: str) -> tuple[float | None, bool, float | None]:
    """(lower bound, whether it is exclusive, upper bound) of a PlanSettings field."""
    return BOUNDS.get(setting, (None, False, None))


def _fmt(value: float, setting: str) -> str:
    if setting.endswith("_bytes"):
        return f"{value / GiB:,.2f} GiB"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def check_setting(log: VllmLog, field: str, setting: str, value: float, line: int | None, what: str) -> None:
    """Raise ImpossibleLogValueError when ``value`` (read from ``line``) is outside PlanSettings' bounds of
    ``setting``."""
    lo, strict, hi = _bounds(setting)
    low = lo is not None and (value <= lo if strict else value < lo)
    if not low and (hi is None or value <= hi):
        return
    rng = (f"more than {_fmt(lo, setting)}" if strict else f"{_fmt(lo, setting)}") + (
        f" to {_fmt(hi, setting)}" if hi is not None else ""
    )
    raise ImpossibleLogValueError(log.source, f"{what} {_fmt(value, setting)} is not a value vLLM prints or accepts "
                                  f"(it takes {rng}); the log looks edited or damaged. Correct or remove that line and "
                                  f"run "
                                  "kvledger doctor again", f"line {line}" if line else None)


def check_log_values(log: VllmLog, device_total_bytes: int | None, device_source: str) -> None:
    """Raise ImpossibleLogValueError on the first figure the log cannot have printed (module docstring).

    Args:
        device_total_bytes: the device's memory, B, when known (the log's printed total wins over ``--gpu``).
        device_source: where that total comes from, for the message.
    """
    st = log.startup
    for line, label, text in st.unreadable[:1]:
        raise ImpossibleLogValueError(log.source, f"'{label}: {text}' is not a figure: vLLM prints a number there for "
                                      "a start-up that worked, and the comparison with the ledger needs it. The log "
                                      "looks edited or damaged (or the start-up computed nothing); correct or remove "
                                      "that line and run kvledger doctor again", f"line {line}")
    for field, setting in _SETTINGS:
        value = getattr(st, field)
        if value is not None:
            check_setting(log, field, setting, value, st.lines.get(field), field.replace("_", " "))
    if st.total_gpu_memory_bytes is not None:
        try:  # the GPU catalog's plausibility range for a device's memory
            custom_gpu("the log's GPU", st.total_gpu_memory_bytes, 1e12, 1e14)
        except InputError as err:
            raise ImpossibleLogValueError(
                log.source,
                f"device total {st.total_gpu_memory_bytes / GiB:,.2f} GiB: {err}; the log looks edited or damaged",
                f"line {st.lines.get('total_gpu_memory_bytes')}",
            ) from None
        device_total_bytes = st.total_gpu_memory_bytes
        device_source = f"the device total the log prints, line {st.lines.get('total_gpu_memory_bytes')}"
    for field, what in _MEMORY:
        value = getattr(st, field)
        if value is None:
            continue
        if device_total_bytes is None:
            hi = _bounds("available_kv_memory_bytes")[2]
            if value > hi:
                raise ImpossibleLogValueError(
                    log.source, f"{what} {value / GiB:,.2f} GiB is more than any GPU holds (the ledger takes up to "
                    f"{hi / GiB:,.0f} GiB per GPU): vLLM cannot have printed it. The log looks edited or damaged",
                    f"line {st.lines.get(field)}")
        elif value > device_total_bytes:
            raise ImpossibleLogValueError(
                log.source, f"{what} {value / GiB:,.2f} GiB is more than the GPU's whole memory "
                            f"({device_total_bytes / GiB:,.2f} GiB, "
                f"{device_source}): vLLM cannot have printed it on that GPU. The log looks edited or damaged, or it "
                f"comes "
                "from a larger GPU than --gpu names", f"line {st.lines.get(field)}")


def check_capacity(log: VllmLog, plan: Any, device_total_bytes: int | None, device_source: str) -> None:
    """Raise ImpossibleLogValueError when the printed block count, KV cache size or concurrency is more than the whole
    device could hold for this model: device total ÷ the ledger's bytes per block (the smallest over pipeline
    stages) blocks, printed under the version's rule (vllm_rules.printed_capacity_lines) — a bound no real start-up
    reaches, since weights and activations take their share first.

    Args:
        plan: a ledger plan for the log's model and settings (None or no layout: nothing checked).
        device_total_bytes: the device's memory, B (None: the largest per-GPU KV budget the ledger accepts).
    """
    if plan is None or plan.layout is None:
        return
    st, m = log.startup, plan.memory
    bpb = min([m.bytes_per_block] + [x["bytes_per_block"] for x in m.stages if x.get("bytes_per_block")])
    if bpb <= 0:
        return
    total = device_total_bytes or _bounds("available_kv_memory_bytes")[2]
    where = device_source if device_total_bytes else "the largest per-GPU KV budget the ledger accepts"
    n_max, ver, L = int(total // bpb), parse_version(m.engine_version), m.max_model_len
    r = plan.layout.blocks_per_request(L, plan.inflight_tokens)
    most = printed_figures(printed_capacity_lines(ver, n_max, m.block_size, len(plan.layout.groups), L, r))
    most["num_gpu_blocks"] = n_max
    for field, key, what, slack in (("num_gpu_blocks", "num_gpu_blocks", "GPU blocks", 0),
                                    ("kv_cache_tokens", "kv_cache_tokens", "GPU KV cache size (tokens)", 0),
                                    ("max_concurrency", "max_concurrency", "maximum concurrency", 0.01)):
        value = getattr(st, field)
        if value is None or key not in most or value <= most[key] + slack:
            continue
        if field == "max_concurrency" and st.concurrency_context_tokens not in (None, L):
            continue  # printed for another length than the plan's: not comparable
        raise ImpossibleLogValueError(
            log.source, f"{what} {value:,} is more than the whole GPU could hold for {plan.model.name}: "
            f"{total / GiB:,.2f} GiB ({where}) ÷ {bpb:,} B per block = {n_max:,} blocks, printed by vLLM "
            f"{m.engine_version} as at most {most[key]:,} — with every byte of the device as KV cache. vLLM cannot "
            "have printed it: the log looks edited or damaged, or --model/--gpu do not match it",
            f"line {st.lines.get(field)}")


_TOKENS = re.compile(r"GPU KV cache size: ([\d,]+) tokens")
_CONC = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")


def printed_figures(lines: tuple[str, ...] | list[str]) -> dict[str, float]:
    """The numbers in capacity lines (the ledger's or the log's): kv_cache_tokens, num_gpu_blocks, max_concurrency."""
    text = " ".join(lines)
    out: dict[str, float] = {}
    if m := _TOKENS.search(text):
        out["kv_cache_tokens"] = int(m.group(1).replace(",", ""))
    if m := re.search(r"# GPU blocks: (\d+)", text):
        out["num_gpu_blocks"] = int(m.group(1))
    if m := _CONC.search(text):
        out["max_concurrency"] = float(m.group(2))
    return out
