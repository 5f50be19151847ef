"""Whether vLLM runs its custom all-reduce, and how large its buffers are: the topology's checks and the engine's own.

The topology (``distributed/device_communicators/custom_all_reduce.py :: CustomAllreduce.__init__``, read in 0.6.3,
0.8.5, 0.10.1, 0.11.0 and 0.19.0): off at TP 1, under ``--disable-custom-all-reduce``, when the TP group spans nodes
(``in_the_same_node_as``), at a world size other than 2, 4, 6 or 8, above 2 GPUs without all-to-all links
(``is_fully_connected``) and without CUDA peer access (``_can_p2p``; skipped on ROCm).

Before that, the engine may switch it off for the whole deployment (``engine_disables_ca``): ``ParallelConfig``
sets ``disable_custom_all_reduce = True`` and the worker calls ``set_custom_all_reduce(False)``, so no TP group
builds one (``gpu_worker.py::init_worker_distributed_environment``):

* vLLM's own multi-node mode, ``--nnodes`` > 1 (multiprocessing across nodes, without Ray): ``config/parallel.py ::
  ParallelConfig._verify_args`` ("Disabled the custom all-reduce since we are running on multi-node"), in 0.11.1,
  0.19.0 and 0.26.0 (0.11.0 has no ``nnodes``); gone in 0.33.0, whose ``custom_all_reduce.py`` decides per TP group
  (``in_the_same_node_as``, MNNVL), so a TP group inside one node keeps it there (0.27–0.32 not read: taken as 0.26).
  Under Ray vLLM's ``nnodes`` stays 1 (0.11.1 and 0.19.0 refuse ``nnodes > 1`` unless the executor is mp), so a TP
  group inside one node keeps it (the topology rule above).
* ROCm: up to 0.7 never (0.6.6 ``custom_all_reduce.py``: the custom ops are not built for AMD, ``custom_ar = False``;
  0.7.3 ``config.py``: ``is_rocm()`` → ``disable_custom_all_reduce = True``); from 0.8 only on the MI300 series
  (``platforms/rocm.py :: use_custom_allreduce``: gcnArchName ``gfx94`` in 0.8.5, ``gfx94``/``gfx95`` in 0.9.2, 0.10.2,
  0.11.0, 0.11.1 and 0.19.0), so MI250/MI210 (gfx90a) never. 0.8.0–0.8.4 were not read: planned as 0.8.5.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.catalog.gpus import GpuSpec
from kvledger.units import MiB

if TYPE_CHECKING:
    from kvledger.accounting.settings import PlanSettings

__all__ = ["tp_group_nodes", "custom_all_reduce", "ca_max_size", "custom_all_reduce_bytes",
           "custom_all_reduce_max_bytes", "custom_ar_max_bytes", "engine_disables_ca", "ROCM_GFX", "VLLM_NNODES_FROM",
           "NNODES_CA_OFF_UNTIL"]

VLLM_NNODES_FROM = (0, 11, 1)
"""The first release read with vLLM's ``--nnodes`` (``ParallelConfig.nnodes``): 0.11.1 (0.11.0 has none)."""

NNODES_CA_OFF_UNTIL = (0, 33, 0)
"""The first release read whose ``--nnodes`` > 1 no longer turns custom all-reduce off for every group: 0.33.0 (0.26.0's
``ParallelConfig._verify_args`` still does)."""

ROCM_GFX = {"amd_mi250x": "gfx90a", "amd_mi250": "gfx90a", "amd_mi210": "gfx90a", "amd_mi300x": "gfx942",
            "amd_mi325x": "gfx942", "amd_mi355x": "gfx950"}
"""gcnArchName of the catalogued AMD GPUs (CDNA2 gfx90a: catalog/data/gpus.SOURCES.md; CDNA3 gfx942 and CDNA4 gfx950:
AMD's ROCm GPU specifications)."""

_CA_MAX_SIZES_SYMM = {"sm90": {2: 64 * MiB, 4: 32 * MiB, 6: MiB // 2, 8: MiB // 4},
                      "sm100": {2: 2 * MiB, 4: 2 * MiB, 6: 1 * MiB, 8: 1 * MiB},
                      "sm103": {2: 4 * MiB, 4: 4 * MiB, 6: 8 * MiB, 8: 4 * MiB}}
"""vLLM 0.19 ``all_reduce_utils.CUSTOM_ALL_REDUCE_MAX_SIZES`` ("9.0", "10.0", "10.3"), B, keyed by the exact capability
(``custom_all_reduce.py`` looks up ``get_device_capability().as_version_str()``; ``GpuSpec.exact_arch``)."""

CA_SM103_ROW_FROM = (0, 19, 0)
"""First release whose table has a "10.3" row (B300, GB300): 0.19.0 (read in 0.19.0, 0.20.0, 0.24.0, 0.28.0; 0.11.0–
0.18.0 have "9.0" and "10.0" only, so B300 keeps the 8 MiB default there)."""


def tp_group_nodes(tp: int, pp: int, nnodes: int) -> int:
    """Nodes one TP group spans when the TP × PP ranks are spread evenly over ``nnodes`` nodes: ceil(nnodes / pp).

    vLLM 0.10.1 ``parallel_state.py::initialize_model_parallel`` lays ranks out as ``arange(world).reshape(-1, dp, pp,
    tp)``, so a TP group is ``tp`` consecutive ranks, and ``ray_distributed_executor.py`` ranks workers node by node
    (the driver's node first); ``mp`` across nodes gives each node consecutive ranks (``--node-rank``). With ``tp × pp /
    nnodes`` GPUs a node, a TP group stays inside one node unless nnodes > pp: TP 4 × PP 2 over 2 nodes keeps custom
    all-reduce on in each node under Ray (the rwood-97/multi_node_inference GH200 log registers its CUDA-graph
    buffers)."""
    return max(1, -(-nnodes // max(1, pp)))


def engine_disables_ca(ver: tuple[int, int, int], gpu: GpuSpec, nnodes: int, backend: str | None) -> str | None:
    """Why vLLM ``ver`` turns custom all-reduce off for the whole deployment before any TP group is built, or None.
    ``nnodes``: the deployment's nodes; ``backend``: ``--distributed-executor-backend`` (None: vLLM's default)."""
    vtxt = ".".join(map(str, ver))
    if gpu.gpu_id.startswith("amd_"):
        if ver < (0, 8, 0):
            return (f"custom all-reduce off: vLLM {vtxt} has none on ROCm (0.6.6 custom_all_reduce.py: ops not built "
                    "for AMD; 0.7.3 config.py: is_rocm() sets disable_custom_all_reduce)")
        gfx = ROCM_GFX.get(gpu.gpu_id, "")
        archs = ("gfx94",) if ver < (0, 9, 0) else ("gfx94", "gfx95")
        if gfx and not gfx.startswith(archs):
            return (f"custom all-reduce off: {gpu.name} is {gfx}, and vLLM {vtxt} runs it on ROCm only on "
                    f"{'/'.join(archs)} (platforms/rocm.py use_custom_allreduce, 0.8.5–0.19.0)")
    if nnodes > 1 and backend != "ray" and VLLM_NNODES_FROM <= ver < NNODES_CA_OFF_UNTIL:
        return (f"custom all-reduce off: vLLM's --nnodes {nnodes} (multiprocessing across nodes) disables it for "
                "every group (config/parallel.py ParallelConfig._verify_args, 0.11.1, 0.19.0 and 0.26.0)")
    return None


def custom_all_reduce(tp: int, nnodes: int, gpu: GpuSpec, disabled: bool,
                      forced: str | None = None) -> tuple[bool, str]:
    """Whether vLLM's custom all-reduce is on for this TP group, and which check decides (CustomAllreduce.__init__).
    ``nnodes``: the nodes the TP group spans (``tp_group_nodes``), not the whole deployment's; ``forced``: the
    engine's own reason to turn it off (``engine_disables_ca``)."""
    if tp == 1:
        return False, "TP 1: no all-reduce"
    if disabled:
        return False, "custom all-reduce off (--disable-custom-all-reduce)"
    if forced:
        return False, forced
    if nnodes > 1:
        return False, f"custom all-reduce off: the TP group spans {nnodes} nodes"
    if tp not in (2, 4, 6, 8):
        return False, f"custom all-reduce off: world size {tp} is not 2, 4, 6 or 8"
    amd = gpu.gpu_id.startswith("amd_")
    if tp > 2 and not gpu.nvlink_all_to_all:
        return False, f"custom all-reduce off: {tp} GPUs without NVLink all-to-all ({gpu.interconnect})"
    if not amd and not gpu.p2p:
        return False, f"custom all-reduce off: {gpu.name} has no CUDA peer access (_can_p2p)"
    return True, f"custom all-reduce on (TP {tp}, one node, {'all-to-all links' if tp > 2 else 'peer access'})"


def ca_max_size(ver: tuple[int, int, int], tp: int, arch: str) -> int:
    """Custom all-reduce's ``max_size``, B: 8 MiB, from 0.11 on sm90/sm100 (and sm103 from 0.19) capped by the
    symmetric-memory table; ``arch`` at the exact capability (``GpuSpec.exact_arch``)."""
    max_size = 8 * MiB
    if ver >= (0, 11, 0) and arch in _CA_MAX_SIZES_SYMM and (arch != "sm103" or ver >= CA_SM103_ROW_FROM):
        max_size = min(max_size, _CA_MAX_SIZES_SYMM[arch].get(tp, max_size))
    return max_size


def custom_all_reduce_bytes(ver: tuple[int, int, int], tp: int, arch: str) -> int:
    """Buffers one GPU allocates for custom all-reduce, B: 2 × max_size + 8 MiB rank_data (meta_size() is a few KiB)."""
    return 2 * ca_max_size(ver, tp, arch) + 8 * MiB


def custom_all_reduce_max_bytes(ver: tuple[int, int, int], tp: int, nnodes: int, gpu: GpuSpec, disabled: bool,
                                pp: int = 1, backend: str | None = None, group_nnodes: int | None = None) -> int:
    """Largest message (exclusive) vLLM's custom all-reduce takes, B (``should_custom_ar``: ``size < max_size``); 0
    when it is off for this TP group (``nnodes``: the deployment's nodes, ``tp_group_nodes`` of them per TP group)."""
    forced = engine_disables_ca(ver, gpu, nnodes, backend)
    on = custom_all_reduce(tp, tp_group_nodes(tp, pp, nnodes if group_nnodes is None else group_nnodes), gpu,
                           disabled, forced)[0]
    return ca_max_size(ver, tp, gpu.exact_arch) if on else 0


def custom_ar_max_bytes(s: PlanSettings, gpu: GpuSpec) -> int:
    """vLLM's custom all-reduce size limit for plan settings ``s``, B; 0 when off or not vLLM."""
    from kvledger.accounting.topology import nodes_within_dp  # topology imports settings, which is TYPE_CHECKING here

    return 0 if s.engine != "vllm" else custom_all_reduce_max_bytes(
        parse_version(s.engine_version or LATEST), s.tp, s.nnodes, gpu, s.disable_custom_all_reduce, s.pp,
        s.distributed_executor_backend, group_nnodes=nodes_within_dp(s))
