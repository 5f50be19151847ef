"""``--gemm-efficiency`` as it applies to a run: the flag, the GPU profile's mode, and the GPU's measured matmul
efficiency curve (``kvledger.accounting.gemm_efficiency``); apart from ``step_cost_choice`` to keep it small."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["carried", "gemm_mode", "gemm_curve_of", "layer_kernels_words", "carried_terms", "carried_words"]


def carried(a: Any) -> bool:
    """``--gemm-efficiency carried``: price the GPU as if nobody had profiled it (``carried_kernels``)."""
    return getattr(a, "gemm_efficiency", None) == "carried"


def gemm_mode(a: Any, prof) -> str:
    """``--gemm-efficiency`` as it applies: the flag, else the GPU profile's mode (a profile's FLOP fraction means
    something only with the curve it was fitted with), else "flat" when ``--achievable-flops-fraction`` is given (a
    share of peak, as its help says, not a scale on a curve the user did not ask for), else "measured"
    (``gemm_curve_of`` falls back to flat on a GPU nobody profiled).

    "carried" prices any GPU as if nobody had profiled it (flat matmuls, the layer-kernel floors and bandwidth share
    carried from the other profiled GPUs: ``carried_kernels``), so no GPU profile may price it.

    Raises:
        InputError: an unknown mode, a mode other than the one the GPU profile was fitted with, carried with a profile.
    """
    from kvledger.accounting.gemm_efficiency import GEMM_MODES

    mode = getattr(a, "gemm_efficiency", None)
    if mode is not None and mode not in GEMM_MODES:
        raise InputError(f"--gemm-efficiency {mode!r}: choose {' or '.join(GEMM_MODES)}")
    have = getattr(prof, "gemm_efficiency", "flat") if prof is not None else None
    if mode == "carried" and have is not None:
        raise InputError(f"--gemm-efficiency carried prices the GPU as if nobody had profiled it, but a GPU profile "
                         f"prices this run ({prof.label}): add --gpu-profile none")
    if mode is not None and have is not None and mode != have:
        raise InputError(f"--gemm-efficiency {mode}, but the GPU profile pricing this run ({prof.label}) was fitted "
                         f"with {have} matmul efficiency, so its FLOP fraction means another thing: pass "
                         f"--gemm-efficiency {have}, --gpu-profile none, or a profile fitted with `kvledger calibrate "
                         f"--scope gpu --gemm-efficiency {mode}`")
    if mode is None and have is None and getattr(a, "achievable_flops_fraction", None) is not None:
        return "flat"
    return mode or have or "measured"


def gemm_curve_of(a: Any, gpu, prof):
    """The GPU's measured matmul-efficiency curve when the mode is "measured" and Vidur profiled the GPU, else None."""
    if gemm_mode(a, prof) != "measured":
        return None
    from kvledger.accounting.gemm_efficiency import gemm_curve

    return gemm_curve(gpu.gpu_id)


def layer_kernels_words(lk: Any) -> str:
    """The layer-kernel term (``layer_kernels.LayerKernels``) in words, with its floors' source and error."""
    from kvledger.accounting.layer_kernels import kernel_words

    bw = "the faster of the bandwidth share and the profiles' own" if lk.fit.bytes_at_fit else "the bandwidth share"
    return (f"; then each layer's {kernel_words(lk.ops)} kernels, max(floor, activation bytes at {bw}) "
            f"({lk.step_s(1) * 1e3:.2f} ms a step at 1 token): floors from {lk.fit.source}, "
            f"per-layer sum off by {lk.fit.loso_median:.1%} leaving a shape out (median)")


def carried_terms(a: Any, gpu, prof) -> dict[str, Any]:
    """The roofline's ``carried_fit`` where the measured pricing (the default) meets a GPU without measured tables:
    the layer-kernel floors carried from the profiled GPUs (``accounting/carried_kernels.py``); {} otherwise (flat
    mode, as on a profiled GPU, has no floors); with ``--gemm-efficiency carried`` on any GPU, the floors carried from
    the other profiled GPUs as if nobody had profiled it."""
    mode = gemm_mode(a, prof)
    if mode not in ("measured", "carried"):
        return {}
    from kvledger.accounting.carried_kernels import carried_layer_kernel_fit

    fit = carried_layer_kernel_fit(gpu.gpu_id, as_unprofiled=mode == "carried")
    return {} if fit is None else {"carried_fit": fit}


def carried_words(cost: Any, gpu, a: Any) -> str:
    """The carried terms of an uncalibrated roofline in words, each after "; ": the layer-kernel floors carried from
    the profiled GPUs, and the bandwidth share (a GPU's measured one, or the default said as such) unless given."""
    from kvledger.accounting.carried_kernels import bandwidth_words
    from kvledger.accounting.layer_kernels import kernel_words

    lk, out = getattr(cost, "layer_kernels", None), ""
    if lk is not None and lk.fit is getattr(cost, "carried_fit", None):
        out += (f"; each layer's {kernel_words(lk.ops)} kernels at their floors ({lk.step_s(1) * 1e3:.2f} ms a step "
                f"at 1 token): {lk.fit.source}")
    words = "" if getattr(a, "achievable_bandwidth_fraction", None) is not None else bandwidth_words(
        gpu, cost.bandwidth_fraction, carried(a))
    return out + (f"; {words}" if words else "")
