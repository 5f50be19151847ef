"""The Windows display driver (WDDM: Windows, and WSL2 on it): the device total CUDA reports and what the driver and
the desktop hold.

Under WDDM CUDA reports the whole board (nvidia-smi's total) as the device's memory, where the Linux driver leaves its
own reserve out of the total (``catalog/data/gpu_cuda.csv``). The memory the driver and the desktop hold is then
used memory every engine sees at start-up: it lowers the free memory TensorRT-LLM and SGLang size their pools from,
and the free memory vLLM checks ``gpu_memory_utilization × total`` against before it starts.
"""

from __future__ import annotations

from kvledger.accounting.memory import Deduction
from kvledger.accounting.startup_free import LINUX_CONTEXT_GIB
from kvledger.catalog.gpus import GpuSpec
from kvledger.units import GiB

__all__ = ["WDDM_CONTEXT_GIB", "WDDM_DEFAULT_BOARD_GIB", "WDDM_HELD_NAME", "WDDM_HOLD_FIT", "WDDM_HOLD_RANGE_GIB",
           "wddm_board_gib", "wddm_held_term", "wddm_total"]

WDDM_HOLD_FIT = (0.393, 0.0283)
"""(intercept GiB, GiB per board GiB): the memory a WDDM GPU's driver and desktop hold beyond what a Linux process
loses, hold = 0.393 + 0.0283 × the board's GiB (8 GiB → 0.62, 12 → 0.73, 16 → 0.84, 24 → 1.07, 31.84 → 1.29 GiB).
Data: benchmarks/data/wddm_holds.csv (24 public records, 14 cards from 8 to 32 GiB, Windows and WSL2; sources in
wddm_holds.SOURCES.md): hold = CUDA's whole-board total − the free memory printed at a known point (vLLM's start-up
check, a fresh torch process, a torch OOM line) − the process's torch memory − the CUDA context a Linux process shows
at that point (``WDDM_CONTEXT_GIB``, which the engines' fitted terms already hold). Fit: Theil–Sen on the board size
(``analyses/doctor/wddm_holds.fit_wddm_hold``; tests/analyses/test_wddm_holds.py re-fits it). Leave-one-card-out
error 0.21 GiB per record, 0.18 per card (bias −0.09: the busy desktops sit above the line): an absolute hold (the
median, 1.00 GiB) errs 0.48 / 0.45 GiB and a share of the board (median 5.0 %) 0.48 / 0.37 GiB, since small boards
hold a larger share (7–8 % at 8 GiB, 4 % at 32). TensorRT-LLM's TR03 (RTX 5090, WSL2) is not in the data."""

WDDM_HOLD_RANGE_GIB = (-0.30, 1.70)
"""The hold's low/high as offsets from the fitted line, GiB: the corpus residuals run from −0.28 (W03, an RTX 3090
rig) to +1.68 (W09, an RTX 5090 desktop whose browser and compositor held 3.4 GiB), rounded outward; the context's
range (``WDDM_CONTEXT_GIB``) moves every record by −0.06 to +0.08 GiB within it."""

WDDM_CONTEXT_GIB = LINUX_CONTEXT_GIB
"""(low, point, high) GiB a Linux process's CUDA context holds where the corpus reads its free memory, subtracted from
each record so the hold is what WDDM adds: ``startup_free.LINUX_CONTEXT_GIB`` (0.37, 0.45, 0.51: vLLM 0.19.0's start-up
check on an H100 at TP 1, 79.19 − 78.68 = 0.51 GiB, shared/data/vllm-startups-0.19; torch OOM lines on Linux 24 GB Ada
cards, 0.37, 0.45 and 0.45 GiB). Point: their median. The same figure is what vLLM's own process holds at its
start-up snapshot on a GPU other than the corpus's H100 (``startup_free.vllm_snapshot_held``), so a --wddm plan gives
back each record's free memory from the fitted hold."""

WDDM_DEFAULT_BOARD_GIB = 24.0
"""The board a hold is sized for when no GPU is given, GiB: the corpus's median board (23.99–24.00 GiB cards)."""

WDDM_HELD_NAME = "held by the display driver (WDDM: Windows, WSL2)"


def wddm_board_gib(gpu: GpuSpec | None) -> float:
    """The whole board CUDA reports under WDDM, GiB: nvidia-smi's total (or the given memory); the corpus's median
    board when no GPU, or none of those, is known."""
    if gpu is None:
        return WDDM_DEFAULT_BOARD_GIB
    if gpu.memory_basis != "given" and gpu.nvidia_smi_mib:
        return gpu.nvidia_smi_mib * 2**20 / GiB
    return gpu.memory_bytes / GiB if gpu.memory_basis == "given" else WDDM_DEFAULT_BOARD_GIB


def wddm_held_term(gpu: GpuSpec | None = None) -> Deduction:
    """The WDDM display driver's and desktop's hold on ``gpu`` (``WDDM_HOLD_FIT`` at its board size, with
    ``WDDM_HOLD_RANGE_GIB``) as a deduction: device-wide used memory."""
    board = wddm_board_gib(gpu)
    pt = WDDM_HOLD_FIT[0] + WDDM_HOLD_FIT[1] * board
    lo, hi = (max(0.0, pt + WDDM_HOLD_RANGE_GIB[0]), pt + WDDM_HOLD_RANGE_GIB[1])
    return Deduction(WDDM_HELD_NAME, pt * GiB,
                     f"fit: {WDDM_HOLD_FIT[0]} + {WDDM_HOLD_FIT[1]} × {board:.2f} GiB board (24 public Windows/WSL2 "
                     f"records of 14 cards from 8 to 32 GiB; leave-one-card-out ±0.21 GiB)", lo * GiB, hi * GiB,
                     f"{lo:.2f} to {hi:.2f} GiB (the records' spread about the fit: a busy desktop holds up to "
                     f"+1.7 GiB more)")


def wddm_total(gpu: GpuSpec, wddm: bool) -> tuple[int, int, int]:
    """The device total an engine sees, with its low/high, B: CUDA's (gpu_cuda.csv), or under WDDM (Windows, WSL2)
    the whole board nvidia-smi shows, which CUDA reports there (unless the memory was given)."""
    if wddm and gpu.nvidia_smi_mib and gpu.memory_basis != "given":
        board = gpu.nvidia_smi_mib * 2**20
        return board, board, board
    return gpu.memory_bytes, gpu.memory_low_bytes, gpu.memory_high_bytes
