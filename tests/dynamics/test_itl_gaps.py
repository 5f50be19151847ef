"""Without token times the simulator keeps the exact ITL distribution (step gaps × counts) and the same records
otherwise."""

from __future__ import annotations

import numpy as np
import pytest
from test_engine import CONFIGS, random_workload

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate


def test_two_requests_by_hand():
    # 10 ms steps. Step 0 prefills both prompts (first tokens at t = 0.01), step 1 decodes both
    # (t = 0.02, r1 done: 2 tokens), step 2 decodes r0 (t = 0.03, r0 done: 3 tokens).
    # ITLs: r0 0.02 − 0.01 and 0.03 − 0.02, r1 0.02 − 0.01: count 3, p50 = the middle one = 0.02 − 0.01.
    reqs = [RequestSpec("r0", 0.0, 4, 3), RequestSpec("r1", 0.0, 4, 2)]
    cfg = EngineConfig(num_gpu_blocks=10, block_size=4, max_model_len=16)
    res = simulate(reqs, cfg, FixedStepCost(0.01), record_token_times=False)
    itl = res.summary.itl_s
    t1, t2 = 0.01, 0.01 + 0.01
    t3 = t2 + 0.01
    assert itl.count == 3
    assert itl.p50 == sorted([t2 - t1, t3 - t2, t2 - t1])[1] and itl.p99 == pytest.approx(0.01, abs=1e-15)
    assert [r.chunk_times_s for r in res.records.records] == [None, None]
    assert [(r.first_token_s, r.finish_s) for r in res.records.records] == [(t1, t3), (t1, t2)]


def _same_run(reqs, cfg, cost):
    full = simulate(reqs, cfg, cost)
    lean = simulate(reqs, cfg, cost, record_token_times=False)
    a, b = full.summary, lean.summary
    assert a.itl_s == b.itl_s  # bit for bit, the mean included (both correctly rounded: exact_mean.py)
    for name in ("ttft_s", "tpot_s", "e2e_s"):
        assert getattr(a, name) == getattr(b, name)
    assert a.kv_usage == b.kv_usage and a.num_preemptions == b.num_preemptions and a.num_steps == b.num_steps
    for x, y in zip(full.records.records, lean.records.records):
        assert (x.request_id, x.first_token_s, x.finish_s, x.num_preemptions, x.num_cached_tokens, x.error) == \
               (y.request_id, y.first_token_s, y.finish_s, y.num_preemptions, y.num_cached_tokens, y.error)
        assert y.chunk_times_s is None
    return a


@pytest.mark.parametrize("name", ["vllm-roomy", "vllm-tight", "sglang-tight", "static", "v0-tight", "sliding",
                                  "async-tight", "async-sglang", "sliding-step-async", "sglang-rule"])
def test_lean_run_reports_the_same_figures(name):
    s = _same_run(random_workload(300), EngineConfig(**CONFIGS[name]), FixedStepCost(0.005, 1e-5))
    if name == "vllm-tight":
        assert s.num_preemptions > 0  # gaps that span a preemption are counted one by one


def test_exact_mean_does_not_depend_on_grouping_into_counts():
    # The mean is the sum of the doubles' exact values (0.1 = 3602879701896397 / 2^55, ...; each value × count exact),
    # rounded once to a double, then divided by the count: whether the gaps come one by one or as (value, count)
    # pairs, the same double. Reference: the sum in Fractions.
    from fractions import Fraction

    from kvledger.dynamics.outputs.exact_mean import exact_mean

    values, counts = np.array([0.1, 0.2, 0.3]), np.array([3, 7, 1], dtype=np.int32)
    expanded = np.repeat(values, counts)
    exact = float(sum(Fraction(v) * int(c) for v, c in zip(values, counts))) / int(counts.sum())
    assert exact_mean(values, counts) == exact_mean(expanded) == exact
    big = np.full(1 << 17, 0.1)  # past one 64k chunk: 393,216 × 0.1 with one rounding, not 393,216 of them
    n = 3 * len(big)
    assert exact_mean(big, np.full(len(big), 3, dtype=np.int32)) == exact_mean(np.repeat(big, 3)) \
        == float(Fraction(0.1) * n) / n


def test_exact_mean_is_the_correctly_rounded_sum_in_every_regime():
    # 1 + 2^-53 + 2^-53: summed left to right in doubles each 2^-53 is lost (1 + 2^-53 is a tie, rounded to even 1.0),
    # while the exact sum 1 + 2^-52 is a double: the mean must be (1 + 2^-52) / 3.
    from fractions import Fraction

    from kvledger.dynamics.outputs.exact_mean import _fsum_mean, exact_mean

    assert exact_mean(np.array([1.0, 2.0**-53, 2.0**-53])) == (1 + 2.0**-52) / 3 != np.mean([1.0, 2.0**-53, 2.0**-53])
    rng = np.random.default_rng(7)

    def reference(v, c):
        return float(sum(Fraction(x) * int(k) for x, k in zip(v.tolist(), c.tolist()))) / int(c.sum())

    # values over 60 binary orders of magnitude in random order (the exponent-grouping sort), counts past 2^16
    # (the count split into 15 + 16 bits) and up to 2^31 − 1, negative values, subnormals
    v = rng.standard_normal(3000) * 2.0 ** rng.integers(-30, 30, 3000)
    v[:3] = [5e-324, 2.0**-1070, -1e-310]
    c = rng.integers(0, 2**31, 3000)
    assert exact_mean(v, c) == reference(v, c)
    c = rng.integers(0, 300, 3000)
    assert exact_mean(np.sort(np.abs(v)), c) == reference(np.sort(np.abs(v)), c)
    # several 2^16-value passes: the same double as math.fsum over the exact products (Dekker's two-product)
    big = np.sort(rng.random(600_000) * 0.05)
    counts = rng.integers(1, 2**20, len(big))
    assert exact_mean(big, counts) == _fsum_mean(big, counts)
    assert exact_mean(big) == _fsum_mean(big, None)  # math.fsum: correctly rounded, as the Fractions above


def test_exact_mean_of_a_narrow_exponent_span_needs_no_sort():
    # Step gaps lie within a few binades: a pass whose exponents span at most _SHIFT_SPAN (12) is summed by shifting
    # each mantissa to the lowest exponent (exact_mean._narrow_total), the rest by grouping equal exponents. Both
    # must give the exact sum: the reference is the sum in Fractions, × 2^1127 (an integer: every double is a
    # multiple of 2^-1074, and 2^-1074 × 2^1127 = 2^53). Negative values (the signed top piece), counts past 2^16
    # (split into 15 + 16 bits), no counts, spans of exactly 12 and 13 binades, more than one pass.
    from fractions import Fraction

    from kvledger.dynamics.outputs.exact_mean import _PASS, _SHIFT_SPAN, _exact_total

    rng = np.random.default_rng(11)

    def exact(v, c):
        return int(sum(Fraction(x) * int(k) for x, k in zip(v.tolist(), c.tolist())) * 2**1127)

    for span in (0, 3, _SHIFT_SPAN, _SHIFT_SPAN + 1):
        v = (1 + rng.random(2000)) * 2.0 ** rng.integers(-8, -7 + span, 2000)  # exponents -7 .. -7 + span
        v[::7] *= -1
        for c in (rng.integers(0, 40, 2000), rng.integers(0, 2**31, 2000)):
            assert _exact_total(v, c) == exact(v, c)
        assert _exact_total(v, None) == exact(v, np.ones(len(v), dtype=np.int64))
    v = 0.004 + rng.random(_PASS + 5) * 0.003  # two passes, the second of 5 values
    c = rng.integers(1, 30, len(v))
    assert _exact_total(v, c) == exact(v, c)


def test_ranked_values_without_a_full_sort_are_those_of_the_expanded_array():
    # _ranked buckets the values by their top bits and sorts only the buckets holding the asked ranks; the answer
    # must be the rank-th element of np.sort(np.repeat(values, counts)) for every rank, whatever the spread
    # (one binade; 40 binades, past the 2^18-bucket limit of the 12-mantissa-bit key: the exponent-only key),
    # with ties across buckets and negative values (then a full sort).
    from kvledger.dynamics.outputs.itl_gaps import _ranked

    rng = np.random.default_rng(3)
    cases = [rng.random(5000) * 0.01 + 0.01, rng.random(5000) * 2.0 ** rng.integers(-200, 200, 5000),
             np.repeat(rng.random(40), 50), rng.standard_normal(3000)]
    for values in cases:
        counts = rng.integers(1, 40, len(values)).astype(np.int32)
        expanded = np.sort(np.repeat(values, counts))
        ranks = [0, 1, len(expanded) // 2, len(expanded) // 2 + 1, int(0.99 * (len(expanded) - 1)), len(expanded) - 1]
        assert _ranked(values, counts, ranks, is_sorted=False) == expanded[ranks].tolist()


def test_gap_counts_survive_buffer_compaction():
    # 40 requests of 400 output tokens, one every 2 s (each takes ~1.7 s alone): 40 × 400 = 16,000 steps, past
    # the 4,096-step buffer several times
    reqs = [RequestSpec(f"q{i}", 2.0 * i, 20 + i, 400) for i in range(40)]
    s = _same_run(reqs, EngineConfig(num_gpu_blocks=2000, block_size=16, max_model_len=1024), FixedStepCost(0.004,
        3e-5))
    assert s.num_steps > 3 * 4096 and s.itl_s.count == 40 * 399


def test_past_the_exact_limit_a_sketch_keeps_every_itl_figure_within_its_bound(monkeypatch):
    from kvledger.dynamics.outputs import itl_gaps

    reqs = random_workload(300)
    cfg, cost = EngineConfig(**CONFIGS["vllm-tight"]), FixedStepCost(0.005, 1e-5)
    exact = simulate(reqs, cfg, cost).summary
    monkeypatch.setattr(itl_gaps, "EXACT_PAIRS", 50)  # fold into the sketch after ~50 steps
    lean = simulate(reqs, cfg, cost, record_token_times=False).summary
    assert lean.itl_s.count == exact.itl_s.count
    for key in ("mean", "p50", "p90", "p99"):
        a, b = getattr(exact.itl_s, key), getattr(lean.itl_s, key)
        assert abs(a - b) <= itl_gaps.SKETCH_ALPHA * a * (1 + 1e-9)
    assert itl_gaps.SKETCH_NOTE in lean.definitions and itl_gaps.SKETCH_NOTE not in exact.definitions


def test_sketch_folds_give_the_keys_and_counts_of_one_unique_over_everything():
    # to_sketch counts keys by bincount (or sorts packed (key, count) pairs when they span too many) and merges
    # with the sketch so far; the result must be what one np.unique over every key gives, each key's counts summed
    # (zeros get the key -2^62).
    from kvledger.dynamics.outputs import itl_gaps

    rng = np.random.default_rng(7)
    h, all_keys, all_counts = itl_gaps.GapHistogram(), [], []
    for part in range(4):
        gaps = np.round(rng.lognormal(-5, 0.4, 5000), 7)  # rounded: many equal gaps, so runs are merged
        gaps[:3] = 0.0 if part == 1 else gaps[:3]
        if part == 2:  # keys spanning more than 2^22 (1 ns to 1,000 s: 1.4·10⁷ keys): the packed sort, not bincount
            gaps[3:6] = 1e-9, 1e3, 1e3
        counts = rng.integers(1, 40, gaps.size).astype(np.int32)
        h.add_steps(gaps, counts)
        h.to_sketch()
        with np.errstate(divide="ignore"):
            all_keys.append(np.where(gaps > 0, np.ceil(np.log(gaps) / itl_gaps._LOG_GAMMA), -2**62).astype(np.int64))
        all_counts.append(counts)
    uniq, inv = np.unique(np.concatenate(all_keys), return_inverse=True)
    assert np.array_equal(h.sketch[0], uniq)
    assert np.array_equal(h.sketch[1], np.bincount(inv, weights=np.concatenate(all_counts)).astype(np.int64))
    assert h.sketch[0][0] == -2**62 and h.sketch[1].sum() == sum(int(c.sum()) for c in all_counts)
