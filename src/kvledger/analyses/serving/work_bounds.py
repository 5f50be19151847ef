"""Analytic lower bounds on the engine time of a simulated deployment's requests, under the simulator's own roofline
step cost, and the capacity bound they give: what ``kvledger search`` (``kvledger.analyses.search.bounds``) and
``kvledger cost --simulate`` / ``report`` (``kvledger.analyses.serving.sim_capacity``) both size against.

Every step of ``kvledger.accounting.roofline.RooflineStepCost`` costs at least
``max(matmul FLOPs / achievable peak (× the measured GEMM curve's highest efficiency for the model, where it prices the
matmuls), weight bytes / achievable bandwidth) + KV bytes / achievable bandwidth +
all-reduce`` (+ the CPU overhead, or the larger of the two under async scheduling): its attention term is a max (or, for
split kernels, a sum of maxes) over the KV bytes, the MoE factors are ≥ 1 and the other terms ≥ 0. Of these,
``2 × matmul params`` FLOPs per token, ``head`` FLOPs per sequence, the KV bytes per context token and the all-reduce
bytes per token add up over the tokens of a step; so a request of ``P`` prompt tokens (1 when prompts may share a
cached prefix) and ``n`` output tokens makes its engine busy for at least

    w = (2·mp·(P + n − 1) + head·n) / peak + g·((n − 1)·P + (n − 1)(n − 2)/2 + P) / bw + ar·(P + n − 1)

(its ``n − 1`` decodes attend to at least ``P``, ``P + 1``, … keys). Steps run one after another, so a run whose
attainment meets the target (at least ``k = ⌈target × N⌉`` good requests) spans at least the ``k`` smallest ``w``, and
its SLO capacity is at most ``k ÷ Σ of the k smallest w`` good req/s: the most a replica can keep pace with, whatever a
probe's rate search found. The single-step bounds on TTFT and TPOT (``latency_bounds_s``) are read the same way.

vLLM's DP ranks of a MoE model stepping in lock-step (``accounting/dp_lockstep_cost.py``): a step lasts as long as its
slowest rank's, ``max_r t_r``; rank r's time is its own step's roofline (its attention, its dense layers, its TP
all-reduces, over its own tokens) with the fused-MoE term over every rank's tokens and the MoE layers' all-gather and
reduce-scatter added. Two facts give the floor (``LockstepWork``, ``lockstep_busy_floor_s``):

* each ``t_r`` is at least the dense side of the rank's own step: the weight matmuls less the routed experts (the MoE
  term prices those apart: ``StepCosts.weight_terms_s``), their FLOPs ``2 × (matmul params − expert params per token)``
  per token, the dense weight bytes, the KV reads and the all-reduces; the MoE term and the collectives are ≥ 0. So
  ``w`` over these dense-side parameters bounds each request's share of its rank's time (an expert's FLOPs move to the
  MoE term, which the ranks share, so they are left out of ``w``);
* ``max_r t_r ≥ (Σ_r t_r) ÷ N``: summed over the steps, the run lasts at least the work of every rank ÷ N.

* each ``t_r`` also holds, added to that dense side, the fused-MoE term and the MoE layers' collectives, the same on
  every rank of a step: the kernel term is ``factor × Σ over the MoE layers of (t0 + max(read, GEMM))`` over every
  rank's tokens, at least one a rank (an idle rank's dummy token), so ≥ ``factor × (layers × t0 + the expert bytes
  N tokens touch ÷ the fit's read bandwidth)`` (``moe_kernel.moe_layer_s``; t0 the fit's per-layer floor; the touched
  share grows with the tokens), and each layer's all-gather and reduce-scatter each move at least one token's hidden
  states from each of the other N − 1 ranks at no less than the smaller per-call latency, the all-gather's or the
  grouped broadcasts' (``LockstepStepCost.gather_s``). So every step takes at
  least that floor F (``lockstep_step_floor_s``) on top of the ranks' mean dense side; and a request of ``n`` output
  tokens is in at least ``n`` steps (its prefill's last one, then one a decode), so the good requests' steps number at
  least the largest ``n`` among them, at least ``n_(k)``, the k-th smallest over the run's requests.

So a run meeting the target spans at least ``Σ of the k smallest w ÷ N + n_(k) × F``, and its SLO capacity is at most
``k`` over that: the work shared over the N ranks, where one engine's floor (every step one after another, the experts'
FLOPs in ``w``) would have pruned a DP candidate. DeepSeek-V3 on 8 H200 DP ranks: F = 58 layers × 42.64 µs + the
read of the experts 8 tokens touch (4.45 ms) + 58 × 2 × (26.52 µs + 0.22 µs) = 10.02 ms a step. The TTFT and TPOT
lower bounds take the same
dense side (one rank's step).

Each bound is shaded by 1e-9 against rounding. Other step costs, and lengths that depend on the rate (session loops),
get no bound (None).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

__all__ = ["SHADE", "request_work_s", "latency_bounds_s", "run_lengths", "busy_floor_s", "capacity_bound_req_per_s",
           "capped", "bound_clause", "bound_note", "BOUND_NOTE_START", "gpu_side", "LockstepWork", "lockstep_work",
           "lockstep_busy_floor_s"]

SHADE = 1e-9
"""Relative margin given to every bound against floating-point rounding (a bound is pushed outward by this)."""

BOUND_SOURCE = "kvledger.analyses.serving.work_bounds: per-request roofline work under the simulator's step cost"


def request_work_s(cost: Any, prompt: Any, output: Any) -> Any:
    """Lower bound on the engine time each request needs (numpy arrays of computed prompt and output tokens), s."""
    import numpy as np

    p, n = np.asarray(prompt, dtype=float), np.maximum(np.asarray(output, dtype=float), 1.0)
    tokens = p + n - 1
    mm = (2 * cost.matmul_params * tokens + cost.head_flops_per_seq * n) / _matmul_rate(cost)
    kv = cost.growing_read_bytes * ((n - 1) * p + (n - 1) * (n - 2) / 2 + p) / (cost.bw * cost.bandwidth_fraction)
    return (mm + kv + _allreduce_per_token_s(cost) * tokens) * (1 - SHADE)


def _matmul_rate(cost: Any) -> float:
    """The fastest the step cost runs the weight matmuls, FLOP/s: peak × FLOP fraction × the measured GEMM curve's
    highest efficiency for this model (× 1.0, exactly, when flat)."""
    return cost.peak_flops * cost.flops_fraction * cost.peak_matmul_efficiency()


def _allreduce_per_token_s(cost: Any) -> float:
    """The part of a step's all-reduce time that grows with its tokens, s per token (0 at TP 1): the smaller of the two
    rules' byte slopes (tp_comm.py), NCCL's ring ``2(n − 1)/n`` under the custom kernel's ``n − 1``."""
    if not cost.num_allreduce_layers:
        return 0.0
    return 2 * cost.num_allreduce_layers * 2 * (cost.tp - 1) / cost.tp * cost.model.hidden_size * 2 \
        / cost.link_bytes_per_s


def _one_step_s(cost: Any, tokens: Any, kv_tokens: Any) -> Any:
    """Lower bound on a sequence of steps that holds ``tokens`` of one request attending to ``kv_tokens`` keys, s."""
    import numpy as np

    b = cost.bw * cost.bandwidth_fraction
    mm = 2 * cost.matmul_params * tokens / _matmul_rate(cost)
    gpu = (np.maximum(mm, cost.weight_read_bytes(1) / b) + cost.growing_read_bytes * kv_tokens / b
           + cost.allreduce_s(1) + _allreduce_per_token_s(cost) * (tokens - 1))
    gpu = np.maximum(gpu, cost.cpu_overhead_s) if cost.overlap_cpu else gpu + cost.cpu_overhead_s
    return gpu * (1 - SHADE)


def latency_bounds_s(cost: Any, prompt: Any, computed: Any) -> tuple[Any, Any]:
    """(TTFT, TPOT) lower bounds of each request, s: its ``computed`` prompt tokens in one step attending to its whole
    ``prompt``, and one decode step attending to its prompt (module docstring)."""
    import numpy as np

    p = np.asarray(prompt, dtype=float)
    return _one_step_s(cost, np.asarray(computed, dtype=float), p), _one_step_s(cost, np.ones_like(p), p)


def run_lengths(args: Any, synthetic: Any) -> tuple[Any, Any, Any, bool] | None:
    """(step cost, prompt tokens, output tokens, prompts may share a prefix) of the simulation ``args`` and
    ``synthetic`` describe (``sim_ledgers.prepare_run``), or None when its step cost is not the plain roofline (or one
    under an overlapped CPU term, ``gpu_side``; DP ranks in lock-step: one rank's, ``LockstepWork``) or the
    lengths depend on the rate (the workload prepared at 1 and 2 req/s differ)."""
    import numpy as np

    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.analyses.serving.sim_ledgers import prepare_run

    if hasattr(synthetic, "prepare_setup"):  # sessions: closed loops whose prompts grow; no bound derived
        return None
    one, two = (prepare_run(replace(args, rate=r, rate_scale=None, concurrency=None), synthetic) for r in (1.0, 2.0))
    cost = gpu_side(lockstep_work(one.cost))  # DP ranks in lock-step: one rank's dense side (LockstepWork)
    if type(cost) is not RooflineStepCost and not isinstance(cost, LockstepWork):
        return None
    cols = []
    for setup in (one, two):
        w = setup.workload
        if hasattr(w, "num_prompt_tokens") and not callable(w.num_prompt_tokens):
            cols.append((np.asarray(w.num_prompt_tokens), np.asarray(w.num_output_tokens), False))
        else:
            specs = list(getattr(w, "requests", w))
            cols.append((np.array([s.num_prompt_tokens for s in specs]), np.array([s.num_output_tokens for s in specs]),
                         any(s.prefix_segments for s in specs)))
    (p, n, shared), (p2, n2, _) = cols
    if not (np.array_equal(p, p2) and np.array_equal(n, n2)):
        return None
    return cost, p, n, shared


def gpu_side(cost: Any) -> Any:
    """The roofline under an overlapped V1 CPU term (async scheduling, CUDA graphs: max(GPU, CPU) a step,
    ``host_overhead.cpu_can_lead``): every step takes at least its GPU time, so the GPU side's work bounds still hold
    (looser where the CPU leads); any other wrapper as it is."""
    from kvledger.accounting.host_overhead import HostStepCost

    if isinstance(cost, HostStepCost) and cost.host.overlapped:
        return cost.inner
    return cost


def busy_floor_s(cost: Any, computed: Any, output: Any, target: float) -> tuple[int, float]:
    """(k, s): the good requests a run meeting ``target`` holds at least, ``k = ⌈target × N⌉``, and the least engine
    time they take, the sum of the ``k`` smallest ``request_work_s`` (DP ranks in lock-step: ÷ the ranks,
    ``lockstep_busy_floor_s``)."""
    import numpy as np

    if isinstance(cost, LockstepWork):
        return lockstep_busy_floor_s(cost, computed, output, target)

    k = max(1, math.ceil(target * len(computed) - 1e-9))
    return k, float(np.sort(request_work_s(cost, computed, output))[:k].sum())


def capacity_bound_req_per_s(args: Any, synthetic: Any, target: float) -> float | None:
    """The capacity bound of the deployment ``args`` describes, req/s per deployment unit: ``R × k ÷ Σ of the k
    smallest w`` (module docstring) for its ``R`` replicas (``args.replicas``: each its own engine, so the busiest of
    them works at least Σ ÷ R), shaded up by ``SHADE``; None where none is proven."""
    import numpy as np

    got = run_lengths(args, synthetic)
    if got is None:
        return None
    cost, p, n, shared = got
    k, busy_s = busy_floor_s(cost, np.ones_like(p) if shared else p, n, target)
    replicas = max(1, int(getattr(args, "replicas", 1) or 1))
    return replicas * k / busy_s * (1 + SHADE) if busy_s > 0 else None


def capped(found: float, bound: float | None) -> float:
    """The capacity a replica is sized on: ``found`` (req/s), but never above ``bound`` (None: no bound proven)."""
    return found if bound is None or found <= bound else bound


BOUND_NOTE_START = "sized on "
"""How ``bound_note`` begins (the report shows the note as a warning)."""


def bound_clause(bound: float) -> str:
    """``sized on 17.08 req/s, the capacity bound``: how cost, goodput --target and search name the figure a capacity
    is sized on where the bound caps it (``bound_note`` begins with it)."""
    return f"{BOUND_NOTE_START}{bound:,.4g} req/s, the capacity bound"


def bound_note(bound: float, found: float) -> str:
    """The note a capacity sized on its bound carries: both figures, why, and the way to a longer probe."""
    return (f"{bound_clause(bound)}, not on the {found:,.4g} req/s SLO capacity "
            f"found: a replica cannot keep pace with more ({BOUND_SOURCE}); a probe of few requests, short against the "
            "SLO's latency budget, meets the target above it because its queue has no time to build (more "
            "--num-requests gives a longer probe)")


class LockstepWork:
    """One DP rank's roofline seen by the work bounds: its dense side (routed experts left out), with ``dp`` ranks.

    Args:
        rank: the rank's ``RooflineStepCost`` (``LockstepStepCost.inner``). dp: DP ranks, count.
        step_floor_s: the least MoE time every lock-step step pays, s (``lockstep_step_floor_s``; 0: none counted).
    """

    def __init__(self, rank: Any, dp: int, step_floor_s: float = 0.0) -> None:
        self.rank, self.dp, self.step_floor_s = rank, dp, step_floor_s
        self.matmul_params = rank.matmul_params - rank.expert_params_per_token  # per token, per GPU, dense only

    def weight_read_bytes(self, num_tokens: float) -> float:
        """The dense weights a step reads, B (the routed experts' reads are the MoE term's)."""
        return self.rank.dense_weight_bytes

    def __getattr__(self, name: str) -> Any:  # every other figure is the rank's roofline's
        return getattr(self.rank, name)


def lockstep_work(cost: Any) -> Any:
    """``LockstepWork`` of a ``LockstepStepCost`` whose rank prices a plain roofline (under an overlapped CPU term:
    ``gpu_side``); ``cost`` itself for any other step cost, None for a lock-step cost over another."""
    from kvledger.accounting.dp_lockstep_cost import LockstepStepCost
    from kvledger.accounting.roofline import RooflineStepCost

    if not isinstance(cost, LockstepStepCost):
        return cost
    rank = gpu_side(cost.inner)
    return LockstepWork(rank, cost.dp, lockstep_step_floor_s(cost)) if type(rank) is RooflineStepCost else None


def lockstep_step_floor_s(cost: Any) -> float:
    """The least MoE time any step of a ``LockstepStepCost`` takes, s (module docstring): the fused-MoE term over the
    fewest tokens a step's MoE layers take, one a rank (``moe_kernel.moe_layer_s``: layers × t0 + max(read, GEMM) ≥
    layers × t0 + the expert bytes those tokens touch at the fit's read bandwidth, × the config's factor; the EP read
    imbalance, ≥ 1, left out), and each MoE layer's two collectives moving at least one token from each other rank at
    the smaller per-call latency (``LockstepStepCost.gather_s``: latency + bytes)."""
    from kvledger.accounting.moe_kernel import FIT_BANDWIDTH_FRACTION, moe_kernel_fit

    rank, f, dp = cost.inner, moe_kernel_fit(), cost.dp
    kernel = 0.0
    if rank.moe_layers:
        factor = rank.moe_config.factor if rank.moe_config is not None else 1.0
        beta = f.read_fraction * rank.bandwidth_fraction / FIT_BANDWIDTH_FRACTION
        read_s = rank.expert_bytes * rank.experts_touched_fraction(dp) / (beta * rank.bw)
        kernel = factor * (rank.moe_layers * f.floor_s + read_s)
    return kernel + min(cost.gather_s(dp, 1, uniform=True), cost.gather_s(dp, 1, uniform=False))


def lockstep_busy_floor_s(work: LockstepWork, computed: Any, output: Any, target: float) -> tuple[int, float]:
    """(k, s): the good requests a run meeting ``target`` holds at least, ``k = ⌈target × N⌉``, and the least time the
    DP ranks take to serve them in lock-step: the sum of their ``k`` smallest dense-side works ÷ the ranks, plus the
    k-th smallest output length's steps at the MoE floor each step pays (module docstring)."""
    import numpy as np

    k = max(1, math.ceil(target * len(computed) - 1e-9))
    dense = float(np.sort(request_work_s(work, computed, output))[:k].sum()) / work.dp
    steps = float(np.sort(np.maximum(np.asarray(output, dtype=float), 1.0))[k - 1])
    return k, dense + steps * work.step_floor_s * (1 - SHADE)
