"""The GPU of a vLLM log, for doctor: ``--gpu`` when given; else the device the log names where vLLM looked up a
tuned kernel config for it (``device_name=NVIDIA_H100_80GB_HBM3``: fused MoE, block-FP8 GEMMs), when the catalog knows
the name and its memory agrees with the log's device total; else the one catalog GPU of the log's architecture (from
its FlashAttention version) whose measured CUDA total the log's device total matches (``measured_total_device``); else a
generic GPU of the log's device total, whose own memory term (non-torch memory: NVLink, peer access) is generic."""

from __future__ import annotations

from dataclasses import replace

from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.gpus import GpuSpec, custom_gpu, gpu_catalog
from kvledger.errors import KvLedgerError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["gpu_mismatch", "measured_total_device", "named_device", "resolve_log_gpu"]

#: the architecture a FlashAttention version implies in vLLM's attention backend: 3 only on Hopper
FA_VERSION_ARCH = {3: "sm90"}


def resolve_log_gpu(log: VllmLog, name: str | None) -> tuple[GpuSpec | None, str, bool]:
    """(the GPU doctor plans with, where it came from, whether it is a known GPU: ``--gpu`` or the device the log
    names or its device total and architecture single out): ``--gpu``; else the catalog GPU of the device the log names
    (``named_device``) or of its measured device total (``measured_total_device``); else a generic GPU of the log's
    device total (its non-torch memory generic); else None."""
    if name:
        g = resolve_gpu(name)
        return g, f"--gpu {name}: {g.name}, device total {g.memory_bytes / GiB:.2f} GiB ({g.memory_source})", True
    named = named_device(log) or measured_total_device(log)
    if named is not None:
        return *named, True
    total = log.startup.total_gpu_memory_bytes
    if total:
        g = custom_gpu(f"GPU with {total / GiB:.2f} GiB", total, 1e12, 1e14)
        return g, (f"device total {total / GiB:.2f} GiB from the log ({_total_at(log)}); "
                   "no --gpu and the log names no GPU, so its non-torch memory is planned for a generic GPU (its "
                   "architecture, NVLink and peer access unknown) and its bandwidth and FLOP/s unknown; pass --gpu to "
                   "price them"), False
    return None, "no --gpu and the log prints no device total (pass --gpu to compare the memory terms)", False


def _total_at(log: VllmLog) -> str:
    """Where the log's device total was read: "line N", and what prints it where that is a CUDA out-of-memory error
    (PyTorch's "GPU 0 has a total capacity of T GiB", read where no other line prints a device total)."""
    line = log.startup.lines.get("total_gpu_memory_bytes")
    oom = any(f.line_no == line and f.kind == "cuda_oom" for f in log.failures)
    return f"line {line}" + (", the total capacity its CUDA out-of-memory error prints" if oom else "")


def _log_device(name: str | None) -> GpuSpec | None:
    """The catalog GPU of a device name the log prints, None when it prints none or the catalog does not name it."""
    if not name:
        return None
    try:
        return resolve_gpu(name)
    except KvLedgerError:
        return None


def _holds_total(g: GpuSpec, total: float, tolerance_bytes: float = GiB / 200) -> bool:
    """Whether ``g``'s measured CUDA total over drivers holds a device total (B) within ``tolerance_bytes`` (default
    ±0.005 GiB: a total printed to 2 decimals)."""
    return g.memory_low_bytes - tolerance_bytes <= total <= g.memory_high_bytes + tolerance_bytes


def gpus_holding(total: float, arch: str | None, tolerance_bytes: float = GiB / 200) -> list[GpuSpec]:
    """The catalog GPUs (of architecture ``arch``, any where None) whose CUDA total holds ``total`` (_holds_total)."""
    return [g for g in gpu_catalog().values() if (arch is None or g.arch == arch)
            and _holds_total(g, total, tolerance_bytes)]


def named_device(log: VllmLog) -> tuple[GpuSpec, str] | None:
    """The catalog GPU of the device the log names (a tuned kernel config vLLM looked up, ``device_name=…``) when the
    catalog knows the name and, where the log prints its device total, the catalog's memory agrees with it within
    0.5 GiB; planned with the log's total then (the catalog's is a datasheet or derived figure); else None."""
    st = log.startup
    g = _log_device(st.device_name)
    if g is None:  # none named, or one the catalog does not name: the generic GPU of the device total
        return None
    total = st.total_gpu_memory_bytes
    if total and abs(g.memory_bytes - total) > GiB // 2:
        return None
    where = f"the log's device total ({_total_at(log)})" if total else g.memory_source
    if total:
        g = replace(g, memory_bytes=total, memory_source=where)
    return g, (f"the log's device {st.device_name!r} (line {st.lines['device_name']}: a kernel config vLLM looked "
               f"up for it) → {g.name}, device total {g.memory_bytes / GiB:.2f} GiB ({where}); --gpu chooses another")


def measured_total_device(log: VllmLog) -> tuple[GpuSpec, str] | None:
    """The catalog GPU whose measured CUDA total (its range over drivers, ±0.005 GiB for the log's 2 decimals) holds
    the log's device total, among those of the architecture the log's FlashAttention version implies, when exactly one
    does; planned with the log's total. The derived rows that share the total (another board of the same memory) are
    named beside it. None without a total, a telling FlashAttention version, or a single match."""
    st = log.startup
    total, arch = st.total_gpu_memory_bytes, FA_VERSION_ARCH.get(st.flash_attn_version or 0)
    if not total or arch is None:
        return None
    fits = gpus_holding(total, arch)
    measured = [g for g in fits if g.memory_basis == "measured"]
    if len(measured) != 1:
        return None
    g = measured[0]
    line = _total_at(log)
    others = ", ".join(o.name for o in fits if o is not g)
    g = replace(g, memory_bytes=total, memory_source=f"the log's device total ({line})")
    return g, (f"the log names no device, but its device total {total / GiB:.2f} GiB ({line}) with FlashAttention "
               f"3 (line {st.lines['flash_attn_version']}: Hopper) is {g.name}'s measured CUDA total → {g.name}"
               + (f"; the catalog gives {others} the same total (derived): --gpu if that ran" if others else
                  "; --gpu chooses another"))


def gpu_mismatch(log: VllmLog, given: str | None, g: GpuSpec | None) -> str | None:
    """The warning when ``--gpu`` contradicts the log (None when none was given or nothing contradicts it): the device
    the log names is another catalog GPU, its device total lies outside the GPU's range over drivers (±0.005 GiB for
    the log's 2 decimals), or its FlashAttention version implies another architecture (3: Hopper only). The plan then
    takes that GPU's defaults (vLLM's batch limits, its non-torch memory), not those of the device that ran."""
    if not given or g is None:
        return None
    st, why = log.startup, []
    named = _log_device(st.device_name)
    if named is not None and named.name != g.name:
        why.append(f"the log names the device {st.device_name!r} (line {st.lines['device_name']}) → {named.name}")
    total = st.total_gpu_memory_bytes
    if total and not _holds_total(g, total):
        why.append(f"the log's device total is {total / GiB:.2f} GiB ({_total_at(log)}), "
                   f"{g.name}'s {g.memory_bytes / GiB:.2f} GiB")
    arch = FA_VERSION_ARCH.get(st.flash_attn_version or 0)
    if arch and g.arch and g.arch != arch:
        why.append(f"the log uses FlashAttention {st.flash_attn_version} (line {st.lines['flash_attn_version']}), "
                   f"which vLLM picks only on Hopper ({arch}); {g.name} is {g.arch}")
    if not why:
        return None
    return (f"--gpu {given} ({g.name}) is not the GPU this log ran on: " + "; ".join(why) + ". The ledger below "
            f"plans {g.name} (its device total, non-torch memory and vLLM's default batch limits where the log prints "
            "none), so it may not match the log's figures; drop --gpu to use the log's device")
