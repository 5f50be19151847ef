"""The GPU of a vLLM log, for doctor: ``--gpu`` when given; else the device the log names where vLLM looked up a
tuned kernel config for it (``device_name=NVIDIA_H100_80GB_HBM3``: fused MoE, block-FP8 GEMMs), when the catalog knows
the name and its memory agrees with the log's device total; else a generic GPU of the log's device total, whose own
memory terms (non-torch memory at TP > 1: NVLink, peer access) are generic."""

from __future__ import annotations

from dataclasses import replace

from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.gpus import GpuSpec, custom_gpu
from kvledger.errors import KvLedgerError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["named_device", "resolve_log_gpu"]

def resolve_log_gpu(log: VllmLog, name: str | None) -> tuple[GpuSpec | None, str, bool]:
    """(the GPU doctor plans with, where it came from, whether it is a known GPU: ``--gpu`` or the device the log
    names): ``--gpu``; else the catalog GPU of the device the log names (``named_device``); else a generic GPU of the
    log's device total (its own terms generic); else None."""
    if name:
        g = resolve_gpu(name)
        return g, f"--gpu {name}: {g.name}, device total {g.memory_bytes / GiB:.2f} GiB ({g.memory_source})", True
    named = named_device(log)
    if named is not None:
        return *named, True
    total = log.startup.total_gpu_memory_bytes
    if total:
        g = custom_gpu(f"GPU with {total / GiB:.2f} GiB", total, 1e12, 1e14)
        return g, (f"device total {total / GiB:.2f} GiB from the log (line "
                   f"{log.startup.lines['total_gpu_memory_bytes']}); "
                   "no --gpu, so the GPU's own memory terms are generic (non-torch memory: its architecture, "
                   "NVLink and peer access) and its bandwidth and FLOP/s unknown; pass --gpu to price them"), False
    return None, "no --gpu and the log prints no device total (pass --gpu to compare the memory terms)", False


def named_device(log: VllmLog) -> tuple[GpuSpec, str] | None:
    """The catalog GPU of the device the log names (a tuned kernel config vLLM looked up, ``device_name=…``) when the
    catalog knows the name and, where the log prints its device total, the catalog's memory agrees with it within
    0.5 GiB; planned with the log's total then (the catalog's is a datasheet or derived figure); else None."""
    st = log.startup
    if not st.device_name:
        return None
    try:
        g = resolve_gpu(st.device_name)
    except KvLedgerError:  # a device the catalog does not name: the generic GPU of the device total
        return None
    total = st.total_gpu_memory_bytes
    if total and abs(g.memory_bytes - total) > GiB // 2:
        return None
    where = (f"the log's device total (line {st.lines['total_gpu_memory_bytes']})" if total else g.memory_source)
    if total:
        g = replace(g, memory_bytes=total, memory_source=where)
    return g, (f"the log's device {st.device_name!r} (line {st.lines['device_name']}: a kernel config vLLM looked "
               f"up for it) → {g.name}, device total {g.memory_bytes / GiB:.2f} GiB ({where}); --gpu chooses another")
