"""Sessions as a workload: each turn's prompt is the conversation so far, turns follow finishes after think time,
sessions are drawn reproducibly, read from trace prefix reuse, and kept on one replica by session affinity."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.simulator import simulate
from kvledger.dynamics.workload.session_traces import trace_sessions
from kvledger.dynamics.workload.sessions import CHAT, Session, SessionLoop, Turn, synthesize_sessions, turn_specs
from kvledger.errors import InputError


def test_turn_prompts_are_the_conversation_so_far():
    # system 128 tokens, segments of 64: turn 0 = 128 + 100 = 228 tokens → 3 whole segments (2 inside the system
    # prompt, shared with any session; the 3rd is this session's); turn 1 = 228 + 50 (output) + 30 = 308 → 4 segments,
    # the first 3 identical to turn 0's.
    a = Session("a", 0.0, (Turn(100, 50), Turn(30, 10, 5.0)), 128, 0)
    b = Session("b", 0.0, (Turn(100, 50),), 128, 1)
    t0, t1 = turn_specs(a, 64)
    assert (t0.num_prompt_tokens, t1.num_prompt_tokens) == (228, 308)
    assert len(t0.prefix_segments) == 3 and t1.prefix_segments[:3] == t0.prefix_segments
    assert len(t1.prefix_segments) == 4
    (b0,) = turn_specs(b, 64)
    assert b0.prefix_segments[:2] == t0.prefix_segments[:2] and b0.prefix_segments[2] != t0.prefix_segments[2]
    assert t0.client_id == "a"


def test_next_turn_follows_the_finish_after_think_time():
    # one session, every step 10 ms: turn 0 (100 tokens, 3 outputs) = a prefill step + 2 decode steps, finishing at
    # 30 ms; turn 1 is sent at 30 ms + 5 s think = 5.030 s.
    s = Session("a", 0.0, (Turn(100, 3), Turn(20, 2, 5.0)), 0, 0)
    cfg = EngineConfig(num_gpu_blocks=64, max_model_len=512)
    res = simulate(SessionLoop((s,), 16), cfg, FixedStepCost(0.01))
    r0, r1 = res.records.records
    assert r0.finish_s == pytest.approx(0.03)
    assert r1.arrival_s == pytest.approx(5.03)
    # turn 1's prompt (100 + 3 + 20 = 123 tokens) reuses turn 0's 96-token prompt segments (6 × 16)
    assert r1.num_cached_tokens == 96


def test_synthesis_is_reproducible_and_needs_a_generator():
    a = synthesize_sessions(CHAT, 50, 1.0, np.random.default_rng(7))
    b = synthesize_sessions(CHAT, 50, 1.0, np.random.default_rng(7))
    assert a == b
    assert synthesize_sessions(CHAT, 50, 1.0, np.random.default_rng(8)) != a
    with pytest.raises(InputError, match="numpy Generator"):
        synthesize_sessions(CHAT, 5, 1.0, 7)
    # geometric turns with mean 4, capped by max_context 32,768: every session within it
    for s in a:
        total = s.system_tokens + sum(t.input_tokens + t.output_tokens for t in s.turns)
        assert total <= CHAT.max_context_tokens and 1 <= len(s.turns) <= CHAT.max_turns


def test_session_runs_identical_across_runs():
    loop = SessionLoop(tuple(synthesize_sessions(CHAT, 40, 0.5, np.random.default_rng(3))), 64)
    cfg = EngineConfig(num_gpu_blocks=2100, max_model_len=32768)
    runs = [simulate(loop, cfg, FixedStepCost(0.005, 2e-6), record_token_times=False).summary.to_dict()
            for _ in range(2)]
    assert runs[0] == runs[1]


def test_session_affinity_keeps_a_session_on_one_replica():
    class Rep:
        def __init__(self, n):
            self.num_outstanding = n

    class Req:
        def __init__(self, cid):
            self.spec = RequestSpec("x", 0.0, 10, 1, client_id=cid)

    route = make_router("session_affinity")
    reps = [Rep(3), Rep(1), Rep(2)]
    assert route(reps, Req("s1")) == 1  # first turn: least loaded
    reps[1].num_outstanding = 9
    assert route(reps, Req("s2")) == 2
    assert route(reps, Req("s1")) == 1  # later turn: its session's replica, whatever the load
    assert route(reps, Req(None)) == 2


def test_trace_sessions_link_requests_by_shared_prefix():
    specs = [RequestSpec("r0", 0.0, 1536, 10, (0, 1, 2)), RequestSpec("r1", 60.0, 2560, 10, (0, 1, 2, 3, 4)),
             RequestSpec("r2", 70.0, 1536, 10, (0, 5, 6)), RequestSpec("r3", 200.0, 3000, 10, (0, 1, 2, 3, 4, 7))]
    ts = trace_sessions(specs)
    # r1 extends r0 by 3 blocks (1,536 tokens), r2 shares only block 0 (a new session), r3 extends r1's 5 blocks
    assert ts.parent == (-1, 0, -1, 1)
    assert ts.session_of == (0, 0, 2, 0)
    assert ts.shared_tokens == (0, 1536, 0, 2560)
    assert ts.turns_per_session == {1: 1, 3: 1}
    assert ts.reuse_gap_s == (60.0, 140.0)
    # (1,536 + 2,560) / (1,536 + 2,560 + 1,536 + 3,000)
    assert ts.reused_token_share == pytest.approx(4096 / 8632)


def test_mooncake_shares_block_zero_across_every_request():
    from kvledger.dynamics.workload.traces import load_trace

    specs = load_trace("mooncake")
    # every row of the bundled Mooncake conversation trace lists hash id 0 first (a shared system prompt), so with one
    # shared block all 12,031 requests chain into one session; with two, far fewer are linked
    assert all(s.prefix_segments[0] == 0 for s in specs)
    assert trace_sessions(specs, 1).num_sessions == 1
    two = trace_sessions(specs, 2)
    assert two.num_requests == 12031 and 1 < two.num_sessions < 12031
