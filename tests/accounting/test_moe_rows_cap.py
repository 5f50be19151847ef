"""The busiest expert-parallel rank's padded rows (moe_rows.busiest_rank_rows) stay within what is physically
possible and never fall as the step's tokens grow: worked by hand for DeepSeek-V3 at T = 100, and as a property."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.accounting.moe_rows import busiest_rank_rows, largest_count, padded_rows_moments, rank_rows_cap, tail


def test_deepseek_v3_at_100_tokens_on_ep_8_is_capped_at_32_full_blocks():
    # DeepSeek-V3, top-8 of 256 experts, EP 8: n₀ = 32 experts a rank, r = 8 such ranks; T = 100 > 32 tokens, so
    # vLLM's default BLOCK_SIZE_M is B = 64. An expert's count c ~ Binomial(100, 1/32): mean 3.125, σ 1.740.
    # P(C = 0) = (31/32)^100 = 0.0417995, and P = 64 for 1 ≤ c ≤ 64: E[P] = 64 · 0.9582005 = 61.32483, Var[P] =
    # 64² · 0.0417995 · 0.9582005 = 164.0544. The Gaussian tail: rank mean 32 · 61.32483 = 1,962.39 rows, σ =
    # √(32 · 164.0544 · 224/255) = 67.908, busiest 1,962.39 + 67.908 · √(2 ln 8) = 1,962.39 + 138.49 = 2,100.88 rows:
    # more than 32 experts × one 64-row block, impossible while every count stays below 64.
    mean, var = padded_rows_moments(100, 8, 256, 32, 64)
    assert (mean, var) == pytest.approx((61.32483, 164.0544), abs=1e-4)
    assert 32 * mean + math.sqrt(32 * var * 224 / 255) * tail(8) == pytest.approx(2100.88, abs=0.01)
    # c_max, the smallest c with P(C > c) ≤ 1e-9: P(C > 17) = 2.13e-9, P(C > 18) = 2.93e-10, so c_max = 18 and an
    # expert holds at most ⌈18/64⌉ · 64 = 64 rows, the rank 32 · 64 = 2,048. The rank's pairs, S = 100 · min(8, 32)
    # = 800, could fill at most 32 + ⌊(800 − 32)/64⌋ = 44 blocks = 2,816 rows: the cap is 2,048, m_b = 64 per expert.
    assert largest_count(100, 8, 256) == 18
    assert rank_rows_cap(100, 8, 256, 32, 64) == 2048
    assert busiest_rank_rows(100, 8, 256, 8) == pytest.approx(64.0, abs=1e-12)
    # T = 200 (c_max 26) and 512 (c_max 44): still one block an expert, 64 rows, no longer 2,073 and 2,048.2 / 32
    assert [largest_count(t, 8, 256) for t in (200, 512)] == [26, 44]
    assert busiest_rank_rows(200, 8, 256, 8) == busiest_rank_rows(512, 8, 256, 8) == pytest.approx(64.0, abs=1e-12)
    # T = 64: the Gaussian is below the cap, 2,013.08 rows (62.909 per expert), and the running maximum keeps it
    assert busiest_rank_rows(64, 8, 256, 8) * 32 == pytest.approx(2013.08, abs=0.01)


# (top-k, experts): DeepSeek-V3, Qwen3-235B-A22B / Qwen3-30B-A3B, Mixtral
SHAPES = [(8, 256), (8, 128), (2, 8)]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SHAPES), st.sampled_from([2, 4, 8]), st.sampled_from([0, 16]), st.integers(1, 4096),
       st.integers(1, 512))
def test_busiest_rank_rows_never_fall_with_more_tokens_nor_pass_the_physical_cap(shape, ep, block, tokens, more):
    k, e = shape
    n0 = math.ceil(e / ep)
    small, big = busiest_rank_rows(tokens, k, e, ep, block), busiest_rank_rows(tokens + more, k, e, ep, block)
    assert big >= small * (1 - 1e-12)
    b = block or (16 if tokens <= n0 else 64)
    assert small * n0 <= rank_rows_cap(tokens, k, e, n0, b) * (1 + 1e-12)
    assert small >= padded_rows_moments(tokens, k, e, n0, block)[0] * (1 - 1e-12) or small * n0 == pytest.approx(
        rank_rows_cap(tokens, k, e, n0, b))
