"""How vLLM lays out MXFP4 MoE experts on each GPU architecture: the backend's padding of the expert tensors
(``fused_moe/oracle/mxfp4.py::mxfp4_round_up_hidden_size_and_intermediate_size``) and the words the weights' source
gives it. The Marlin path (weight-only FP4, ``mxfp4.py::Mxfp4MoEMethod._should_use_marlin``, read in 0.10.1) rounds the
hidden size up to 256 and the intermediate size up to 128: vLLM takes it below sm90 (Ampere, Ada) and, in 0.10.x, on
Hopper too (torch 2.7.1 pinned fails ``is_torch_equal_or_newer("2.8.0")``); on Hopper otherwise the Triton backend
rounds the intermediate size up to 64; on Blackwell the FlashInfer TRT-LLM backend rounds both up to 256.
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.weights import Weight

__all__ = ["mxfp4_uses_marlin", "mxfp4_layout_text", "mxfp4_padded"]


def mxfp4_uses_marlin(arch: str, engine_version: tuple[int, int, int]) -> bool:
    """vLLM's MXFP4 MoE on the Marlin path: below Hopper always, on Hopper in 0.10.x (torch 2.7.1 pinned)."""
    return arch in ("sm75", "sm80", "sm86", "sm89") or (arch == "sm90" and engine_version < (0, 11, 0))


def mxfp4_layout_text(model: ModelSpec, arch: str, engine_version: tuple[int, int, int], pad_bytes: float) -> str:
    """How vLLM lays out MXFP4 experts on ``arch`` (the backend's padding, ``_mxfp4_padded``), in words with the bytes
    the padding adds per GPU."""
    h, inter = model.hidden_size, model.intermediate_size or 0
    if mxfp4_uses_marlin(arch, engine_version):
        how = (f"MXFP4 experts repacked for Marlin on {arch} (weight-only FP4, mxfp4.py _should_use_marlin: hidden "
               f"{h:,} → {-(-h // 256) * 256:,}, intermediate {inter:,} → {-(-inter // 128) * 128:,})")
    elif arch.startswith(("sm10", "sm11")):
        how = (f"MXFP4 experts in FlashInfer's TRT-LLM layout on {arch} (hidden {h:,} → {-(-h // 256) * 256:,}, "
               f"intermediate {inter:,} → {-(-inter // 256) * 256:,})")
    else:
        how = (f"MXFP4 experts in the Triton layout on {arch or 'this GPU'} (intermediate {inter:,} → "
               f"{-(-inter // 64) * 64:,})")
    return how + (f": +{pad_bytes:,.0f} B of padding per GPU" if pad_bytes else ": no padding")


def mxfp4_padded(w: Weight, model: ModelSpec, arch: str, engine_version: tuple[int, int, int] = (0, 33, 0)) -> Weight:
    """An MXFP4 expert tensor with the backend's padding (see the module docstring)."""
    h, inter = model.hidden_size, model.intermediate_size
    if not (w.expert and inter):
        return w
    blackwell = arch.startswith("sm10") or arch.startswith("sm11")
    if mxfp4_uses_marlin(arch, engine_version):
        hp, ip = -(-h // 256) * 256, -(-inter // 128) * 128
    else:
        hp = -(-h // 256) * 256 if blackwell else h
        ip = -(-inter // (256 if blackwell else 64)) * (256 if blackwell else 64)
    if w.rows == 2 * inter and w.cols == h:
        return replace(w, rows=2 * ip, cols=hp)
    if w.rows == h and w.cols == inter:
        return replace(w, rows=hp, cols=ip)
    if w.rows == 1 and w.cols == 2 * inter:
        return replace(w, cols=2 * ip)
    if w.rows == 1 and w.cols == h:
        return replace(w, cols=hp)
    return w
