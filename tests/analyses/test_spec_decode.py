"""Speculative decoding: Leviathan et al.'s expected tokens, the verification step's costs, the flip, and the simulator sweep."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.spec_decode import SpecDecodeModel, expected_tokens_per_step, verify_shape
from kvledger.analyses.spec_report import analyse_spec_decode, make_draft
from kvledger.analyses.spec_sim import rounds_for_tokens, run_spec_sweep, spec_workload
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.workload import RequestSpec
from kvledger.errors import InputError


@pytest.fixture(scope="module")
def plan():
    return build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM"), make_settings(), with_advice=False)


def test_expected_tokens_per_step_leviathan():
    # (1 − 0.8^5) / (1 − 0.8) = (1 − 0.32768) / 0.2 = 3.3616
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens_per_step(1.0, 4) == 5.0 and expected_tokens_per_step(0.0, 4) == 1.0
    # the same mean from the round-length distribution the simulator samples: P(T=j) = α^(j−1)(1−α), j ≤ k; P(T=k+1) = α^k
    a, k = 0.7, 3
    mean = sum(j * a ** (j - 1) * (1 - a) for j in range(1, k + 1)) + (k + 1) * a ** k
    assert mean == pytest.approx(expected_tokens_per_step(a, k))
    for bad in ((1.2, 4), (-0.1, 4), (0.5, 0)):
        with pytest.raises(InputError):
            expected_tokens_per_step(*bad)


def test_verify_shape_counts_causal_pairs():
    # k = 4 at context 10: 5 new tokens after 9 computed; pairs 5·9 + (1+2+3+4+5) = 60; KV 9 + 5 = 14 per sequence
    s = verify_shape(3, 10, 4)
    assert (s.num_prefill_tokens, s.num_prefill_seqs, s.prefill_kv_tokens, s.prefill_attn_pairs) == (15, 3, 42, 180.0)


def test_verification_costs_at_low_and_high_load(plan):
    sm = SpecDecodeModel(plan, make_draft(), 4, 0.8)
    rc = sm.rc
    c = sm.verify_costs(64, 1024)
    # k+1 = 5 tokens per sequence through the weights, logits at all 5 positions
    assert c.matmul_flops == pytest.approx(2 * rc.matmul_params * 320 + rc.head_flops_per_seq * 320)
    one = sm.row(1, 2048)
    # batch 1 is bandwidth-bound: 5 tokens cost what 1 does (+4 tokens of KV and 4× the tiny FLOPs) → speed-up ≈ E
    assert one.verify_step_s == pytest.approx(one.base_step_s, rel=0.002) and one.speedup == pytest.approx(3.3616, rel=0.002)
    big = sm.row(256, 2048)  # 256 × 5 = 1,280 tokens per step, past the ≈296-token ridge crossover
    assert big.verify_bound == "compute" and big.base_bound == "memory" and big.speedup < one.speedup


def test_flip_is_where_speedup_crosses_one_and_moves_with_context(plan):
    free = SpecDecodeModel(plan, make_draft(), 4, 0.8)
    f = free.flip_batch(256, 1024)
    assert f is not None and free.speedup(f - 1, 256) >= 1.0 > free.speedup(f, 256)
    assert free.flip_batch(2048, 1024) is None  # KV reads (shared by both) dilute the extra GEMM work
    # a draft costing 0.3 of a decode step per token: 4 × 0.3 = 1.2 steps of drafting per round
    frac = SpecDecodeModel(plan, make_draft(draft_cost_fraction=0.3), 4, 0.8)
    assert frac.row(1, 2048).speedup == pytest.approx(3.3616 / 2.2, rel=0.003)
    assert frac.flip_batch(256, 1024) < f


def test_draft_model_shares_the_pool(plan):
    sm = SpecDecodeModel(plan, make_draft("meta-llama/Llama-3.2-3B"), 4, 0.8)
    # Llama-3.2-3B: 2 × 28 layers × 8 KV heads × 128 × 2 B = 114,688 B/token; its weights leave the pool too
    assert sm.draft_kv_bytes_per_token == 114_688
    expect = int((plan.memory.available_kv_bytes - sm.draft_weight_bytes) // ((131_072 + 114_688) * 16))
    assert sm.pool_blocks() == expect < plan.memory.num_gpu_blocks / 2
    r = analyse_spec_decode(plan.model, plan.gpu, make_settings(), draft_tokens=4, acceptance=0.8,
                            draft=make_draft("meta-llama/Llama-3.2-3B"), context_tokens=2048)
    flips = [x["flip_batch"] for x in r.flips]
    assert all(x is not None for x in flips) and flips == sorted(flips, reverse=True)  # the draft reads its own KV
    assert any("turns into a loss" in v for v in r.verdict)
    with pytest.raises(InputError, match="not both"):
        make_draft("meta-llama/Llama-3.2-3B", 0.1)


def test_rounds_for_tokens():
    rng = np.random.default_rng(0)
    assert rounds_for_tokens(255, 4, 1.0, rng) == 51  # ⌈255 / 5⌉
    assert rounds_for_tokens(255, 4, 0.0, rng) == 255  # nothing accepted: one token per round
    assert rounds_for_tokens(0, 4, 0.5, rng) == 0
    n = rounds_for_tokens(20_000, 4, 0.8, np.random.default_rng(1))
    assert n == pytest.approx(20_000 / 3.3616, rel=0.02)  # mean round length E; sd of the sum ≈ 0.6% here
    reqs = [RequestSpec("a", 0.0, 10, 101), RequestSpec("b", 0.0, 10, 1)]
    out = spec_workload(reqs, 4, 1.0, 0)
    assert [r.num_output_tokens for r in out] == [21, 1]  # 1 (prefill) + ⌈100/5⌉; a 1-token output has no rounds


def test_simulator_sweep_low_load_gain(plan):
    sm = SpecDecodeModel(plan, make_draft(), 4, 0.8)
    res = run_spec_sweep(sm, [1.0], num_requests=24, prompt_tokens=512, output_tokens=64, seed=3)
    row = res["rates"][0]
    assert row["base"]["num_finished"] == row["spec"]["num_finished"] == 24
    # light load: every round is a ~batch-1 step yielding 3.36 tokens on average → TPOT ≈ 1/3.36 of plain decode
    assert row["tpot_p50_ratio"] == pytest.approx(1 / 3.3616, rel=0.15)
    # the real output tokens are restored: 24 × 64 tokens over (nearly) the same duration
    assert row["throughput_ratio"] == pytest.approx(1.0, rel=0.1)
    with pytest.raises(InputError, match="rates"):
        run_spec_sweep(sm, [0.0])
