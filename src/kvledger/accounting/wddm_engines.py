"""What the Windows display driver (WDDM: Windows, and WSL2 on it) changes in vLLM's and SGLang's memory plans, each by
its engine's own code for the version planned; the whole-board total and the hold themselves are ``wddm.py``'s.

vLLM, read in the wheels. Every version's budget is ceil(total × gpu_memory_utilization) of the total CUDA reports
(V0 ``worker/worker.py``; V1 ``v1/worker/gpu_worker.py``, ``v1/worker/utils.py::request_memory``), so under WDDM a
share of the whole board. Whether memory other processes hold comes off the KV budget:

* 0.5.0–0.6.3, V0 ``worker.py::determine_num_available_blocks``: peak = free memory at the worker's start
  (``init_gpu_memory``, taken once its CUDA context exists) − free memory after the profile: no.
* 0.6.4.x, V0: torch's allocated peak + (``mem_get_info`` used − torch allocated), device-wide: yes, 1:1.
* 0.6.5–0.7.x, V0 (0.6.6, 0.7.3 read): ``memory_profiling`` against a baseline of total − ``init_gpu_memory``: no.
* 0.8.0–0.9.0, V1 ``gpu_worker.py::determine_available_memory`` (0.8.5, 0.9.0 read): ``non_torch_allocations`` =
  (total − free) − torch allocated after the profile, device-wide: yes, 1:1.
* from 0.9.1 (0.9.1, 0.9.2, 0.10.0, 0.10.2, 0.11.0, 0.19.0, 0.33.0 read): ``init_device`` takes a ``MemorySnapshot``
  and the profile counts growth since it: no. Instead ``init_device`` refuses to start when the snapshot's free memory
  is below the request: "Free memory on device ... on startup is less than desired GPU memory utilization". The
  snapshot follows the distributed init (NCCL) from 0.11.0 (0.10.2 and before: before it).

Where the hold is not counted and nothing checks (V0 but 0.6.4), the engine sizes its cache as if the board were its
own and may run out of memory allocating it or capturing graphs. SGLang (0.4.6 ``model_runner.py::
profile_max_num_token``, 0.5.23 ``mem_cache/kv_cache_configurator.py::_profile_available_bytes``): KV = free after the
load − free before it × (1 − mem_fraction_static), so the hold, in use before the load, lowers the KV by hold ×
mem_fraction_static (``plan_other.sglang_plan``).
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting import notes as N
from kvledger.accounting.memory import Deduction, StartupCheck
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.startup_free import (
    VLLM_STARTUP_CHECK_FROM,
    snapshot_free,
    vllm_snapshot_held,
    vllm_snapshot_ranks,
)
from kvledger.accounting.wddm import wddm_held_term
from kvledger.catalog.gpus import GpuSpec
from kvledger.errors import InputError

__all__ = ["check_wddm", "vllm_counts_other_processes", "vllm_startup_check", "vllm_wddm_items"]


def vllm_counts_other_processes(ver: tuple[int, int, int]) -> bool:
    """Whether this vLLM's profile counts memory other processes hold, device-wide (0.6.4.x V0, 0.8.0–0.9.0 V1)."""
    return (0, 6, 4) <= ver < (0, 6, 5) or (0, 8, 0) <= ver < VLLM_STARTUP_CHECK_FROM


def _vllm_file(ver: tuple[int, int, int]) -> str:
    """The engine file whose rule applies to ``ver``."""
    if ver < (0, 8, 0):
        return "worker/worker.py::determine_num_available_blocks"
    if ver < VLLM_STARTUP_CHECK_FROM:
        return "v1/worker/gpu_worker.py::determine_available_memory"
    return "v1/worker/gpu_worker.py::init_device"


def vllm_wddm_items(ver: tuple[int, int, int], gpu: GpuSpec) -> tuple[Deduction, ...]:
    """The hold as a KV deduction where this version counts other processes' memory (else none)."""
    if not vllm_counts_other_processes(ver):
        return ()
    held = wddm_held_term(gpu)
    return (replace(held, source=f"{held.source}; vLLM {'.'.join(map(str, ver))} counts device-wide memory outside "
                                 f"torch ({_vllm_file(ver)}), so it comes off the KV 1:1"),)


def vllm_startup_check(ver: tuple[int, int, int], gpu: GpuSpec, total: int, util: float, requested: int,
                       tp: int, pp: int = 1) -> StartupCheck | None:
    """Whether this vLLM starts with the display driver's hold in use: free = total − hold − this process's own memory
    at the snapshot (``startup_free.vllm_snapshot_held``), against ``requested`` = ceil(total × util); the largest
    utilization that starts is free ÷ total, at the point and at each end of the two terms' ranges
    (``startup_free.snapshot_free``). None where the version counts the hold in the KV instead (its budget then never
    asks for more than is free)."""
    if vllm_counts_other_processes(ver):
        return None
    held = wddm_held_term(gpu)
    own = vllm_snapshot_held(gpu, vllm_snapshot_ranks(ver, tp, pp))
    sf = snapshot_free(total, held, own)
    checks = ver >= VLLM_STARTUP_CHECK_FROM
    band = sf.band(requested)
    if band == "starts":
        verdict = "starts"
    elif band == "below_point":
        verdict = "may_refuse" if checks else "may_run_out"
    else:
        verdict = "refuses" if checks else "runs_out"
    mx = sf.max_utilizations()
    msg = N.vllm_wddm_startup(".".join(map(str, ver)), _vllm_file(ver), verdict, util, requested, total,
                              (sf.free, sf.low, sf.high), held.bytes, own.bytes, mx)
    return StartupCheck(sf.free, sf.low, sf.high, requested, *mx, verdict, msg)


def check_wddm(s: PlanSettings, gpu: GpuSpec | None) -> None:
    """Refuse --wddm where it cannot hold: a server module (SXM, OAM, superchip: the datacenter driver, never WDDM),
    or a GPU whose whole board is not in the catalog (no nvidia-smi total, and no --gpu-memory given: the plan would
    keep CUDA's Linux total, which already leaves the driver's reserve out, and deduct the hold again).

    Raises:
        InputError: one of those.
    """
    if not s.wddm or gpu is None:
        return
    if gpu.server_module:
        raise InputError(f"--wddm: the {gpu.name} is a server module ({gpu.form_factor}), which runs the datacenter "
                         f"driver on Linux, never the Windows display driver (WDDM): drop --wddm")
    if gpu.memory_basis != "given" and not gpu.nvidia_smi_mib:
        raise InputError(f"--wddm: the catalog has no nvidia-smi total for the {gpu.name}, the whole board CUDA "
                         f"reports under WDDM; the plan would deduct the driver's hold from the Linux total, which "
                         f"already leaves it out. Pass the total CUDA reports with --gpu-memory (e.g. torch's "
                         f"'total capacity' in GiB)")
