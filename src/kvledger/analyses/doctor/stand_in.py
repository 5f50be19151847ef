"""The GPU doctor plans with when neither ``--gpu`` nor the log names one and the log prints no device total: the
device total its memory profile implies, and the catalog GPU whose measured CUDA total agrees, else a stand-in.

vLLM V1 sizes the KV cache as requested − non-KV (− the CUDA-graph estimate where it is subtracted), with requested =
device total × gpu_memory_utilization (``v1/worker/gpu_worker.py::determine_available_memory``; 0.20 on subtracts
the estimate: ``vllm_rules.subtracts_cudagraphs``). So a log that prints "Total non KV cache memory" and "Available
KV cache memory" gives the device total: (non-KV + KV [+ estimate]) ÷ utilization. Each figure is printed to 2
decimals of a GiB, so the total is known to ± (0.005 GiB × the terms) ÷ utilization. Worked: the constructed 0.11.0
H100-style log, (19.88 + 51.38) ÷ 0.9 = 79.18 GiB ± 0.011 GiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.accounting.vllm_rules import default_gpu_memory_utilization, parse_version, subtracts_cudagraphs
from kvledger.analyses.doctor.log_gpu import FA_VERSION_ARCH, gpus_holding, resolve_log_gpu
from kvledger.catalog.gpus import GpuSpec, custom_gpu
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["ProfileTotal", "log_or_profile_gpu", "profile_total", "profile_gpu", "stand_in_gpu"]

_HALF_DIGIT_BYTES = GiB / 200  # half the last printed digit of a figure printed to 2 decimals of a GiB


@dataclass(frozen=True)
class ProfileTotal:
    """The device total a memory profile implies: ``total_bytes`` (B) ± ``tolerance_bytes`` (B), and how (``how``)."""

    total_bytes: int
    tolerance_bytes: float
    how: str


def _util(settings: dict[str, Any]) -> tuple[float, str]:
    util = settings.get("gpu_memory_utilization")
    if util:
        return util, ""
    ver = settings.get("engine_version")
    util = default_gpu_memory_utilization(parse_version(ver))[0] if ver else 0.9
    return util, " (vLLM's default)"


def _estimate(log: VllmLog, settings: dict[str, Any]) -> int | None:
    """The CUDA-graph estimate subtracted from the KV budget: 0 where none is, None where that is unknown (an estimate
    printed, no line saying whether it was applied, no version)."""
    st, ver = log.startup, settings.get("engine_version")
    if st.cudagraph_estimate_bytes is None or st.cudagraph_estimate_applied is False:
        return 0 if st.cudagraph_estimate_applied is not True else None
    if st.cudagraph_estimate_applied is True:
        return st.cudagraph_estimate_bytes
    return (st.cudagraph_estimate_bytes if subtracts_cudagraphs(parse_version(ver)) else 0) if ver else None


def profile_total(log: VllmLog, settings: dict[str, Any]) -> ProfileTotal | None:
    """(non-KV + KV [+ the CUDA-graph estimate]) ÷ utilization where the log prints both memory figures; else None."""
    st = log.startup
    cg = _estimate(log, settings)
    if not st.non_kv_total_bytes or not st.available_kv_bytes or cg is None:
        return None
    util, usrc = _util(settings)
    terms = [("non-KV", st.non_kv_total_bytes, "non_kv_total_bytes"), ("KV", st.available_kv_bytes,
                                                                      "available_kv_bytes")]
    terms += [("CUDA-graph estimate", cg, "cudagraph_estimate_bytes")] if cg else []
    total = sum(b for _, b, _ in terms) / util
    tol = len(terms) * _HALF_DIGIT_BYTES / util
    parts = " + ".join(f"{n} {b / GiB:.2f}" for n, b, _ in terms)
    lines = ", ".join(str(st.lines.get(f)) for _, _, f in terms)
    how = (f"({parts} GiB, lines {lines}) ÷ gpu_memory_utilization {util:g}{usrc} = {total / GiB:.2f} GiB ± "
           f"{tol / GiB:.3f} GiB (each figure printed to 0.01 GiB)")
    return ProfileTotal(int(total), tol, how)


def _agreeing(log: VllmLog, pt: ProfileTotal) -> list[GpuSpec]:
    """The catalog GPUs whose CUDA total (over drivers, where measured) lies within the total's tolerance, of the
    architecture the log's FlashAttention version implies where it implies one."""
    return gpus_holding(pt.total_bytes, FA_VERSION_ARCH.get(log.startup.flash_attn_version or 0), pt.tolerance_bytes)


def profile_gpu(log: VllmLog, settings: dict[str, Any]) -> tuple[GpuSpec | None, str]:
    """(the one measured catalog GPU whose CUDA total agrees with the profile's total, or None; the words for the GPU
    source) for a log that names no GPU and prints no device total; (None, "") where the profile gives no total. The
    derived rows that share the total (another board of the same memory) are named beside it."""
    pt = profile_total(log, settings)
    if pt is None:
        return None, ""
    fits = _agreeing(log, pt)
    measured = [g for g in fits if g.memory_basis == "measured"]
    if len(measured) == 1:
        g = measured[0]
        others = ", ".join(o.name for o in fits if o is not g)
        return g, (f"the log names no device and prints no device total, but its memory profile gives one: {pt.how}, "
                   f"within {g.name}'s measured CUDA total ({g.memory_low_bytes / GiB:.2f}–"
                   f"{g.memory_high_bytes / GiB:.2f} GiB over drivers), the only measured one → {g.name}"
                   + (f"; the catalog gives {others} the same total (derived): --gpu if that ran" if others else
                      "; --gpu chooses another"))
    agree = (f"it agrees with the measured CUDA totals of {' and '.join(g.name for g in measured)}, which it does not "
             "tell apart" if measured else "no catalog GPU's measured CUDA total agrees with it")
    return None, (f"no --gpu and the log prints no device total; its memory profile gives one, {pt.how}, which sizes a "
                  f"stand-in GPU; {agree}: pass --gpu to compare the memory terms")


def log_or_profile_gpu(log: VllmLog, gpu: str | None, settings: dict[str, Any]) -> tuple[GpuSpec | None, str, bool]:
    """``log_gpu.resolve_log_gpu``'s (GPU, source, known); where that finds none (no device total printed), the one
    catalog GPU the memory profile's total singles out (``profile_gpu``), else None with the profile's words."""
    g, src, known = resolve_log_gpu(log, gpu)
    if g is not None:
        return g, src, known
    matched, words = profile_gpu(log, settings)
    return (matched, words, True) if matched is not None else (None, words or src, False)


def stand_in_gpu(log: VllmLog, gpu: GpuSpec | None, settings: dict[str, Any]) -> GpuSpec:
    """The GPU for plans that take the KV budget or the block count from the log: the given one, else a stand-in
    whose total is the memory profile's (``profile_total``) where the log prints it, else (available KV + weights) ÷
    utilization when the log prints them (a lower bound), else 80 GiB. Its total only picks vLLM's default batch
    limits for those plans."""
    if gpu is not None:
        return gpu
    st = log.startup
    pt = profile_total(log, settings)
    util = _util(settings)[0]
    known = (st.available_kv_bytes or 0) + (st.weights_bytes or 0)
    total = pt.total_bytes if pt else int(known / util) if known else 80 * GiB
    return custom_gpu("unknown GPU (stand-in)", min(max(total, 1 << 30), 1 << 45), 1e12, 1e14)  # custom_gpu's range
