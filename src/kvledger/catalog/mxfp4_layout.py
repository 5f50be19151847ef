"""How vLLM lays out MXFP4 MoE experts on each GPU architecture: the backend's padding of the expert tensors
(``fused_moe/oracle/mxfp4.py::mxfp4_round_up_hidden_size_and_intermediate_size``) and the words the weights' source
gives it. The Marlin path (weight-only FP4, ``mxfp4.py::Mxfp4MoEMethod._should_use_marlin``, read in 0.10.1) rounds the
hidden size up to 256 and the intermediate size up to 128: vLLM takes it below sm90 (Ampere, Ada) and, up to 0.10.1.x,
on Hopper too (the wheel pins torch 2.7.1, which fails ``is_torch_equal_or_newer("2.8.0")``); on Hopper otherwise the
Triton backend rounds the intermediate size up to 64; on Blackwell the FlashInfer TRT-LLM backend rounds both up to 256.
From 0.10.2 (the wheel pins torch 2.8.0) Hopper takes Triton when the optional ``triton_kernels`` package is installed,
else Marlin (``mxfp4.py::get_mxfp4_backend``, read in 0.10.2 and 0.11.0; the package is no dependency of either
wheel): Triton is the point, as from 0.11, and the Marlin layout the weights' high end (``mxfp4_marlin_fallback``).
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.weights import Weight

__all__ = ["HOPPER_TRITON_FROM", "mxfp4_uses_marlin", "mxfp4_marlin_fallback", "mxfp4_layout_text", "mxfp4_padded"]

HOPPER_TRITON_FROM = (0, 10, 2)
"""First release whose wheel pins torch 2.8.0 (``Requires-Dist: torch==2.8.0``; 0.10.1.1 pins 2.7.1), so that
``get_mxfp4_backend`` can pick the Triton backend on Hopper (with ``triton_kernels`` installed)."""

MARLIN_FALLBACK_READ = ((0, 10, 2), (0, 11, 0))
"""Releases read whose Hopper backend choice hinges on the optional ``triton_kernels`` package (``get_mxfp4_backend``:
``not has_triton_kernels()`` → Marlin); later releases not read for it keep the Triton layout alone."""


def mxfp4_uses_marlin(arch: str, engine_version: tuple[int, int, int]) -> bool:
    """vLLM's MXFP4 MoE on the Marlin path: below Hopper always, on Hopper before 0.10.2 (torch 2.7.1 pinned)."""
    return arch in ("sm75", "sm80", "sm86", "sm89") or (arch == "sm90" and engine_version < HOPPER_TRITON_FROM)


def mxfp4_marlin_fallback(arch: str, engine_version: tuple[int, int, int]) -> bool:
    """True where vLLM takes the Triton layout only if ``triton_kernels`` is installed and Marlin otherwise (Hopper,
    ``MARLIN_FALLBACK_READ``): the Marlin layout is then the other end of the weights' range."""
    lo, hi = MARLIN_FALLBACK_READ
    return arch == "sm90" and lo <= engine_version <= hi


_STEPS = {"marlin": (256, 128), "flashinfer_trtllm": (256, 256), "flashinfer_cutlass": (128, 128), "triton": (1, 64)}
"""(hidden, intermediate) round-up steps of each backend's expert tensors (``mxfp4.py::Mxfp4MoEMethod.create_weights``
read in 0.10.2, 0.11.0 and 0.18.0; 0.19.0 ``oracle/mxfp4.py::mxfp4_round_up_hidden_size_and_intermediate_size``)."""
_WORDS = {"marlin": "repacked for Marlin", "flashinfer_trtllm": "in FlashInfer's TRT-LLM layout",
          "flashinfer_cutlass": "in FlashInfer's CUTLASS layout", "triton": "in the Triton layout"}


def _backend(arch: str, engine_version: tuple[int, int, int], backend: bool | str | None) -> str:
    """The backend whose layout applies: ``backend`` as named, True/False Marlin or not, None the version's point."""
    if isinstance(backend, str):
        return backend
    if backend or (backend is None and mxfp4_uses_marlin(arch, engine_version)):
        return "marlin"
    return "flashinfer_trtllm" if arch.startswith(("sm10", "sm11")) else "triton"


def mxfp4_layout_text(model: ModelSpec, arch: str, engine_version: tuple[int, int, int], pad_bytes: float,
                      parts: int = 1, backend: str | None = None) -> str:
    """How vLLM lays out MXFP4 experts on ``arch`` (the backend's padding, ``mxfp4_padded``), in words with the bytes
    the padding adds per GPU; ``parts``: the TP ranks the intermediate dimension is split over (each rank's share
    padded); ``backend``: the backend's name (None: the version's point)."""
    h, share = model.hidden_size, -(-(model.intermediate_size or 0) // parts)
    what = f"intermediate {share:,}" + (f" per rank (1/{parts})" if parts > 1 else "")
    name = _backend(arch, engine_version, backend)
    hs, is_ = _STEPS[name]
    hidden = f"hidden {h:,} → {-(-h // hs) * hs:,}, " if hs > 1 else ""
    how = f"MXFP4 experts {_WORDS[name]} on {arch or 'this GPU'} ({hidden}{what} → {-(-share // is_) * is_:,})"
    return how + (f": +{pad_bytes:,.0f} B of padding per GPU" if pad_bytes else ": no padding")


def mxfp4_padded(w: Weight, model: ModelSpec, arch: str, engine_version: tuple[int, int, int] = (0, 33, 0),
                 marlin: bool | str | None = None, parts: int = 1) -> Weight:
    """An MXFP4 expert tensor with the backend's padding (see the module docstring); ``marlin``: force the Marlin
    layout (True) or not (False), or name the backend (``_STEPS``), instead of the version's point. ``parts``: the TP
    ranks the experts' intermediate dimension is split over (1 under expert parallelism, experts whole): the backend
    rounds each rank's share up, not the whole (``mxfp4.py::Mxfp4MoEMethod.create_weights`` pads
    ``intermediate_size_per_partition``, read in 0.10.1, 0.11.0 and 0.11.2), so the tensor returned is ``parts`` × the
    padded share."""
    h, inter = model.hidden_size, model.intermediate_size
    if not (w.expert and inter):
        return w
    hs, is_ = _STEPS[_backend(arch, engine_version, marlin)]
    share = -(-inter // parts)
    hp, ip = -(-h // hs) * hs, parts * (-(-share // is_) * is_)
    if w.rows == 2 * inter and w.cols == h:
        return replace(w, rows=2 * ip, cols=hp)
    if w.rows == h and w.cols == inter:
        return replace(w, rows=hp, cols=ip)
    if w.rows == 1 and w.cols == 2 * inter:
        return replace(w, cols=2 * ip)
    if w.rows == 1 and w.cols == h:
        return replace(w, cols=hp)
    return w
