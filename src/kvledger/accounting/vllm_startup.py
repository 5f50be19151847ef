"""vLLM's start-up free-memory check on a GPU it has to itself: whether ``gpu_memory_utilization`` asks for more than is
free once the engine's own process holds its CUDA context (under ``--wddm``, ``wddm_engines.vllm_startup_check``).

Read in the wheels. From 0.9.1 (0.9.1, 0.10.0, 0.19.0 read; 0.19.0 in ``v1/worker/utils.py::request_memory``)
``v1/worker/gpu_worker.py::init_device`` takes a snapshot of the device and raises "Free memory on device ... on
startup is less than desired GPU memory utilization" when its free memory is below total × gpu_memory_utilization
(ceil from 0.19). The snapshot follows the CUDA context (and from 0.11.0 the distributed init), so the free memory is
never the whole total: 1.0 never starts, and the largest utilization that does is free ÷ total (``startup_free.py``:
the rule as read in 0.19.0, and what vLLM's process holds by then, measured in vLLM 0.19.0's own start-ups: 0.51 GiB
on an H100 at TP 1). 0.5.0–0.9.0 (0.6.3, 0.8.5, 0.9.0 read: ``worker/worker.py::determine_num_available_blocks``,
``v1/worker/gpu_worker.py::determine_available_memory``) check nothing at start-up: their budget is total ×
utilization less the profile, so a utilization above what is free leaves the cache allocation or the CUDA-graph
capture short (a warning, not a refusal).
"""

from __future__ import annotations

from kvledger.accounting.memory import StartupCheck
from kvledger.accounting.startup_free import (
    VLLM_STARTUP_CHECK_FROM,
    snapshot_free,
    vllm_snapshot_held,
    vllm_snapshot_ranks,
)
from kvledger.catalog.gpus import GpuSpec
from kvledger.errors import DoesNotFitError
from kvledger.units import GiB

__all__ = ["require_vllm_starts", "vllm_startup_alone"]

_RULE = ("vLLM {ver} refuses to start when the free memory at its start-up snapshot is below ceil(total × "
         "gpu_memory_utilization) (v1/worker/gpu_worker.py::init_device: \"Free memory on device ... on startup is "
         "less than desired GPU memory utilization\")")


def vllm_startup_alone(ver: tuple[int, int, int], gpu: GpuSpec, total: int, util: float, requested: int,
                       tp: int, pp: int = 1) -> StartupCheck | None:
    """Whether this vLLM starts on a GPU nothing else uses: free = total − this process's own memory at the snapshot
    (``startup_free.vllm_snapshot_held``: CUDA context, NCCL from 0.11.0), against ``requested`` = ceil(total × util),
    B. None where it starts even with the most that process may hold; else verdict "refuses" (the whole range fails, a
    version with the check), "may_refuse" (inside the range) or "may_run_out" (a version without it)."""
    ranks = vllm_snapshot_ranks(ver, tp, pp)
    own = vllm_snapshot_held(gpu, ranks)
    sf = snapshot_free(total, own)
    band = sf.band(requested)
    if band == "starts":
        return None
    checks = ver >= VLLM_STARTUP_CHECK_FROM
    verdict = ("refuses" if band == "above" else "may_refuse") if checks else "may_run_out"
    mx = sf.max_utilizations()
    vtxt = ".".join(map(str, ver))
    frees = (f"free at start-up {total / GiB:.2f} GiB total − {own.bytes / GiB:.2f} GiB this process holds by the "
             f"snapshot (CUDA context{', NCCL' if ranks > 1 else ''}: {own.source}; "
             f"{own.range_source}) = {sf.free / GiB:.2f} GiB ({sf.low / GiB:.2f}–{sf.high / GiB:.2f})")
    asks = f"gpu_memory_utilization {util:g} asks {requested / GiB:.2f} GiB"
    largest = (f"the largest gpu_memory_utilization that starts is free ÷ total = {mx[0]:.3f} ({mx[1]:.3f}–"
               f"{mx[2]:.3f}): --gpu-memory-utilization {mx[1]:.3f} starts even at the low end")
    if verdict == "refuses":
        msg = f"does not start: {_RULE.format(ver=vtxt)}; {asks}, more than is free at any end of the range: {frees}; "
    elif verdict == "may_refuse":
        msg = (f"warning: {asks}; {frees}: inside that range, so vLLM {vtxt} may refuse to start ("
               f"{_RULE.format(ver=vtxt)}); ")
    else:
        largest = f"up to {mx[0]:.3f} ({mx[1]:.3f}–{mx[2]:.3f}) asks no more than is free"
        msg = (f"warning: {asks}; {frees}: more than may be free, and vLLM {vtxt} has no start-up check (from 0.9.1), "
               f"so its cache allocation or CUDA-graph capture may run out of memory; ")
    return StartupCheck(sf.free, sf.low, sf.high, requested, *mx, verdict, msg + largest)


def require_vllm_starts(check: StartupCheck | None) -> None:
    """Refuse a plan vLLM would refuse to start (``vllm_startup_alone``'s "refuses").

    Raises:
        DoesNotFitError: exit 3, with the engine's rule, the free memory assumed and the largest utilization that
            starts.
    """
    if check is not None and check.verdict == "refuses":
        raise DoesNotFitError(check.message)
