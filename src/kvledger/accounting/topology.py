"""Refusals of parallel layouts no engine can start: the nodes, the TP × PP ranks and the executor that places them.

vLLM places the same number of ranks on every node: ``ParallelConfig.local_world_size`` is ``world_size //
nnodes_within_dp`` (vLLM 0.19.0 ``config/parallel.py``, read in the wheel), so a node count that does not divide the
world size (TP × PP, × vLLM's DP ranks: ``engine/arg_utils.py`` asserts ``world_size % nnodes == 0`` over DP × PP × TP)
leaves some rank without a node, and one above it leaves a node without a rank. Across nodes
vLLM's multiprocessing executor needs its ``--nnodes``/``--node-rank`` mode (``ParallelConfig.nnodes``, with
``master_addr`` and ``node_rank``), which 0.11.0's ``config/parallel.py`` does not have (read in the wheel; added by
vllm-project/vllm PR #23691, merged 2025-11-14); up to 0.11.0 a deployment across nodes runs on Ray.
"""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.errors import InputError

__all__ = ["check_topology", "MP_MULTI_NODE_ABSENT_UNTIL", "vllm_dp_ranks", "nodes_within_dp"]

MP_MULTI_NODE_ABSENT_UNTIL = (0, 11, 0)
"""The newest vLLM release read without the multiprocessing executor's multi-node mode (0.11.0's
``config/parallel.py`` has no ``nnodes``; 0.19.0's has it). Releases between 0.11.0 and 0.19.0 were not read, so
only versions up to this one are refused."""


def vllm_dp_ranks(s: PlanSettings) -> int:
    """vLLM's --data-parallel-size ranks, each its own TP × PP group (1 for other engines: SGLang's DP attention runs
    inside its one TP group)."""
    return (s.data_parallel_size or 1) if s.engine == "vllm" else 1


def nodes_within_dp(s: PlanSettings) -> int:
    """The nodes one DP rank's TP × PP ranks span: vLLM 0.19.0 ``config/parallel.py :: ParallelConfig.nnodes_within_dp``
    = nnodes ÷ (data_parallel_size ÷ data_parallel_size_local), with ``engine/arg_utils.py``'s inferred
    ``data_parallel_size_local`` = max((DP × PP × TP ÷ nnodes) ÷ (PP × TP), 1); nnodes without DP. 0 where the DP
    ranks cannot share the nodes evenly (``check_topology`` refuses it)."""
    dp, group = vllm_dp_ranks(s), s.tp * s.pp
    if s.nnodes == 1 or dp == 1:
        return s.nnodes
    local = max((dp * group // s.nnodes) // group, 1)
    return s.nnodes // (dp // local) if dp % local == 0 else 0


def check_topology(s: PlanSettings, version: tuple[int, int, int] | None = None) -> None:
    """Refuse a node count the TP × PP ranks cannot fill evenly, and vLLM's mp executor across nodes before it had
    that mode (``version``: the vLLM release planned; None for other engines).

    Raises:
        InputError: the node count exceeds or does not divide TP × PP; ``--distributed-executor-backend mp`` across
            nodes on a vLLM release up to 0.11.0.
    """
    dp = vllm_dp_ranks(s)  # vLLM's world across nodes counts the DP ranks (engine/arg_utils.py: DP × PP × TP)
    world = s.tp * s.pp * dp
    layout = f"--tp {s.tp}" + (f" × --pp {s.pp}" if s.pp > 1 else "") + (
        f" × --data-parallel-size {dp}" if dp > 1 else "")
    if s.nnodes > world:
        raise InputError(f"--nnodes {s.nnodes} is more nodes than {layout} has GPUs ({world}): {s.nnodes - world} "
                         f"node{'s' if s.nnodes - world > 1 else ''} would hold no rank; give the nodes the ranks "
                         "span (vLLM puts world_size ÷ nnodes ranks on each, config/parallel.py local_world_size)")
    if world % s.nnodes:
        raise InputError(f"--nnodes {s.nnodes} does not divide the {world} GPUs of {layout}: vLLM puts the same "
                         "number of ranks on every node (world_size ÷ nnodes, config/parallel.py local_world_size); "
                         f"use a node count that divides {world}")
    if nodes_within_dp(s) < 1:
        raise InputError(f"--nnodes {s.nnodes} with {layout}: the {dp} DP ranks of {s.tp * s.pp} GPUs each cannot "
                         f"share {s.nnodes} nodes evenly (vLLM's nnodes_within_dp = nnodes ÷ (DP ÷ DP ranks a node) is "
                         "0, config/parallel.py); use a node count whose nodes hold whole DP ranks or split one evenly")
    if (version is not None and s.nnodes > 1 and s.distributed_executor_backend == "mp"
            and version <= MP_MULTI_NODE_ABSENT_UNTIL):
        v = ".".join(map(str, version))
        raise InputError(f"--distributed-executor-backend mp across {s.nnodes} nodes: vLLM {v}'s multiprocessing "
                         "executor runs on one node (its multi-node mode, --nnodes/--node-rank, is absent from "
                         "0.11.0's config/parallel.py); use --distributed-executor-backend ray, or a newer "
                         "--engine-version")
