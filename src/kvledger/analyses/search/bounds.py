"""Analytic bounds on one colocated candidate, before any simulation, under the simulator's own roofline step cost.

Every step of ``kvledger.accounting.roofline.RooflineStepCost`` costs at least
``max(matmul FLOPs / achievable peak, weight bytes / achievable bandwidth) + KV bytes / achievable bandwidth +
all-reduce`` (+ the CPU overhead, or the larger of the two under async scheduling): its attention term is a max (or, for
split kernels, a sum of maxes) over the KV bytes, the MoE factors are ≥ 1 and the other terms ≥ 0. Of these,
``2 × matmul params`` FLOPs per token, ``head`` FLOPs per sequence, the KV bytes per context token and the all-reduce
bytes per token add up over the tokens of a step; so a request of ``P`` prompt tokens (1 when prompts may share a
cached prefix) and ``n`` output tokens makes its engine busy for at least

    w = (2·mp·(P + n − 1) + head·n) / peak + g·((n − 1)·P + (n − 1)(n − 2)/2 + P) / bw + ar·(P + n − 1)

(its ``n − 1`` decodes attend to at least ``P``, ``P + 1``, … keys). Steps run one after another, so a run whose
attainment meets the target (at least ``k = ⌈target × N⌉`` good requests) spans at least the ``k`` smallest ``w``:

* SLO capacity ≤ k ÷ Σ of the k smallest w, good req/s; output tokens/s per GPU ≤ all output tokens ÷ that sum ÷ TP;
* TPOT of request i ≥ one decode step ≥ weight bytes of a 1-token step / bw + g·P_i / bw + all-reduce of 1 token
  (+ CPU); at a load meeting the target at least m = k − (requests of one output token) requests with more than one
  are good, so the median TPOT is at least the ⌈m/2⌉-th smallest of these bounds, and tokens/s per user (1 ÷ the
  median) at most 1 ÷ it;
* TTFT of request i ≥ the same terms over its P_i prompt tokens in one step; a request whose TTFT or TPOT bound is
  above the SLO misses at every rate, so attainment ≤ the share of the others at any rate. A ``--client-latency`` d
  adds exactly d to every TTFT and E2E (``kvledger.analyses.search.latency``), so it is added to their bounds too.

Each bound is shaded by 1e-9 against rounding. Disaggregated units and other step costs get no bound (None).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kvledger.analyses.search.screen import sim_args
from kvledger.analyses.search.spec import Candidate, SearchSpec
from kvledger.jsonable import to_jsonable

__all__ = ["Bounds", "candidate_bounds", "request_work_s", "latency_bounds_s", "point_skipper", "SHADE"]

SHADE = 1e-9
"""Relative margin given to every bound against floating-point rounding (a bound is pushed outward by this)."""


@dataclass(frozen=True)
class Bounds:
    """Upper bounds over every rate the capacity search may probe (see the module docstring); per deployment unit.

    capacity_req_per_s: SLO capacity, good req/s. output_tok_per_s_per_gpu: good output tokens/s per GPU at any load
    meeting the target. tok_per_s_per_user: 1 ÷ median TPOT at any load. attainment: share of requests whose TTFT and
    TPOT lower bounds are within the SLO (attainment at any rate is at most this). prompt_tokens_mean /
    output_tokens_mean: the workload's means, tokens (what the sizing converts a monthly volume with).
    """

    capacity_req_per_s: float
    output_tok_per_s_per_gpu: float
    tok_per_s_per_user: float
    attainment: float
    prompt_tokens_mean: float
    output_tokens_mean: float
    source: str = ("kvledger.analyses.search.bounds: per-request roofline work (matmul FLOPs, KV bytes, all-reduce "
                   "bytes) under the simulator's step cost")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def request_work_s(cost: Any, prompt: Any, output: Any) -> Any:
    """Lower bound on the engine time each request needs (numpy arrays of computed prompt and output tokens), s."""
    import numpy as np

    p, n = np.asarray(prompt, dtype=float), np.maximum(np.asarray(output, dtype=float), 1.0)
    tokens = p + n - 1
    mm = (2 * cost.matmul_params * tokens + cost.head_flops_per_seq * n) / (cost.peak_flops * cost.flops_fraction)
    kv = cost.growing_read_bytes * ((n - 1) * p + (n - 1) * (n - 2) / 2 + p) / (cost.bw * cost.bandwidth_fraction)
    return (mm + kv + _allreduce_per_token_s(cost) * tokens) * (1 - SHADE)


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
    mm = 2 * cost.matmul_params * tokens / (cost.peak_flops * cost.flops_fraction)
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


def _lengths(spec: SearchSpec, cand: Candidate) -> tuple[Any, Any, Any, bool] | None:
    """(step cost, prompt tokens, output tokens, prompts may share a prefix) of the candidate's simulation, or None
    when its step cost is not the plain roofline or the lengths depend on the rate."""
    import numpy as np

    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.analyses.serving.sim_ledgers import prepare_run

    if hasattr(spec.synthetic, "prepare_setup"):  # sessions: closed loops whose prompts grow; no bound derived
        return None
    one, two = (prepare_run(replace(sim_args(spec, cand), rate=r), spec.synthetic) for r in (1.0, 2.0))
    if type(one.cost) is not RooflineStepCost:
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
    return one.cost, p, n, shared


def candidate_bounds(spec: SearchSpec, cand: Candidate, slo: Any) -> Bounds | None:
    """The bounds of one planned colocated candidate (module docstring), or None where none is proven."""
    import numpy as np

    if cand.disagg:
        return None
    got = _lengths(spec, cand)
    if got is None:
        return None
    cost, p, n, shared = got
    computed = np.ones_like(p) if shared else p
    k = max(1, math.ceil(spec.target * len(p) - 1e-9))
    w = np.sort(request_work_s(cost, computed, n))
    busy_s = float(w[:k].sum())
    if not busy_s > 0:
        return None
    from kvledger.analyses.search.latency import latency_s

    ttft, tpot = latency_bounds_s(cost, p, computed)
    ttft = ttft + latency_s(spec)  # the client's TTFT (and so E2E): the engine's + the client latency, exactly
    ok = np.ones(len(p), dtype=bool)
    if slo.ttft_s is not None:
        ok &= ttft <= slo.ttft_s
    if slo.tpot_s is not None:
        ok &= (n <= 1) | (tpot <= slo.tpot_s)
    if slo.e2e_s is not None:
        ok &= ttft + np.maximum(n - 1, 0) * tpot <= slo.e2e_s
    multi = np.sort(tpot[n > 1])
    m = max(1, k - int((n <= 1).sum()))  # good requests with a TPOT at any load meeting the target, at least
    least = float(multi[min(len(multi), math.ceil(m / 2)) - 1]) if multi.size else 0.0
    if not least > 0:  # no request of two output tokens, or a free step: no finite bound (and --json is strict)
        return None
    user = 1.0 / least
    up = 1 + SHADE
    return Bounds(k / busy_s * up, float(n.sum()) / busy_s / cand.num_gpus * up, user * up,
                  float(ok.sum()) / len(p), float(p.mean()), float(n.mean()))


def point_skipper(spec: SearchSpec, cand: Candidate, bounds: dict[str, Any] | None,
                  known: list[list[Any]]) -> Any:
    """For a candidate's lighter operating points: ``skip(rate)`` → the evidence that its point at ``rate`` cannot
    reach the frontier (a ``known`` point [candidate id, tokens/s per user, output tokens/s per GPU] at least as good
    as both its bounds, better on one), or None. At ``rate`` the good output tokens/s are also at most all output tokens
    ÷ the workload's arrival span there (a run lasts from its first arrival to its last finish)."""
    def skip(rate: float) -> dict[str, Any] | None:
        if bounds is None or not known:
            return None
        from kvledger.analyses.serving.sim_ledgers import prepare_run

        arrivals = prepare_run(replace(sim_args(spec, cand), rate=rate), spec.synthetic).workload
        times = [float(arrivals[0].arrival_s), float(arrivals[len(arrivals) - 1].arrival_s)]
        out_tokens = bounds["output_tokens_mean"] * len(arrivals)
        gpu = bounds["output_tok_per_s_per_gpu"]
        if times[1] > times[0]:
            gpu = min(gpu, out_tokens / (times[1] - times[0]) / cand.num_gpus * (1 + SHADE))
        user = bounds["tok_per_s_per_user"]
        for cid, u, g in known:
            if u >= user and g >= gpu and (u > user or g > gpu):
                return {"by": cid, "output_tok_per_s_per_gpu_bound": gpu,
                        "margin": min(u / user - 1.0, g / gpu - 1.0 if gpu > 0 else math.inf)}
        return None

    return skip
