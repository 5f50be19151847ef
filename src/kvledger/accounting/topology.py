"""Refusals of parallel layouts no engine can start: the nodes, the TP × PP ranks and the executor that places them.

vLLM places the same number of ranks on every node: ``ParallelConfig.local_world_size`` is ``world_size //
nnodes_within_dp`` (vLLM 0.19.0 ``config/parallel.py``, read in the wheel), so a node count that does not divide the
world size (TP × PP) leaves some rank without a node, and one above it leaves a node without a rank. Across nodes
vLLM's multiprocessing executor needs its ``--nnodes``/``--node-rank`` mode (``ParallelConfig.nnodes``, with
``master_addr`` and ``node_rank``), which 0.11.0's ``config/parallel.py`` does not have (read in the wheel; added by
vllm-project/vllm PR #23691, merged 2025-11-14); up to 0.11.0 a deployment across nodes runs on Ray.
"""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.errors import InputError

__all__ = ["check_topology", "MP_MULTI_NODE_ABSENT_UNTIL"]

MP_MULTI_NODE_ABSENT_UNTIL = (0, 11, 0)
"""The newest vLLM release read without the multiprocessing executor's multi-node mode (0.11.0's
``config/parallel.py`` has no ``nnodes``; 0.19.0's has it). Releases between 0.11.0 and 0.19.0 were not read, so
only versions up to this one are refused."""


def check_topology(s: PlanSettings, version: tuple[int, int, int] | None = None) -> None:
    """Refuse a node count the TP × PP ranks cannot fill evenly, and vLLM's mp executor across nodes before it had
    that mode (``version``: the vLLM release planned; None for other engines).

    Raises:
        InputError: the node count exceeds or does not divide TP × PP; ``--distributed-executor-backend mp`` across
            nodes on a vLLM release up to 0.11.0.
    """
    world = s.tp * s.pp
    layout = f"--tp {s.tp}" + (f" × --pp {s.pp}" if s.pp > 1 else "")
    if s.nnodes > world:
        raise InputError(f"--nnodes {s.nnodes} is more nodes than {layout} has GPUs ({world}): {s.nnodes - world} "
                         f"node{'s' if s.nnodes - world > 1 else ''} would hold no rank; give the nodes the ranks "
                         "span (vLLM puts world_size ÷ nnodes ranks on each, config/parallel.py local_world_size)")
    if world % s.nnodes:
        raise InputError(f"--nnodes {s.nnodes} does not divide the {world} GPUs of {layout}: vLLM puts the same "
                         "number of ranks on every node (world_size ÷ nnodes, config/parallel.py local_world_size); "
                         f"use a node count that divides {world}")
    if (version is not None and s.nnodes > 1 and s.distributed_executor_backend == "mp"
            and version <= MP_MULTI_NODE_ABSENT_UNTIL):
        v = ".".join(map(str, version))
        raise InputError(f"--distributed-executor-backend mp across {s.nnodes} nodes: vLLM {v}'s multiprocessing "
                         "executor runs on one node (its multi-node mode, --nnodes/--node-rank, is absent from "
                         "0.11.0's config/parallel.py); use --distributed-executor-backend ray, or a newer "
                         "--engine-version")
