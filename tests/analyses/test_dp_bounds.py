"""The lock-step busy floor of vLLM's DP ranks (analyses/serving/work_bounds.py): each request's dense-side work (the
routed experts left to the MoE term the ranks share), summed over the k smallest and divided by the ranks; worked by
hand on a stub roofline, and checked against the lock-step simulation it bounds."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kvledger.analyses.serving.work_bounds import SHADE, LockstepWork, busy_floor_s, lockstep_busy_floor_s

# One rank's roofline, round numbers: 3e9 matmul params per token of which 2e9 are routed experts' (so 1e9 dense),
# 1e15 FLOP/s at fraction 1 and GEMM efficiency 1, no head, no KV reads, no all-reduce (TP 1).
RANK = SimpleNamespace(matmul_params=3e9, expert_params_per_token=2e9, dense_weight_bytes=5e9, head_flops_per_seq=0.0,
                       peak_flops=1e15, flops_fraction=1.0, peak_matmul_efficiency=lambda: 1.0, growing_read_bytes=0.0,
                       bw=1e12, bandwidth_fraction=1.0, num_allreduce_layers=0)
PROMPT = np.array([100, 200, 300, 999])
OUTPUT = np.array([1, 1, 1, 2])


def test_two_ranks_floor_by_hand():
    work = LockstepWork(RANK, 2)
    assert work.matmul_params == 1e9  # 3e9 − 2e9: the experts are the MoE term's, which every rank runs for all
    assert work.weight_read_bytes(1) == 5e9 and work.bw == 1e12  # the dense weights; the rest is the rank's
    # w = 2 × 1e9 × (P + n − 1) / 1e15 = 2e-6 s per token: 100 → 2e-4, 200 → 4e-4, 300 → 6e-4, 999 + 1 → 2e-3 s.
    # target 0.75 of 4 requests: k = ⌈3⌉ = 3, the three smallest sum to 1.2e-3 s; two ranks in lock-step take at
    # least half of it (a step lasts the slowest rank's, at least the mean of the two): 6e-4 s (× (1 − 1e-9), the shade)
    k, busy = lockstep_busy_floor_s(work, PROMPT, OUTPUT, 0.75)
    assert k == 3 and busy == pytest.approx(6e-4 * (1 - SHADE), rel=1e-12)
    assert busy_floor_s(work, PROMPT, OUTPUT, 0.75) == (k, busy)  # work_bounds' floor takes the lock-step one
    # the capacity bound k ÷ busy: 3 / 6e-4 = 5,000 req/s. One engine's floor over the whole rank's roofline (experts
    # in its matmuls, no ÷ 2) would be 3 × 1.2e-3 = 3.6e-3 s, a bound of 833 req/s: 6 × too low, pruning DP candidates
    one = SimpleNamespace(**{**vars(RANK)})
    _, single = busy_floor_s(one, PROMPT, OUTPUT, 0.75)
    assert single == pytest.approx(3.6e-3 * (1 - SHADE), rel=1e-12) and k / busy == pytest.approx(5000.0)


def test_every_step_adds_the_moe_floor_by_hand():
    # F = 1e-4 s a step. target 0.75: k = 3, dense 6e-4 s as above; outputs sorted 1, 1, 1, 2: the 3rd smallest is 1,
    # so the three good requests take at least 1 step: 6e-4 + 1 × 1e-4 = 7e-4 s. target 1: k = 4, dense (2e-4 + 4e-4
    # + 6e-4 + 2e-3) ÷ 2 = 1.6e-3 s, the 4th smallest output 2 → 2 steps: 1.6e-3 + 2e-4 = 1.8e-3 s
    work = LockstepWork(RANK, 2, step_floor_s=1e-4)
    assert lockstep_busy_floor_s(work, PROMPT, OUTPUT, 0.75)[1] == pytest.approx(7e-4 * (1 - SHADE), rel=1e-12)
    assert lockstep_busy_floor_s(work, PROMPT, OUTPUT, 1.0)[1] == pytest.approx(1.8e-3 * (1 - SHADE), rel=1e-12)


def test_the_moe_floor_of_deepseek_v3_on_eight_h200_ranks():
    # Every step's MoE layers take at least one token a rank (an idle rank's dummy): 8 tokens. The fused-MoE term is
    # 58 layers × t0 (42.64 µs; the tuned config's factor 1.0) = 2.473 ms plus max(read, GEMM) ≥ the read of the
    # experts 8 tokens touch: 1 − (1 − 8/256)^8 = 22.43 % of the GPU's 81,758,552,064 expert bytes at the fit's
    # read share 0.8587 of 4.8 TB/s = 4.449 ms → 6.922 ms, under the least fused-MoE term at 8 to 599 tokens
    # (9.718 ms). The collectives: 58 × 2 calls, each moving at least the 7 other ranks' token (7 × 7,168 × 2 B at
    # 450 GB/s = 0.223 µs) at the smaller latency, the grouped broadcasts' 26.523 µs (the 8-rank all-reduce fit
    # 34.323 µs less 14 × 0.6 µs, plus 0.6 µs), not the all-gather's 30.123 µs: 3.103 ms. F = 10.025 ms.
    from kvledger.accounting.dp_lockstep_cost import LockstepStepCost
    from kvledger.accounting.moe_kernel import moe_kernel_fit
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.serving.work_bounds import lockstep_step_floor_s
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    s = make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True)
    inner = build_plan(load_model("deepseek-ai/DeepSeek-V3"), resolve_gpu("H200"), s, with_advice=False).step_cost()
    cost = LockstepStepCost(inner, 8, 512)
    f = moe_kernel_fit()
    assert f.floor_s == pytest.approx(42.64e-6, abs=5e-9) and inner.moe_config.factor == 1.0
    assert inner.expert_bytes == 81_758_552_064 and inner.bw == 4.8e12
    kernel = 58 * f.floor_s + 81_758_552_064 * (1 - (1 - 8 / 256) ** 8) / (f.read_fraction * 4.8e12)
    calls = 58 * 2 * (34.323022222222223e-6 - 14 * 0.6e-6 + 0.6e-6 + 7 * 7168 * 2 / 450e9)
    assert kernel == pytest.approx(6.922e-3, abs=1e-6) and calls == pytest.approx(3.103e-3, abs=1e-6)
    assert lockstep_step_floor_s(cost) == pytest.approx(kernel + calls, rel=1e-12)
    assert lockstep_step_floor_s(cost) == pytest.approx(10.025e-3, abs=1e-6)
    assert min(inner.moe_kernel_s(t) for t in range(8, 600)) > kernel


def test_floor_holds_under_the_lockstep_simulation():
    # DeepSeek-V3 on 8 × H200 as DP 8 + EP (TP 1): every one of 50 azure-conv requests arriving at once; the run must
    # last at least the floor over all of them (target 1), and each TTFT at least its bound
    from dataclasses import replace

    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate, SearchSpec
    from kvledger.analyses.serving.sim_ledgers import prepare_run, run_prepared
    from kvledger.analyses.serving.work_bounds import latency_bounds_s, run_lengths

    args = sim_args(SearchSpec(model="deepseek-ai/DeepSeek-V3", slo="ttft=2s", num_requests=50),
                    Candidate("nvidia_h200_sxm", 1, enable_expert_parallel=True, data_parallel_size=8))
    cost, p, n, shared = run_lengths(args, None)
    assert isinstance(cost, LockstepWork) and cost.dp == 8 and not shared
    k, busy = busy_floor_s(cost, p, n, 1.0)
    a = replace(args, rate=float("inf"))
    res = run_prepared(prepare_run(a, None), a).result
    assert k == 50 and 0 < busy <= res.summary.duration_s
    recs = res.records.record_list
    ttft, _ = latency_bounds_s(cost, np.array([r.num_prompt_tokens for r in recs]),
                               np.array([r.num_prompt_tokens for r in recs]))
    assert all(r.ttft_s >= t for r, t in zip(recs, ttft))
