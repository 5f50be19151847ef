"""The step time of vLLM's data-parallel ranks of a MoE model (``--data-parallel-size N --enable-expert-parallel``)
stepping together: each rank's own attention and dense layers, the MoE layers over every rank's tokens, the slowest
rank setting the step.

What vLLM does (read in 0.19.0 and 0.33.0):

* ``v1/engine/core.py : DPEngineCoreProc.run_busy_loop``: each DP rank is its own engine core, with its own scheduler
  and KV pool. While any rank has unfinished requests (a "wave": ``engines_running``), every rank runs a forward pass
  each step; a rank with nothing scheduled runs ``execute_dummy_batch`` (``v1/worker/gpu_worker.py``: a one-token
  uniform-decode ``_dummy_run``) so that the MoE layers' collectives line up across the ranks. When no rank has work
  the wave ends and no rank steps.
* ``v1/worker/dp_utils.py : coordinate_batch_across_dp``: before each forward the ranks all-reduce their token counts;
  when every rank runs a CUDA graph (the synced ``cudagraph_mode`` is not NONE) each is padded to the largest count.
* ``config/parallel.py``: ``all2all_backend`` defaults to ``allgather_reducescatter``
  (``distributed/device_communicators/all2all.py : AgRsAll2AllManager``): each MoE layer all-gathers the hidden states
  of every DP rank's tokens (``all_gatherv``), runs the rank's own experts (EP = DP × TP: ``expert_parallel.py``) on
  them, and reduce-scatters the outputs back (``reduce_scatterv``).

So rank r's step time here is the roofline of its own step (attention, dense layers, TP all-reduces: ``roofline.py``)
with the fused-MoE term (``moe_kernel.py``: the busiest GPU at EP DP × TP) priced over the tokens of all ranks, plus,
per MoE layer, an all-gather and a reduce-scatter of the other ranks' tokens' hidden states (16-bit; two calls over the
link of ``tp_comm.link_bytes_per_s``, each at the per-call latency below); the step takes
the largest rank time. Where the DP × TP GPUs span nodes (16 ranks of TP 1 on two 8-GPU nodes), the DP group's
all-gather and reduce-scatter (each TP index's ranks, one per DP rank) are NCCL rings across them, priced as
``tp_network.allreduce_terms`` prices a TP group's ring over the nodes (the link bound by the NICs of the ranks a node
holds, ``--inter-node-link`` giving a NIC's speed). Per-call latency: where every rank sends the same count (DP padding,
or equal counts), vLLM runs NCCL's all-gather and reduce-scatter (vLLM 0.33 ``cuda_communicator.py``: ``all_gatherv`` /
``reduce_scatterv`` drop ``sizes`` when all are equal, then ``pynccl`` ``all_gather`` / ``reduce_scatter``), whose ring
takes n − 1 steps, N − 1 of them across N nodes, against an all-reduce's 2(n − 1) and 2(N − 1) (NCCL
``src/graph/tuning.cc``, 2.23.4 on: ``nsteps``, ``nInterSteps``): ``tp_network.gather_latency_s``, the all-reduce's
fitted one-node latency less the g − 1 steps it does not take, plus its own steps across the nodes (DP 8 on one H200
node: 34.32 − 7 × 0.6 = 30.12 µs a call). With unequal counts (no DP padding: ``dp_utils.py`` pads only when the
ranks' synced ``cudagraph_mode`` is not NONE, so every ``DPMetadata.num_tokens_across_dp`` entry is the rank's own)
vLLM groups one ``ncclBroadcast`` (``ncclReduce``) per rank (``pynccl.py`` ``all_gatherv`` / ``reduce_scatterv``, the
same in 0.19.0 and 0.33.0), which NCCL prices as one ring broadcast: ``tp_network.grouped_broadcast_latency_s``, the
all-reduce's fitted one-node latency less its 2(g − 1) steps plus one hop (DP 8 on one H200 node: 34.32 − 14 × 0.6 +
0.6 = 26.52 µs a call). Either way every rank receives the other ranks' tokens as they were sent (the padded count
where padding applied), so the busiest link carries all tokens less the smallest rank's, and the step takes the rank
that receives most. An idle rank prices the one-token dummy batch. Padding: when every rank's tokens are within vLLM's
largest CUDA-graph size (``max_cudagraph_capture_size``; None under ``--enforce-eager``) the MoE layers and the
collectives take every rank at the largest count (the graph sizes' rounding is not modelled); otherwise each rank's own.
"""

from __future__ import annotations

from dataclasses import replace

from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.tp_network import allreduce_terms, gather_latency_s, grouped_broadcast_latency_s

__all__ = ["DUMMY_BATCH", "LockstepStepCost"]

DUMMY_BATCH = StepShape(0, 0, 0, 0.0, 1, 1)
"""An idle DP rank's step: ``execute_dummy_batch``, one uniform-decode token (gpu_worker.py)."""

_ACT_BYTES = 2  # the hidden states the MoE layers gather and reduce-scatter: 16-bit activations, B per element


class LockstepStepCost:
    """Prices one lock-step step of ``dp`` DP ranks from the ranks' StepShapes (None: an idle rank).

    Args:
        inner: the roofline of one rank (``RooflineStepCost`` at the rank's TP with EP DP × TP: ``Plan.step_cost``).
        dp: DP ranks, count.
        capture_size: vLLM's largest CUDA-graph token count (padding applies up to it); None: no CUDA graphs.
        nnodes: the nodes the DP × TP GPUs span (``node_size.dp_nnodes``; 1: one node).
        nic_Bps: a GPU's NIC, B/s one direction (``--inter-node-link``; None: ``tp_network.NIC_BYTES_PER_S``).
    """

    def __init__(self, inner, dp: int, capture_size: int | None, nnodes: int = 1,
                 nic_Bps: float | None = None) -> None:
        self.inner, self.dp, self.capture_size = inner, dp, capture_size
        self.name = getattr(inner, "name", "roofline")
        self.moe_layers = inner.moe_layers
        self.hidden_size = inner.model.hidden_size
        # the DP group's ring: one rank per DP rank, over min(DP, nodes) nodes (a TP group wider than a node puts
        # each DP rank on nodes of its own); within a node, the scale-up link and one-node latency (tp_comm)
        self.link_Bps, self.call_latency_s, self.span = allreduce_terms(
            inner.gpu, dp, min(dp, nnodes), inner.allreduce_link_share, None, nic_Bps)
        self.gather_latency_s = gather_latency_s(inner.gpu, dp, min(dp, nnodes))  # NCCL's ring all-gather
        # unequal counts: vLLM's all_gatherv / reduce_scatterv, one NCCL group of ring broadcasts (reduces)
        self.gatherv_latency_s = grouped_broadcast_latency_s(inner.gpu, dp, min(dp, nnodes))
        self._moe: dict[int, float] = {}

    @property
    def tp_groups(self) -> int:
        """TP groups the ranks fill: vLLM's N ranks each run their own --tp GPUs (DP × TP GPUs in all), count."""
        return self.dp

    def layout_text(self, tp: int) -> str:
        """The ranks' GPUs in the engine's words: ``DP 8 × TP 1``."""
        return f"DP {self.dp} × TP {tp}"

    def rank_tokens(self, shapes: list) -> tuple[list[int], int, bool]:
        """(each rank's tokens as its MoE layers and collectives take them, the tokens of all ranks the MoE layers
        run over, whether DP padding applied): idle ranks 1, every rank at the largest count when all fit a CUDA
        graph."""
        own = [DUMMY_BATCH.num_tokens if s is None else s.num_tokens for s in shapes]
        top = max(own)
        padded = self.capture_size is not None and top <= self.capture_size
        taken = [top] * len(own) if padded else own
        return taken, sum(taken), padded

    def gather_s(self, all_tokens: int, own_tokens: int, uniform: bool = False) -> float:
        """A rank's all-gather and reduce-scatter of the other ranks' hidden states over every MoE layer, s: at NCCL's
        ring all-gather latency where every rank sends the same count (``uniform``: DP padding, or equal counts), else
        at the grouped ring broadcasts' (reduces') of ``all_gatherv`` (module docstring)."""
        moved = (all_tokens - own_tokens) * self.hidden_size * _ACT_BYTES
        latency = self.gather_latency_s if uniform else self.gatherv_latency_s
        return self.moe_layers * 2 * (latency + moved / self.link_Bps)

    def moe_s(self, all_tokens: int) -> float:
        """The fused-MoE term of the busiest GPU over ``all_tokens`` tokens, s (memoised per token count)."""
        t = self._moe.get(all_tokens)
        if t is None:
            if len(self._moe) > 65536:
                self._moe.clear()
            t = self._moe[all_tokens] = self.inner.moe_kernel_s(all_tokens)
        return t

    def rank_times_s(self, shapes: list) -> list[float]:
        """Each rank's step time, s: its own step's roofline with the MoE term over all ranks' tokens and the
        collectives (module docstring)."""
        taken, total, _ = self.rank_tokens(shapes)
        uniform = min(taken) == max(taken)  # every rank the same count (padded or not): NCCL's all-gather
        moe = self.moe_s(total)
        out = []
        for shape, own in zip(shapes, taken):
            c = self.inner.costs(DUMMY_BATCH if shape is None else shape)
            out.append(self.inner.time_s(replace(c, moe_kernel_s=moe, all_to_all_s=self.gather_s(total, own, uniform))))
        return out

    def step_time_s(self, shapes: list) -> float:
        """The lock-step step's time, s: the slowest rank's (every rank waits at the MoE layers' collectives)."""
        return max(self.rank_times_s(shapes))
