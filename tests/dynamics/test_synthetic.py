"""Synthetic workloads: arrival statistics, length distributions, shared-prefix groups, presets, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvledger.dynamics.workload.synthetic import (
    Empirical,
    ExponentialCapped,
    Fixed,
    LogNormal,
    SharedPrefix,
    Uniform,
    anyscale_latency,
    anyscale_throughput,
    arrival_times,
    parse_lengths,
    synthetic_workload,
)
from kvledger.errors import InputError


# Tolerances: over 200 seeds with n = 20,000 requests at 5 req/s the sample gap CV had a standard deviation of
# 0.007 (CV 1), 0.003 (CV 0.5) and 0.043 (CV 3), and the mean gap a relative one of 0.7%, 0.35% and 2.2%;
# each bound below is at least 5 of those standard deviations.
@pytest.mark.parametrize("cv, cv_tol, mean_tol", [(1.0, 0.04, 0.04), (0.5, 0.02, 0.02), (3.0, 0.25, 0.12)])
def test_gamma_gaps_have_the_requested_rate_and_cv(cv, cv_tol, mean_tol):
    t = arrival_times(20000, 5.0, cv=cv, seed=0)
    gaps = np.diff(t)
    assert t[0] == 0.0 and np.all(gaps >= 0)
    assert gaps.mean() == pytest.approx(1 / 5.0, rel=mean_tol)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, abs=cv_tol)


def test_cv_matches_vllm_burstiness_parameterisation():
    # vLLM benchmarks/serve.py: gap ~ Gamma(shape=burstiness, scale=1/(rate·burstiness)); CV = 1/sqrt(burstiness).
    # burstiness 4 ↔ CV 0.5: the same generator state must give the same gaps.
    ours = arrival_times(100, 3.0, cv=0.5, seed=11)
    ref = np.concatenate(([0.0], np.cumsum(np.random.default_rng(11).gamma(4.0, 1 / (3.0 * 4.0), size=99))))
    np.testing.assert_array_equal(ours, ref)


def test_burst_and_determinism():
    assert np.array_equal(arrival_times(5, math.inf, seed=0), np.zeros(5))
    a = arrival_times(50, 2.0, cv=2.0, seed=123)
    assert np.array_equal(a, arrival_times(50, 2.0, cv=2.0, seed=123))
    assert not np.array_equal(a, arrival_times(50, 2.0, cv=2.0, seed=124))
    with pytest.raises(InputError):
        arrival_times(5, 0.0, seed=0)
    for bad in (-0.5, math.inf, math.nan):
        with pytest.raises(InputError, match="arrival CV"):
            arrival_times(5, 1.0, cv=bad, seed=0)
    with pytest.raises(InputError, match="seed"):
        arrival_times(5, 1.0, seed=1.5)


def test_cv_zero_is_a_fixed_interval_of_one_over_the_rate():
    # CV 0 at 4 req/s: every gap 1/4 s, request i at i/4 s; 1/4 and its multiples are exact in binary, so ==
    t = arrival_times(6, 4.0, cv=0.0, seed=0)
    assert t.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25]
    # 3 req/s: request i at i/3 s (one rounded division each, no summed rounding): request 3 at exactly 1 s
    assert arrival_times(4, 3.0, cv=0.0, seed=0).tolist() == [0.0, 1 / 3, 2 / 3, 1.0]


def test_cv_zero_draws_no_gap_so_the_lengths_are_the_first_draws_of_the_seed():
    # arrivals draw nothing at CV 0, so the prompt lengths are the seed's first draws: the same lengths as a burst
    # (rate inf, which also draws no gap); the arrivals are 0, 0.5, 1.0, … s at 2 req/s
    kw = dict(prompt=Uniform(10, 2000), output=ExponentialCapped(200, 1000), seed=7)
    fixed = synthetic_workload(5, rate_per_s=2.0, cv=0.0, **kw)
    burst = synthetic_workload(5, rate_per_s=math.inf, **kw)
    assert [r.arrival_s for r in fixed] == [0.0, 0.5, 1.0, 1.5, 2.0]
    assert [(r.num_prompt_tokens, r.num_output_tokens) for r in fixed] == \
        [(r.num_prompt_tokens, r.num_output_tokens) for r in burst]
    rng = np.random.default_rng(7)  # and the prompts are Uniform's first draws from a fresh seed 7
    assert [r.num_prompt_tokens for r in fixed] == Uniform(10, 2000).sample(5, rng).tolist()


@pytest.mark.parametrize("cap", [32, 128, 512, 1536])
def test_truncated_exponential_mean(cap):
    # Truncated at cap: E[X] = m − cap·e^(−cap/m)/(1 − e^(−cap/m)); rounding up adds about 0.5 token.
    # m = 128: cap 32 → 15.33, cap 128 → 53.51, cap 512 → 118.45, cap 1536 → 127.99.
    m = 128.0
    expected = m - cap * math.exp(-cap / m) / (1 - math.exp(-cap / m)) + 0.5
    x = ExponentialCapped(m, cap).sample(100_000, np.random.default_rng(0))
    assert x.min() >= 1 and x.max() <= cap
    # standard error of the mean ≤ 128/sqrt(1e5) = 0.40 tokens; allow 2 tokens
    assert x.mean() == pytest.approx(expected, abs=2.0)


def test_simple_length_distributions():
    rng = np.random.default_rng(1)
    assert set(Fixed(512).sample(10, rng)) == {512}
    u = Uniform(1, 3).sample(3000, rng)
    assert set(u) == {1, 2, 3}  # both ends included
    ln = LogNormal(1000, 0.5, low=1, high=4000).sample(20001, rng)
    assert np.median(ln) == pytest.approx(1000, rel=0.03) and ln.max() <= 4000
    with pytest.raises(InputError):
        Uniform(5, 4)
    with pytest.raises(InputError):
        Fixed(0)


def test_empirical_from_a_bundled_trace():
    emp = Empirical.from_trace("azure-code", "output")
    assert len(emp.values) == 8819
    draws = emp.sample(1000, np.random.default_rng(0))
    assert set(draws.tolist()) <= set(emp.values)
    arxiv = Empirical.from_trace("arxiv", "prompt")  # lengths-only trace
    assert len(arxiv.values) == 28257


@pytest.mark.parametrize("spec, expected", [
    ("fixed:512", Fixed(512)), ("uniform:1:512", Uniform(1, 512)), ("exp:128:1536", ExponentialCapped(128.0, 1536)),
    ("lognormal:900:0.7:1:8192", LogNormal(900.0, 0.7, 1, 8192)),
])
def test_parse_lengths(spec, expected):
    assert parse_lengths(spec) == expected


def test_parse_lengths_rejects_nonsense():
    with pytest.raises(InputError, match="not understood"):
        parse_lengths("gauss:1:2")
    with pytest.raises(InputError):
        parse_lengths("fixed:abc")


def test_shared_prefix_groups():
    reqs = synthetic_workload(4000, rate_per_s=10.0, prompt=Fixed(100), output=Fixed(5), seed=3,
                              prefix=SharedPrefix(num_groups=4, prefix_tokens=256, share=0.25))
    grouped = [r for r in reqs if r.prefix_segments]
    # binomial(4000, 0.25): mean 1000, sd 27
    assert abs(len(grouped) - 1000) < 5 * 27
    assert {r.prefix_segments[0] for r in grouped} == {0, 1, 2, 3}
    assert all(r.num_prompt_tokens == 356 and r.segment_tokens == 256 and r.num_shareable_tokens == 256
               for r in grouped)
    assert all(r.num_prompt_tokens == 100 for r in reqs if not r.prefix_segments)


def test_workload_is_deterministic_under_a_seed():
    kw = dict(rate_per_s=4.0, cv=2.0, prompt=Uniform(10, 2000), output=ExponentialCapped(200, 1000))
    assert synthetic_workload(300, seed=5, **kw) == synthetic_workload(300, seed=5, **kw)
    assert synthetic_workload(300, seed=5, **kw) != synthetic_workload(300, seed=6, **kw)


def test_anyscale_presets():
    reqs = anyscale_throughput(32, seed=0)
    assert len(reqs) == 1000 and all(r.arrival_s == 0.0 and r.num_prompt_tokens == 512 for r in reqs)
    assert max(r.num_output_tokens for r in reqs) <= 32
    lat = anyscale_latency(4.0, seed=0)
    assert len(lat) == 100 and all(1 <= r.num_prompt_tokens <= 512 and r.num_output_tokens <= 1536 for r in lat)


@pytest.mark.parametrize("spec, said", [
    ("fixed:abc", "length distribution 'fixed:abc': 'abc' is not a positive token count (8192, or 8K = 8,192 and "
                  "8k = 8,000 as vLLM reads them)"),
    ("uniform:1:5.5", "length distribution 'uniform:1:5.5': '5.5' is not a positive token count (8192, or 8K = "
                      "8,192 and 8k = 8,000 as vLLM reads them)"),
    ("lognormal:x:0.8", "length distribution 'lognormal:x:0.8': 'x' is not a number"),
])
def test_an_unreadable_length_is_said_in_words_not_pythons(spec, said):
    # it printed "invalid literal for int() with base 10: 'abc'"
    with pytest.raises(InputError) as err:
        parse_lengths(spec)
    assert str(err.value) == said


def test_a_length_reads_vllms_suffixes_as_every_token_flag_does():
    # units.parse_tokens: 8K = 8,192, 8k = 8,000 (it refused "8K" as not a whole number)
    assert parse_lengths("fixed:8K") == Fixed(8192) and parse_lengths("uniform:1:8k") == Uniform(1, 8000)
