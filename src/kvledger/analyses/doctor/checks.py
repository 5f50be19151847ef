"""Start-up figures a vLLM log cannot have printed: each is a clear error naming the log line and the value.

Two rules. (1) A per-GPU memory figure (weights, activation peak, non-torch memory, CUDA graphs, the non-KV total,
the available KV memory) cannot exceed the device's whole memory: the total the log prints, else the ``--gpu``
given; without either, the largest per-GPU figure the ledger accepts. (2) A setting or count the log echoes
(``max_model_len``, ``gpu_memory_utilization``, block size, batch limits, TP/PP, block count) must lie within what
vLLM accepts as the ledger bounds it (``PlanSettings``' field limits). Either failure means the log was edited,
damaged, or comes from another GPU than ``--gpu``: the doctor stops (exit status 2) instead of comparing it.
"""

from __future__ import annotations

from kvledger.accounting.settings import BOUNDS
from kvledger.catalog.gpus import custom_gpu
from kvledger.errors import FormatError, InputError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["ImpossibleLogValueError", "check_log_values", "check_setting"]


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
