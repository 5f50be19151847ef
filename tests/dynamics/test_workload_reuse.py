"""The reusable prefix tokens of a workload (dynamics/workload/reuse.py): what a prefix cache that never evicts would
serve, worked by hand on sessions with a shared system prompt and on a trace listed out of arrival order."""

from __future__ import annotations

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.dynamics.workload.reuse import reusable_prefix_tokens
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn


def test_sessions_reuse_the_shared_system_prompt_and_their_own_earlier_turns():
    # 64-token segments, a 128-token system prompt (segments 0 and 1 shared by every session).
    # s0-t0: prompt 128 + 192 = 320 (5 segments), nothing seen before: 0; its prompt + 64 output = 384 tokens puts
    #   segments 0–5 in the cache.
    # s1-t0 (starts later): prompt 128 + 64 = 192 (3 segments): segments 0, 1 (the system prompt) seen, segment 2 is
    #   s1's own: 2 × 64 = 128.
    # s0-t1: prompt 384 + 100 = 484 (7 whole segments): segments 0–5 seen, 6 not: 6 × 64 = 384 (≤ 484 − 1).
    # Σ = 0 + 128 + 384 = 512 tokens
    s0 = Session("s0", 0.0, (Turn(192, 64), Turn(100, 16, think_s=1.0)), 128, 0)
    s1 = Session("s1", 5.0, (Turn(64, 16),), 128, 1)
    assert reusable_prefix_tokens(SessionLoop((s1, s0), 64)) == 512  # sessions taken by start, not listed order
    # without the output's KV (reuse_output False) s0-t1 sees only s0-t0's 5 prompt segments: 0 + 128 + 320 = 448
    assert reusable_prefix_tokens(SessionLoop((s0, s1), 64, reuse_output=False)) == 448


def test_trace_requests_in_arrival_order_match_as_a_prefix():
    # 16-token segments. By arrival: r0 (1.0 s, segments 1, 2, 40 tokens: 2 whole segments) reuses nothing; r1
    # (2.0 s, segments 1, 2, 3 of a 50-token prompt: 3 whole) matches 1, 2 then misses 3: 32 tokens; r2 (3.0 s,
    # segments 9, 2) misses segment 9, so its segment 2 (another prefix) is no hit: 0. Σ = 32 tokens
    r1 = RequestSpec("r1", 2.0, 50, 4, (1, 2, 3), 16)
    r0 = RequestSpec("r0", 1.0, 40, 4, (1, 2), 16)
    r2 = RequestSpec("r2", 3.0, 40, 4, (9, 2), 16)
    assert reusable_prefix_tokens([r1, r0, r2]) == 32
    # the same prompt twice: the second reuses at most its prompt less the token an engine always computes (31 of 32)
    a, b = RequestSpec("a", 0.0, 32, 4, (1, 2), 16), RequestSpec("b", 1.0, 32, 4, (1, 2), 16)
    assert reusable_prefix_tokens([a, b]) == 31


def test_workloads_without_segments():
    cols = WorkloadColumns(np.array([0.0, 1.0]), np.array([100, 100]), np.array([10, 10]))
    assert reusable_prefix_tokens(cols) == 0  # columns list no segments: nothing is shareable
    assert reusable_prefix_tokens(object()) is None  # not a workload kind read here: unknown, not 0
