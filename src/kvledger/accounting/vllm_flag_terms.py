"""What three vLLM flags change in the non-torch term, version by version, read in the wheels (issue 20's trial).

``--disable-custom-all-reduce`` removes custom all-reduce's buffers, and only those the version's profile counts
(``ca_bytes_in_window``): every vLLM allocates them when the TP group is set up
(``init_worker_distributed_environment``), and whether that falls inside the measured window depends on where the
version takes its baseline. Nothing else follows from the code: NCCL and symmetric memory (0.11+) are set up in
``CudaCommunicator.__init__`` whether custom all-reduce is on or off (0.19.0 ``cuda_communicator.py``), the FlashInfer
all-reduce fusion does not look at it (``config/vllm.py::enable_allreduce_rms_fusion``), NCCL's ring is connected by
``PyNcclCommunicator``'s warm-up all-reduce at init ("A small all_reduce for warmup", ``pynccl.py``, 0.6.3–0.19.0),
and the profile run's all-reduces (``max_num_batched_tokens × hidden`` elements, above the 8 MiB ``max_size``) go
through NCCL with it on or off.

``--enforce-eager`` from 0.18 (``enforce_eager_term``) and ``--distributed-executor-backend`` (``executor_note``).
"""

from __future__ import annotations

from kvledger.units import MiB

__all__ = ["ca_bytes_in_window", "executor_note", "eager_source"]

_CA_RANK_DATA = 8 * MiB
"""``rank_data``: a torch tensor of 8 MiB (``custom_all_reduce.py``, 0.6.3–0.19.0)."""


def ca_bytes_in_window(ver: tuple[int, int, int], max_size: int) -> tuple[int, str]:
    """Custom all-reduce bytes one GPU's profile deducts, B, and the code that decides, given its ``max_size``.

    The buffers: ``meta`` (``meta_size() + max_size``, a few KiB over max_size), ``buffer`` (``max_size``), both
    ``cudaMalloc``'d from 0.6.4 (``create_shared_buffer``; torch tensors in 0.6.3), and ``rank_data`` (8 MiB, torch).
    """
    both, ca = 2 * max_size, 2 * max_size + _CA_RANK_DATA
    if ver >= (0, 11, 0):
        return 0, ("allocated in init_worker_distributed_environment before the init memory snapshot "
                   "(v1/worker/gpu_worker.py::init_device, 0.11.0–0.20.0), so outside the profile: nothing comes off")
    if (0, 9, 0) <= ver or (0, 7, 0) <= ver < (0, 8, 0):
        return both, (f"the baseline snapshot precedes init_worker_distributed_environment (gpu_worker.py 0.9.2, "
                      f"0.10.2; worker.py 0.7.3), so the cudaMalloc'd meta + buffer ({both / MiB:.0f} MiB) are "
                      "non-torch growth; rank_data is torch memory held before the profile, outside its peak increase")
    if (0, 8, 0) <= ver:
        how = "v1/worker/gpu_worker.py 0.8.5 deducts all non-torch memory on the device + the torch peak"
    elif (0, 6, 4) <= ver < (0, 6, 5):
        how = "worker.py 0.6.4.post1 deducts all non-torch memory on the device + the torch peak"
    else:
        how = "worker.py 0.6.3 and 0.6.6 deduct the device's growth from before init_distributed_environment"
    return ca, f"{how}, so meta + buffer + rank_data ({ca / MiB:.0f} MiB) count"


def eager_source(pre_source: str) -> str:
    """The non-torch source under ``--enforce-eager`` from 0.18, around the pre-0.18 term's own source."""
    return (f"--enforce-eager: {pre_source}. Why: vLLM ≥0.18 sets compilation mode and cudagraph_mode to NONE "
            "(config/vllm.py) and determine_available_memory skips profile_cudagraph_memory (gpu_worker.py "
            "0.18.0/0.19.0; 0.20.0 skips it on cudagraph_mode NONE), so the window holds what it held before 0.18 "
            "(no captures; nor the torch.compile that pre-0.18 windows held)")


def executor_note(ver: tuple[int, int, int], backend: str | None, pp: int) -> str | None:
    """The ledger note for ``--distributed-executor-backend``: what it changes in the memory terms (None: not given)."""
    if backend is None:
        return None
    vtxt = ".".join(map(str, ver))
    if ver < (0, 8, 0):
        how = ("both keep the driver worker (rank 0) in the engine process and start one worker process per other GPU "
               "(executor/ray_gpu_executor.py, multiproc_gpu_executor.py, 0.6.3); each worker profiles its own GPU")
    else:
        how = ("with ray every worker is a Ray actor (VLLM_USE_RAY_SPMD_WORKER, ray_distributed_executor.py "
               "0.8.5/0.11.0; v1/executor/ray_executor.py 0.19.0) and profiles its own GPU as an mp worker does")
        if backend == "ray" and pp > 1:
            how += ("; with PP the Ray compiled graph's channel (VLLM_USE_RAY_COMPILED_DAG_CHANNEL_TYPE, NCCL by "
                    "default) is built at the first step (forward_dag is None), after the KV pool is sized: outside "
                    "the plan, in the headroom above gpu_memory_utilization")
    same = "custom all-reduce and NCCL decide by topology, not by executor (custom_all_reduce.py)"
    if backend == "mp" and (0, 11, 1) <= ver < (0, 33, 0):  # vllm_custom_ar.NNODES_CA_OFF_UNTIL
        same += ("; across nodes mp is vLLM's --nnodes mode, which turns custom all-reduce off (config/parallel.py "
                 "ParallelConfig._verify_args, 0.11.1, 0.19.0 and 0.26.0)")
    return f"{backend}: no memory term changes in vLLM {vtxt} — {how}; {same}"
