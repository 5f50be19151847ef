"""The parallel axes of a search's colocated candidates beyond TP: vLLM's expert parallelism and its data-parallel
ranks of a MoE model.

``--data-parallel-size 1,8`` adds, for each value N above 1, candidates of N DP ranks of TP GPUs each (N × TP GPUs per
unit) with ``--enable-expert-parallel`` on: vLLM steps a MoE model's DP ranks in lock-step (v1/engine/core.py
``DPEngineCoreProc``), which ``kvledger simulate`` models (``analyses/serving/sim_dp.py``) and the search simulates
the same way. A dense model's DP ranks are independent engine cores, which the search already prices as replicas, so
the axis is refused for it; so is DP with ``--no-enable-expert-parallel`` (the lock-step simulation models the experts
spread over the DP × TP ranks only).
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.node_size import dp_nnodes  # the DP × TP GPUs' nodes, as the step cost prices them
from kvledger.errors import InputError

__all__ = ["ep_values", "dp_values", "dp_nnodes"]


def ep_values(axes: Any, moe: bool, tp: int, dp: int | None) -> tuple[bool | None, ...]:
    """The expert-parallel settings of a colocated candidate at ``tp``: None (off) unless the model is MoE at TP > 1;
    on (only) with DP ranks ``dp``."""
    if dp:
        return (True,)
    if not moe or tp == 1:
        return (None,)
    return tuple(True if on else None for on in (axes.expert_parallel or (False, True)))


def dp_values(axes: Any, moe: bool, model: Any = None) -> tuple[int | None, ...]:
    """The DP sizes of the candidates: None (no data parallelism: 1, and the default) and each size above 1, in the
    order given, each once.

    Raises:
        InputError: a size below 1; a size above 1 for a dense model or with ``--no-enable-expert-parallel``.
    """
    sizes = list(dict.fromkeys(axes.data_parallel_sizes or (1,)))
    if any(n < 1 for n in sizes):
        raise InputError(f"--data-parallel-size values must be ≥ 1, got {', '.join(map(str, sizes))}")
    ranks = [n for n in sizes if n > 1]
    if ranks and not moe:
        name = getattr(model, "name", "this model")
        raise InputError(f"--data-parallel-size {','.join(map(str, sizes))} for the dense model {name}: vLLM runs a "
                         "dense model's DP ranks as independent engine cores (they step together only for a MoE "
                         "model: v1/engine/core.py DPEngineCoreProc), which the search already prices as replicas "
                         "(each candidate is sized to the replicas the load needs); drop --data-parallel-size")
    if ranks and axes.expert_parallel == (False,):
        raise InputError(f"--data-parallel-size {','.join(map(str, ranks))} with --no-enable-expert-parallel: the DP "
                         "ranks are simulated with vLLM's --enable-expert-parallel (the experts whole over the DP × TP "
                         "ranks, the MoE layers run over every rank's tokens); drop --no-enable-expert-parallel, or "
                         "drop the DP sizes above 1")
    return tuple(n if n > 1 else None for n in sizes)
