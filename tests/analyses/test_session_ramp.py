"""A session workload's ramp-up and the session count that reaches a steady state
(``analyses/serving/session_ramp.py``), and the KV tipping point a session run names
(``analyses/serving/session_tipping.py``), on hand-worked cases."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.session_ramp import (
    ramp_s,
    reach_req_per_s,
    short_run_note,
    steady_sessions,
    turn_offsets_s,
)
from kvledger.analyses.serving.session_tipping import tipping
from kvledger.dynamics.workload.sessions import Session, Turn


def _sessions():
    # a: turns sent 0, 4 and 4 + 6 = 10 s after its start (the first turn's think time is ignored); b: 0 and 20 s
    a = Session("a", 0.0, (Turn(10, 5, 99.0), Turn(1, 1, 4.0), Turn(1, 1, 6.0)))
    b = Session("b", 3.0, (Turn(10, 5, 0.0), Turn(1, 1, 20.0)))
    return [a, b]


def test_the_ramp_is_the_ninety_percent_quantile_of_the_turns_offsets():
    assert turn_offsets_s(_sessions()) == [0.0, 4.0, 10.0, 0.0, 20.0]
    # sorted 0, 0, 4, 10, 20: the ⌈0.9 × 5⌉ = 5th smallest
    assert ramp_s(_sessions()) == 20.0
    assert ramp_s(_sessions()[:1]) == 10.0  # 0, 4, 10: the ⌈2.7⌉ = 3rd


def test_the_sessions_a_rate_needs_hold_it_for_as_long_as_it_ramped():
    # 10 turns/s of 4-turn sessions = 2.5 sessions/s; ramp 250 s: starts must last 2 × 250 s = 500 s → 1,250 sessions
    assert steady_sessions(10.0, 4.0, 250.0) == 1250
    assert reach_req_per_s(1250, 4.0, 250.0) == pytest.approx(10.0)  # the inverse: 1,250 × 4 ÷ 500
    assert steady_sessions(0.001, 4.0, 250.0) == 1  # ⌈0.125⌉


def test_simulate_names_a_run_of_too_few_sessions_with_the_count_that_reaches_one():
    # 2 sessions/s × 4 turns = 8 turns/s, ramp 100 s: 2 × 8 × 100 ÷ 4 = 400 sessions; 300 start within 150 s < 200 s
    note = short_run_note(300, 2.0, 4.0, 100.0, replicas=2)
    assert note.startswith("sessions: too few to reach a steady state: 300 sessions starting at 2/s start within 150 s,"
                           " less than twice the 100 s within which 90% of a session's turns are sent")
    assert "never hold the steady 8/s (2 × 4 turns per session) (4 per replica on 2 replicas, each serving about " \
           "150 sessions' turns)" in note
    assert note.endswith("400 sessions (2 × 8/s × 100 s ÷ 4) reach one: raise --sessions to 400 before reading its "
                         "latencies as the steady load's")
    assert short_run_note(400, 2.0, 4.0, 100.0) is None


def test_the_tipping_point_splits_the_turns_at_the_first_preemption():
    # (arrival s, TTFT s, prompt tokens, cached tokens); the first preemption 80 s after the first arrival (0 s)
    turns = [(0.0, 0.1, 100, 80), (50.0, 0.1, 100, 60), (70.0, 0.2, 100, 40), (90.0, 3.0, 100, 10),
             (100.0, 5.0, 100, 30)]
    tip = tipping(turns, 80.0, replicas=2)
    # the 60 s before it, [20, 80) s: 2 turns ÷ 60 s ÷ 2 replicas = 0.01667/s per replica
    assert tip.rate_per_replica == pytest.approx(2 / 60 / 2)
    assert tip.hit_before == pytest.approx(180 / 300) and tip.hit_after == pytest.approx(40 / 200)
    # TTFT mean 0.4 ÷ 3 = 0.1333 s before, 8 ÷ 2 = 4 s after: ≥ 3 × 0.1333 = 0.4 s, a collapse
    assert tip.ttft_before_s == pytest.approx(0.4 / 3) and tip.ttft_after_s == pytest.approx(4.0)
    assert tip.collapsed
    assert not tipping(turns[:3] + [(90.0, 0.3, 100, 10)], 80.0).collapsed  # 0.3 s < 0.4 s: no jump
    assert tipping(turns, 200.0) is None  # no turn after it
