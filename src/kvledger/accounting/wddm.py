"""The Windows display driver (WDDM: Windows, and WSL2 on it): the device total CUDA reports and what the driver and
the desktop hold.

Under WDDM CUDA reports the whole board (nvidia-smi's total) as the device's memory, where the Linux driver leaves its
own reserve out of the total (``catalog/data/gpu_cuda.csv``). The memory the driver and the desktop hold is then
used memory every engine sees at start-up: it lowers the free memory TensorRT-LLM and SGLang size their pools from,
and the free memory vLLM checks ``gpu_memory_utilization × total`` against before it starts.
"""

from __future__ import annotations

from kvledger.accounting.memory import Deduction
from kvledger.catalog.gpus import GpuSpec
from kvledger.units import MiB

__all__ = ["WDDM_HELD_MIB", "WDDM_HELD_NAME", "wddm_held_term", "wddm_total"]

WDDM_HELD_MIB = (300.0, 450.0, 1536.0)
"""(low, point, high) MiB the display driver holds on a WDDM GPU (Windows, WSL2), where CUDA reports nvidia-smi's
whole board as its total. On Linux the driver's reserve is left out of CUDA's total instead: nvidia-smi − CUDA total =
430 (T4, RTX 3090), 316–483 (RTX 4090), 316 (A10), 420–512 (A100 40GB), 439–469 (H100), 768 (A100 80GB) MiB
(catalog/data/gpus.SOURCES.md, the 450 MiB rule of gpu_cuda.csv); under WDDM the same hold counts as used memory. Point
450 MiB and low 300 MiB as that rule; high 1.5 GiB: a desktop's own windows and applications add to it (unmeasured,
assumed)."""

WDDM_HELD_NAME = "held by the display driver (WDDM: Windows, WSL2)"


def wddm_held_term(gpu: GpuSpec | None = None) -> Deduction:
    """The WDDM display driver's hold (``WDDM_HELD_MIB``) on ``gpu`` as a deduction: device-wide used memory."""
    lo, pt, hi = (m * MiB for m in WDDM_HELD_MIB)
    return Deduction(WDDM_HELD_NAME, pt,
                     "catalog: the nvidia-smi − CUDA total gap Linux leaves out (gpus.SOURCES.md), used memory under "
                     "WDDM", lo, hi, "300 MiB to 1.5 GiB (the smallest Linux gap; a desktop's windows, assumed)")


def wddm_total(gpu: GpuSpec, wddm: bool) -> tuple[int, int, int]:
    """The device total an engine sees, with its low/high, B: CUDA's (gpu_cuda.csv), or under WDDM (Windows, WSL2)
    the whole board nvidia-smi shows, which CUDA reports there (unless the memory was given)."""
    if wddm and gpu.nvidia_smi_mib and gpu.memory_basis != "given":
        board = gpu.nvidia_smi_mib * MiB
        return board, board, board
    return gpu.memory_bytes, gpu.memory_low_bytes, gpu.memory_high_bytes
