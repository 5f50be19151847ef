"""NCCL's start-up buffers inside vLLM's memory-profile window before 0.11: sized from NCCL's defaults, not fitted.

What the code decides (vLLM wheels): every release before 0.11 takes its baseline before the TP group is set up, so
what that set-up allocates outside torch's allocator is non-torch growth the profile deducts from the KV cache:
``worker.py::init_device`` (0.6.3, 0.6.6, 0.7.3, 0.8.5, 0.9.2) and ``v1/worker/gpu_worker.py::init_device`` (0.9.2,
0.10.2) take
``mem_get_info`` / ``MemorySnapshot()`` and only then call ``init_worker_distributed_environment``; 0.8.5's V1 worker
deducts all non-torch memory on the device. 0.11.0 moves the call above the snapshot ("This ensures NCCL buffers are
allocated before we measure available memory", ``v1/worker/gpu_worker.py::init_device``). The set-up builds, per
group of more than one GPU, a ``PyNcclCommunicator`` (``cuda_communicator.py``): ``ncclCommInitRank`` and "a small
all_reduce for warmup" (``pynccl.py``, 0.6.3–0.10.2); the world group has none (``init_world_group``,
``use_device_communicator=False``), and NVLink SHARP is off up to 0.10.0 (vLLM sets ``NCCL_CUMEM_ENABLE=0``:
``worker_base.py`` 0.6.x, ``__init__.py`` 0.7.3, ``env_override.py`` 0.8.5–0.10.0; NVLS needs cuMem).

What NCCL allocates there (its ``init.cc`` defaults; NCCL_BUFFSIZE's 4 MiB is also the documented default): one
buffer set a connection, SIMPLE ``DEFAULT_BUFFSIZE`` 4 MiB + LL 8 × 512 × 8 × 16 B = 512 KiB + LL128 120 × 640 × 8 × 8
B = 4,800 KiB = 9.1875 MiB, per channel and per receiving connection. NCCL ≤ 2.21 (torch 2.4–2.6: vLLM 0.6.3–0.8.x)
connects ring and tree for every channel at ``ncclCommInitRank``: a ring receives once a channel, an intra-node tree
(a chain) once at its ends and twice in its middle; NCCL ≥ 2.22 (torch 2.7/2.8: vLLM 0.9–0.10) connects lazily
(NCCL_RUNTIME_CONNECT), so the warm-up's one element connects the ring only. Channels: 16 on a Hopper NVSwitch board
(an H800 NCCL log, NVIDIA/nccl#892: "16 coll channels, 0 nvls channels"; NCCL's maintainers tie the count to
Hopper's 18 NVLinks, NVIDIA/nccl#1429), 8–32 in the range (32 is NCCL's MAXCHANNELS).

Where it is added: only to the figures measured on releases whose snapshot follows the set-up (the H200/B200 tables,
0.11.2+, and the H100 NVSwitch figure, 0.19), since those hold none of it. Releases before 0.6.3 were not read: planned
as 0.6.3. The ring/tree assumption for other links
(``RING_NCCL_GIB``) stands for all of NCCL at any release and is bounded by pre-0.11 prints that hold the start-up
(0.20–0.43 GiB, vllm_public_startups.csv P05, P06, P11), so nothing is added there. PP groups' communicators and
RCCL on ROCm are not sized here.
"""

from __future__ import annotations

from kvledger.catalog.gpus import GpuSpec
from kvledger.units import MiB

__all__ = ["nccl_init_in_window", "NCCL_SET_BYTES", "SNAPSHOT_AFTER_SETUP"]

SNAPSHOT_AFTER_SETUP = (0, 11, 0)
"""From this release the init snapshot follows ``init_worker_distributed_environment`` (0.11.0 gpu_worker.py)."""

NCCL_SET_BYTES = 4 * MiB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8
"""One connection's buffers, B: SIMPLE 4 MiB + LL 512 KiB + LL128 4,800 KiB (NCCL init.cc defaults) = 9.1875 MiB."""

_LAZY_NCCL_FROM = (0, 9, 0)
"""vLLM 0.9 pins torch 2.7 (NCCL 2.26, lazy connection); 0.8.5 pins torch 2.6 (NCCL 2.21, all at init)."""

_CHANNELS, _CHANNELS_LOW, _CHANNELS_HIGH = 16, 8, 32


def nccl_init_in_window(ver: tuple[int, int, int], tp: int, gpu: GpuSpec) -> tuple[int, int, int, str]:
    """NCCL start-up buffers of the TP group's communicator that vLLM ``ver``'s profile counts: (point, low, high) B
    and how; zeros from 0.11, at TP 1 and on ROCm."""
    if ver >= SNAPSHOT_AFTER_SETUP or tp == 1 or gpu.gpu_id.startswith("amd_"):
        return 0, 0, 0, ""
    if ver >= _LAZY_NCCL_FROM:
        sets, lo_sets, hi_sets = 1, 1, 2
        how = "NCCL 2.26+ connects at the warm-up all-reduce: the ring, 1 set a channel (up to 2 if a tree)"
    else:
        sets, lo_sets, hi_sets = (2 if tp == 2 else 3), 2, 3
        how = f"NCCL 2.21 connects ring + tree at init: {sets} sets a channel at TP {tp}"
    pt = _CHANNELS * sets * NCCL_SET_BYTES
    src = (f"+ NCCL start-up {pt / MiB:.0f} MiB in the window (vLLM {'.'.join(map(str, ver))} snapshots before "
           f"init_worker_distributed_environment; {how}; {_CHANNELS} channels × 9.19 MiB, NCCL defaults)")
    return pt, _CHANNELS_LOW * lo_sets * NCCL_SET_BYTES, _CHANNELS_HIGH * hi_sets * NCCL_SET_BYTES, src
