"""Analytic bounds on one colocated candidate, before any simulation, under the simulator's own roofline step cost.

The per-request work ``w`` and the capacity bound it gives (``k ÷ Σ of the k smallest w``, ``k = ⌈target × N⌉``) are
derived in ``kvledger.analyses.serving.work_bounds``, which ``cost --simulate`` and ``report`` size against too. From
them, per deployment unit:

* SLO capacity ≤ k ÷ Σ of the k smallest w, good req/s; output tokens/s per GPU ≤ all output tokens ÷ that sum ÷ TP;
* TPOT of request i ≥ one decode step ≥ weight bytes of a 1-token step / bw + g·P_i / bw + all-reduce of 1 token
  (+ CPU); at a load meeting the target at least m = k − (requests of one output token) requests with more than one
  are good, so the median TPOT is at least the ⌈m/2⌉-th smallest of these bounds, and tokens/s per user (1 ÷ the
  median) at most 1 ÷ it (0 when every output is one token: there is no TPOT);
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
from kvledger.analyses.serving.work_bounds import SHADE, busy_floor_s, latency_bounds_s, run_lengths
from kvledger.jsonable import to_jsonable

__all__ = ["Bounds", "candidate_bounds", "point_skipper"]

@dataclass(frozen=True)
class Bounds:
    """Upper bounds over every rate the capacity search may probe (see the module docstring); per deployment unit.

    capacity_bound_req_per_s: the SLO capacity's upper bound, req/s. output_tok_per_s_per_gpu: good output tokens/s per
    GPU at any load meeting the target. tok_per_s_per_user: 1 ÷ median TPOT at any load. attainment: share of requests
    whose TTFT and TPOT lower bounds are within the SLO (attainment at any rate is at most this). prompt_tokens_mean /
    output_tokens_mean: the workload's means, tokens (what the sizing converts a monthly volume with).
    """

    capacity_bound_req_per_s: float
    output_tok_per_s_per_gpu: float
    tok_per_s_per_user: float
    attainment: float
    prompt_tokens_mean: float
    output_tokens_mean: float
    source: str = ("kvledger.analyses.search.bounds: per-request roofline work (matmul FLOPs, KV bytes, all-reduce "
                   "bytes) under the simulator's step cost")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def candidate_bounds(spec: SearchSpec, cand: Candidate, slo: Any) -> Bounds | None:
    """The bounds of one planned colocated candidate (module docstring), or None where none is proven."""
    import numpy as np

    if cand.disagg:
        return None
    got = run_lengths(sim_args(spec, cand), spec.synthetic)
    if got is None:
        return None
    cost, p, n, shared = got
    computed = np.ones_like(p) if shared else p
    k, busy_s = busy_floor_s(cost, computed, n, spec.target)
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
    user = _user_bound(tpot, n, k)
    if user is None:
        return None
    up = 1 + SHADE
    return Bounds(k / busy_s * up, float(n.sum()) / busy_s / cand.num_gpus * up, user * up,
                  float(ok.sum()) / len(p), float(p.mean()), float(n.mean()))


def _user_bound(tpot: Any, n: Any, k: int) -> float | None:
    """Tokens/s per user at most (module docstring): 1 ÷ the ⌈m/2⌉-th smallest TPOT bound of the requests of more than
    one output token. 0 where there is none (every output one token: no TPOT, so the capacity's tokens/s per user is
    none, which the ranking and the frontiers read as 0; the other bounds stand, the capacity bound among them);
    None where a step is free (no finite bound, and --json is strict)."""
    import numpy as np

    multi = np.sort(tpot[n > 1])
    if not multi.size:
        return 0.0
    m = max(1, k - int((n <= 1).sum()))  # good requests with a TPOT at any load meeting the target, at least
    least = float(multi[min(len(multi), math.ceil(m / 2)) - 1])
    return 1.0 / least if least > 0 else None


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
