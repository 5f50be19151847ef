"""Routed experts on one GPU under vLLM's ``--enable-expert-parallel`` with data parallel 1.

vLLM (read in 0.11.0, ``model_executor/layers/fused_moe/``): ``config.py::FusedMoEParallelConfig.make`` turns expert
parallelism on when ``dp × tp > 1`` and the flag is set; the MoE layers then run with TP 1 and EP size ``tp × dp``,
so each rank holds whole experts rather than a 1/TP slice of every expert. ``layer.py::determine_expert_map`` places
them linearly: ``E // ep`` experts per rank, the first ``E % ep`` ranks one more, so rank 0 holds ``ceil(E / ep)``.
All-to-all kernels are used only when ``dp > 1`` (``use_all2all_kernels``); with DP 1 every TP rank already has every
token, runs its own experts and the TP all-reduce sums the outputs. Dense layers, attention and shared experts stay
TP-sliced.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec

__all__ = ["local_experts", "expert_share"]


def local_experts(num_experts: int, ep: int, rank: int = 0) -> int:
    """Routed experts of one layer on EP rank ``rank`` (``determine_expert_map``, linear placement), count."""
    if ep <= 1:
        return num_experts
    base, extra = divmod(num_experts, ep)
    return base + (1 if rank < extra else 0)


def expert_share(model: ModelSpec, tp: int, ep: int = 1) -> float:
    """The share of each routed-expert tensor's bytes on the busiest GPU (rank 0): 1/TP without expert parallelism,
    ceil(E / ep) / E with it."""
    if ep <= 1 or not model.num_experts:
        return 1 / tp
    return local_experts(model.num_experts, ep) / model.num_experts

