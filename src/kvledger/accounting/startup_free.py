"""The free memory vLLM's start-up check sees: the device total less what its own process (and, under ``--wddm``, the
display driver) holds at the init snapshot, the band a request falls in, and the largest utilization that starts —
the arithmetic ``vllm_startup.py`` (a GPU to itself) and ``wddm_engines.py`` (the display driver's hold) share.

The rule, read in vLLM 0.19.0 (``v1/worker/gpu_worker.py::init_device``, ``v1/worker/utils.py::request_memory``,
``utils/mem_utils.py::MemorySnapshot``): the worker sets its device, runs ``init_worker_distributed_environment``
(``init_distributed_environment``, then ``ensure_model_parallel_initialized``: the TP, PP and DP groups, each with a
NCCL communicator where its world is above 1, TP with custom all-reduce buffers; a MoE model also gets the EP group,
``distributed/parallel_state.py::initialize_model_parallel``, "Don't create EP group for dense models"), then
``gc.collect()`` and ``empty_cache()``, then the snapshot: ``mem_get_info``'s free and total, device-wide, so every
process's memory counts. It raises ValueError ("Free memory on device ... on startup is less than desired GPU memory
utilization") where free < ceil(total × gpu_memory_utilization). What the process holds by then (CUDA context, NCCL
buffers) depends on driver, build and GPU, not on code, so it is measured (``VLLM_SNAPSHOT_CONTEXT_GIB``,
``VLLM_DIST_INIT_GIB``). The check exists from 0.9.1 (``VLLM_STARTUP_CHECK_FROM``); the snapshot follows the
distributed init from 0.11.0 (``VLLM_SNAPSHOT_AFTER_NCCL_FROM``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvledger.accounting.memory import Deduction
from kvledger.catalog.gpus import GpuSpec
from kvledger.units import GiB

__all__ = ["LINUX_CONTEXT_GIB", "SNAPSHOT_GPU_ID", "VLLM_DIST_INIT_GIB", "VLLM_SNAPSHOT_AFTER_NCCL_FROM",
           "VLLM_SNAPSHOT_CONTEXT_GIB", "VLLM_STARTUP_CHECK_FROM", "SnapshotFree", "snapshot_free",
           "vllm_snapshot_held", "vllm_snapshot_ranks"]

VLLM_STARTUP_CHECK_FROM = (0, 9, 1)
"""First vLLM release whose ``init_device`` refuses to start short of free memory (0.9.0's has no such check)."""

VLLM_SNAPSHOT_AFTER_NCCL_FROM = (0, 11, 0)
"""From 0.11.0 ``init_device`` takes the snapshot after ``init_worker_distributed_environment`` (0.10.2: before)."""

SNAPSHOT_GPU_ID = "nvidia_h100_sxm"
"""The GPU the vLLM start-up corpus ran on (NVIDIA-H100-80GB-HBM3, CUDA total 79.19 GiB)."""

VLLM_SNAPSHOT_CONTEXT_GIB = (0.505, 0.51, 0.515)
"""(low, point, high) GiB one vLLM process holds on an H100 at its init snapshot with no distributed group above one
GPU: the snapshot's ``cuda_memory`` (total − free; ``torch_memory`` 0.0, so all of it is the CUDA context), 0.51 GiB in
all 27 such start-ups of shared/data/vllm-startups-0.19 (vLLM 0.19.0, one H100 each; jgchn/llm-d-planner, Apache-2.0:
every TP 1 / PP 1 row of ``startups.csv``, column ``init_cuda_memory_by_rank``, "worker init memory snapshot" in the
logs, and 79.19 − 78.68 GiB in the refusal line's "Free memory on device (78.68/79.19 GiB)"). Error: none across the
start-ups; the print's half step, ±0.005 GiB, is the range. One GPU, one driver and one image: other GPUs take
``LINUX_CONTEXT_GIB``."""

VLLM_DIST_INIT_GIB = (0.92, 1.02, 1.56)
"""(low, point, high) GiB the distributed init adds per GPU before the snapshot where a TP or PP group spans more than
one GPU: ``cuda_memory`` − 0.51 in the 11 start-ups of shared/data/vllm-startups-0.19 with TP·PP > 1 (every rank of a
start-up prints the same figure): PP 2 1.43, PP 4 1.48, TP 5 1.48 (Qwen3-14B, failed later), TP 2 1.53 (Llama-3.1-8B,
Qwen2.5-7B, CodeLlama-34b), TP 4 1.55 (Llama-3.1-8B, Qwen2.5-7B), Mixtral-8x7B TP 2 2.01, Llama-4-Scout TP 4 2.07
(twice). Point: their median, 1.53; range: 1.43–2.07. The MoE models hold ~0.5 GiB more, their EP group's
communicator (``initialize_model_parallel`` creates it for MoE only); the plan does not tell them apart, so the
point errs −0.48 to −0.54 GiB for them and +0.10 for PP 2, all inside the range."""

LINUX_CONTEXT_GIB = (0.37, 0.45, 0.51)
"""(low, point, high) GiB a Linux process's CUDA context holds where an engine reads its free memory, on GPUs other
than the corpus's H100: vLLM 0.19.0's start-up snapshot on an H100, 0.51 GiB (``VLLM_SNAPSHOT_CONTEXT_GIB``); torch OOM
lines on Linux 24 GB Ada cards, "this process has Z in use" − allocated − reserved = 23.47 − 23.09 − 0.01 = 0.37
(library doc 19307273682), 23.43 − 21.44 − 1.54 = 0.45 (54765298453), 20.93 − 20.43 − 0.05 = 0.45 GiB
(54697564970). Point: their median; error: the range, 0.37–0.51 (the context grows with the GPU and the driver,
which the plan does not know)."""


def vllm_snapshot_ranks(ver: tuple[int, int, int], tp: int, pp: int = 1) -> int:
    """The GPUs whose distributed init precedes vLLM ``ver``'s snapshot: TP × PP from 0.11.0, else 1 (before it)."""
    return tp * pp if ver >= VLLM_SNAPSHOT_AFTER_NCCL_FROM else 1


def vllm_snapshot_held(gpu: GpuSpec, ranks: int) -> Deduction:
    """What vLLM's own process holds on each GPU at its init snapshot, B: the CUDA context
    (``VLLM_SNAPSHOT_CONTEXT_GIB`` on the corpus's H100, ``LINUX_CONTEXT_GIB`` elsewhere) plus, where ``ranks`` > 1,
    the distributed init's NCCL and all-reduce buffers (``VLLM_DIST_INIT_GIB``)."""
    measured = gpu.gpu_id == SNAPSHOT_GPU_ID
    ctx = VLLM_SNAPSHOT_CONTEXT_GIB if measured else LINUX_CONTEXT_GIB
    # the distributed init was measured on NVLink H100s only (NCCL's NVLS buffers, custom all-reduce's IPC buffers);
    # a GPU without them may hold far less, so elsewhere the range starts at nothing: a refusal must hold at any end
    dist = (0.0, 0.0, 0.0) if ranks == 1 else VLLM_DIST_INIT_GIB if measured else (0.0, *VLLM_DIST_INIT_GIB[1:])
    lo, pt, hi = (c + d for c, d in zip(ctx, dist))
    where = ("measured in vLLM 0.19.0's own start-ups on an H100" if measured else
             "a Linux process's CUDA context as measured (vLLM 0.19.0 on an H100, torch on 24 GB Ada cards)")
    spread = ("all 27 TP 1 start-ups print 0.51 GiB, ±0.005 the print's step" if ranks == 1 and measured else
              "the CUDA context's spread across GPUs" if ranks == 1 else
              "27 TP 1 start-ups at 0.51 GiB, 11 at TP·PP > 1 from 1.43 (PP 2) to 2.07 GiB (MoE at TP 4)" if measured
              else "the CUDA context's spread, plus the distributed init measured on NVLink H100s (0.92–1.56 GiB), "
                   "from nothing on a GPU not measured")
    return Deduction(f"vLLM's own process at its start-up snapshot (CUDA context{', NCCL' if ranks > 1 else ''})",
                     pt * GiB, where, lo * GiB, hi * GiB, f"{lo:.3f} to {hi:.3f} GiB: {spread}")


@dataclass(frozen=True)
class SnapshotFree:
    """Free memory at the start-up snapshot, B: total − each term, at the point and at each end of the terms' ranges.

    Attributes:
        total: the device total, B. free / low / high: the free memory at the point, with every term at its high end
            (low) and at its low end (high), B.
    """

    total: float
    free: float
    low: float
    high: float

    def band(self, requested: float) -> str:
        """Where ``requested`` = ceil(total × utilization) falls: "starts" (≤ the low end), "below_point" (≤ the
        point), "below_high" (≤ the high end) or "above" (more than is free at any end)."""
        if requested <= self.low:
            return "starts"
        if requested <= self.free:
            return "below_point"
        return "below_high" if requested <= self.high else "above"

    def max_utilizations(self) -> tuple[float, float, float]:
        """The largest gpu_memory_utilization that starts, free ÷ total floored to 0.001, at the point and each end."""
        return tuple(math.floor(f / self.total * 1000) / 1000 for f in (self.free, self.low, self.high))


def snapshot_free(total: float, *terms: Deduction) -> SnapshotFree:
    """``SnapshotFree`` for ``total`` less ``terms`` (what is held on the GPU by the snapshot), B."""
    return SnapshotFree(total, total - sum(t.bytes for t in terms), total - sum(t.high_bytes for t in terms),
                        total - sum(t.low_bytes for t in terms))
