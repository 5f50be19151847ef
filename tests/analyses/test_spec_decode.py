"""Speculative decoding: Leviathan et al.'s expected tokens, the verification step's costs, the flip, and the simulator
sweep."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.judgments.spec_decode import SpecDecodeModel, expected_tokens_per_step, verify_shape
from kvledger.analyses.judgments.spec_decode_summary import analyse_spec_decode, make_draft
from kvledger.analyses.judgments.spec_sim import rounds_for_tokens, run_spec_sweep, spec_workload
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError


@pytest.fixture(scope="module")
def plan():
    return build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM"), make_settings(), with_advice=False)


def test_expected_tokens_per_step_leviathan():
    # (1 − 0.8^5) / (1 − 0.8) = (1 − 0.32768) / 0.2 = 3.3616
    assert expected_tokens_per_step(0.8, 4) == pytest.approx(3.3616)
    assert expected_tokens_per_step(1.0, 4) == 5.0 and expected_tokens_per_step(0.0, 4) == 1.0
    # the same mean from the round-length distribution the simulator samples: P(T=j) = α^(j−1)(1−α), j ≤ k; P(T=k+1) =
    # α^k
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
    assert one.verify_step_s == pytest.approx(one.base_step_s, rel=0.002) and one.speedup == pytest.approx(3.3616,
        rel=0.002)
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
    row = res.rates[0]
    assert row["base"]["num_finished"] == row["spec"]["num_finished"] == 24
    # light load: every round is a ~batch-1 step yielding 3.36 tokens on average → TPOT ≈ 1/3.36 of plain decode
    assert row["tpot_p50_ratio"] == pytest.approx(1 / 3.3616, rel=0.15)
    # the real output tokens are restored: 24 × 64 tokens over (nearly) the same duration
    assert row["throughput_ratio"] == pytest.approx(1.0, rel=0.1)
    with pytest.raises(InputError, match="rates"):
        run_spec_sweep(sm, [0.0])


def test_simulator_sweep_rate_row_independent_of_the_listed_rates(plan):
    # a rate's row comes from the seed alone: listing rates in another order, or others beside it, leaves it unchanged
    sm = SpecDecodeModel(plan, make_draft(), 4, 0.8)
    kw = dict(num_requests=16, prompt_tokens=256, output_tokens=32, seed=5)
    one = run_spec_sweep(sm, [2.0], **kw).rates[0]
    both = run_spec_sweep(sm, [8.0, 2.0], **kw).rates
    assert both[1] == one and both[0]["rate_per_s"] == 8.0


def _sweep_row(rate, tpot, ttft, e2e, tok_s):
    """One rate of run_spec_sweep: (plain, spec) pairs of median TPOT, TTFT, E2E (s) and output tok/s."""
    b = {"tpot_s": {"p50": tpot[0]}, "ttft_s": {"p50": ttft[0]}, "e2e_s": {"p50": e2e[0]},
         "throughput_output_tok_per_s": tok_s[0]}
    s = {"tpot_s": {"p50": tpot[1]}, "ttft_s": {"p50": ttft[1]}, "e2e_s": {"p50": e2e[1]},
         "throughput_output_tok_per_s": tok_s[1]}
    return {"rate_per_s": rate, "base": b, "spec": s, "tpot_p50_ratio": tpot[1] / tpot[0],
            "throughput_ratio": tok_s[1] / tok_s[0]}


def test_sweep_sentence_reads_throughput_and_latency_not_tpot_alone():
    from kvledger.analyses.judgments.spec_sim import SpecSweep, rate_verdict, sweep_sentence

    def sweep(rows):  # the workload the sentence names; the pool sizes are not part of it
        return SpecSweep(200, 2048, 256, 0, "Poisson", 0, 0, rows)

    # the trial's table (Llama-3.1-8B on an H100, Llama-3.2-3B drafting, k = 4, α = 0.8, 2,048 + 256 tokens):
    # at 16 req/s TPOT p50 33.00 → 30.35 ms (× 0.92) but output throughput 3,098 → 2,654 tok/s (× 0.86) and
    # TTFT p50 110.61 ms → 1.285 s: speculative decoding no longer keeps up, so it is behind there
    rows = [_sweep_row(1, (7.45e-3, 5.67e-3), (44.83e-3, 55.96e-3), (1.575, 1.220), (230.1, 230.5)),
            _sweep_row(4, (7.57e-3, 6.00e-3), (46.74e-3, 63.79e-3), (1.976, 1.607), (958, 964)),
            _sweep_row(16, (33.00e-3, 30.35e-3), (110.61e-3, 1.285), (8.483, 8.847), (3098, 2654))]
    assert [rate_verdict(r)[0] for r in rows] == ["ahead", "ahead", "behind"]
    text = sweep_sentence(sweep(rows))
    assert "stays ahead" not in text
    assert (
        "median TPOT × 0.76 / 0.79 / 0.92, median TTFT × 1.25 / 1.36 / 11.62, output throughput × 1.00 / 1.01 / 0.86"
        in text
    )
    assert "ahead at 1 and 4 req/s (with a higher median TTFT" in text
    assert ("behind at 16 req/s; at 16 req/s output throughput × 0.86: it no longer keeps up with the arrivals, "
            "median E2E × 1.04 (TTFT p50 110.61 ms → 1.285 s)") in text
    # ahead everywhere only when every rate keeps pace with lower TPOT and E2E
    calm = sweep_sentence(sweep(rows[:2]))
    assert "It stays ahead at every rate tried: lower median TPOT and E2E at the same throughput" in calm
    # TPOT lower but E2E higher is not "ahead"
    mixed = _sweep_row(8, (10e-3, 9e-3), (50e-3, 400e-3), (2.0, 2.3), (1000, 995))
    assert rate_verdict(mixed) == ("behind", ["median E2E × 1.15"])


def test_simulator_sweep_marks_each_rate(plan):
    sm = SpecDecodeModel(plan, make_draft(), 4, 0.8)
    res = run_spec_sweep(sm, [1.0], num_requests=24, prompt_tokens=512, output_tokens=64, seed=3)
    row = res.rates[0]
    assert row["verdict"] == "ahead" and row["verdict_because"] == []
    assert row["ttft_p50_ratio"] == pytest.approx(row["spec"]["ttft_s"]["p50"] / row["base"]["ttft_s"]["p50"])


def test_a_draft_of_another_vocabulary_is_refused_as_vllm_refuses_it():
    from kvledger.catalog.models import load_model
    from kvledger.errors import InputError

    # vLLM's SpeculativeConfig.verify_equal_vocab_size_if_draft_model: Qwen3-8B's 151,936-token vocabulary against
    # Llama-3.1-8B's 128,256 is refused; Llama-3.2-3B shares Llama-3.1's 128,256 and is taken
    target = load_model("meta-llama/Llama-3.1-8B")
    with pytest.raises(InputError, match=r"vocabulary of 151,936 tokens and .* of 128,256: vLLM refuses"):
        make_draft("Qwen/Qwen3-8B", target=target)
    assert make_draft("meta-llama/Llama-3.2-3B", target=target).kind == "model"


def test_a_loss_from_batch_1_is_not_called_a_gain_turning_and_a_still_flip_does_not_move(plan):
    # α = 0.3, k = 4: E = (1 − 0.3⁵)/(1 − 0.3) = 1.425 tokens a round, and the 3B draft's four steps cost more than the
    # 0.425 extra tokens save, so speculative decoding loses at batch 1 at every context: no "gain turns into a loss"
    # and no "moves with context" (a fresh-user trial read both against a table of batch 1 everywhere)
    r = analyse_spec_decode(plan.model, plan.gpu, make_settings(), draft_tokens=4, acceptance=0.3,
                            draft=make_draft("meta-llama/Llama-3.2-3B"), context_tokens=2048)
    assert {x["flip_batch"] for x in r.flips} == {1}
    text = " ".join(r.verdict)
    assert "There is no gain at 2,048 tokens: already at 1 sequence, a round costs" in text
    assert "turns into a loss" not in text and "move with context" not in text
    assert "It loses from batch 1 at every context checked (256, 512, 1,024, 2,048, 8,192, 32,768 tokens)." in text


def test_an_moe_loss_at_low_batch_that_turns_into_a_gain_is_said_with_both_ends():
    # Qwen3-30B-A3B (128 experts, top-8) on an H100, k = 3, α = 0.5: E = (1 − 0.5⁴)/0.5 = 1.875 tokens a round, an
    # MTP-like head at 0.1 of a decode step per draft token. At batch 1 plain decode touches 8 experts a layer, the
    # 4-token verification 128·(1 − (120/128)⁴) = 29.1 (uniform routing); with the fused-MoE kernel's per-layer floor
    # (moe_kernel.py; × vLLM's default-config factor 1.0315 where no tuned config ships, moe_config.py) the step goes
    # 4.40 ms → 7.83 ms (×1.78; the fused-MoE fit of 2026-12-06), a round 7.83 + 3 × 0.1 × 4.40 = 9.15 ms for 1.875
    # tokens: 1.875 × 4.40 / 9.15 = 0.902×, a loss. At batch 64 plain decode's 64 tokens already touch
    # 128·(1 − (120/128)⁶⁴) = 127.8 experts, so verification costs about one step (28.29 → 28.63 ms) and the round
    # gains 1.875 × 28.29 / (28.63 + 0.3 × 28.29) = 1.43×. The speed-up is not monotone in batch: a flip at 1 is not
    # "no gain at every batch" (a trial read that against a gain at pool full).
    m = load_model("Qwen/Qwen3-30B-A3B")
    r = analyse_spec_decode(m, get_gpu("H100-SXM"), make_settings(), draft_tokens=3, acceptance=0.5,
                            draft=make_draft(None, 0.1), context_tokens=2048)
    f = next(x for x in r.flips if x["context_tokens"] == 2048)
    assert f["flip_batch"] == 1 and f["gain_again_batch"] == 12 and f["loss_again_batch"] is None
    sm = SpecDecodeModel(build_plan(m, get_gpu("H100-SXM"), make_settings(contexts=(2048,)), with_advice=False),
                         make_draft(None, 0.1), 3, 0.5)
    one, big = sm.row(1, 2048), sm.row(64, 2048)
    assert one.verify_step_s / one.base_step_s == pytest.approx(1.77, abs=0.02)
    assert one.speedup == pytest.approx(1.875 * one.base_step_s / (one.verify_step_s + 0.3 * one.base_step_s))
    assert one.speedup == pytest.approx(0.902, abs=0.005)
    assert sm.speedup(11, 2048) < 1.0 <= sm.speedup(12, 2048)
    assert big.verify_step_s == pytest.approx(big.base_step_s, rel=0.02)
    assert big.speedup == pytest.approx(1.43, abs=0.02)
    text = " ".join(r.verdict)
    assert "There is no gain" not in text and "at every batch" not in text
    assert "At 2,048 tokens speculative decoding loses from 1 sequence on" in text
    assert "From 12 concurrent sequences on it gains again (1.002× at 12: plain decode's own step already reads " \
           "most experts there" in text and "up to max_num_seqs." in text
    assert "2,048 tokens: a loss at batch 1–11, a gain from 12;" in text


def test_a_ratio_that_two_decimals_would_round_to_one_keeps_the_digits_that_say_its_side():
    # acceptance 0: a round still yields one token, so the speed-up is plain step ÷ (verify + draft) just under 1;
    # "1.00×" beside a verdict of a loss read as a contradiction
    from kvledger.units import fmt_ratio

    assert (fmt_ratio(1.93), fmt_ratio(1.0), fmt_ratio(0.998), fmt_ratio(1.0034)) == ("1.93×", "1.00×", "0.998×",
                                                                                       "1.003×")
    assert fmt_ratio(0.99996) == "1.0000×"  # below 0.005%: shown at four decimals, the most kept


def test_a_moe_draft_is_priced_with_the_plan_terms_of_its_own_settings():
    # Qwen3-30B-A3B drafting for Qwen3-235B-A22B on B200 at TP 4: the draft's step carries the fused-MoE config factor
    # plan_moe_config gives the draft at TP 4 (tuned or vLLM's default config), the custom all-reduce bound, and not
    # the target's given weight bytes
    from dataclasses import replace

    from kvledger.accounting.plan_roofline import plan_moe_config
    from kvledger.accounting.roofline_breakdown import decode_shape
    from kvledger.accounting.vllm_custom_ar import custom_ar_max_bytes

    target, dm, gpu = load_model("Qwen/Qwen3-235B-A22B"), load_model("Qwen/Qwen3-30B-A3B"), get_gpu("B200")
    s = make_settings(tp=4, contexts=(2048,))
    sm = SpecDecodeModel(build_plan(target, gpu, s, with_advice=False), make_draft("Qwen/Qwen3-30B-A3B"), 4, 0.8)
    want = plan_moe_config(dm, gpu, s)
    assert want is not None and sm.draft_rc.moe_config == want
    assert sm.draft_rc.moe_config.factor == want.factor == pytest.approx(1.0315) and sm.draft_rc.tp == 4
    assert sm.draft_rc.custom_allreduce_max_bytes == custom_ar_max_bytes(s, gpu) > 0
    given = replace(s, weights_bytes=100 * 2**30)  # the target's measured weights: not the draft's
    sw = SpecDecodeModel(build_plan(target, gpu, given, with_advice=False), make_draft("Qwen/Qwen3-30B-A3B"), 4, 0.8)
    assert sw.draft_rc.costs(decode_shape(8, 2048)) == sm.draft_rc.costs(decode_shape(8, 2048))
