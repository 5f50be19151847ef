"""A multi-turn AIPerf per-request export replayed as its sessions (``calibration.session_replay``). AIPerf records each
request's session instance (``metadata.x_correlation_id``) and ``turn_index`` (aiperf common/models/record_models.py,
MetricRecordMetadata, 0.8.0 and 0.13.0). The bundled export (tests/evidence/data/aiperf/run1_profile_export.jsonl, a
real single-turn run: every turn_index 0) is made a two-turn session by editing one record, as said in each test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.calibration.replay import load_measured
from kvledger.dynamics.workload.sessions import SessionLoop

RUN1 = Path(__file__).parents[1] / "evidence" / "data" / "aiperf" / "run1_profile_export.jsonl"
# the two earliest successful records: line 20 (index 19) sent at 1759522419154568925 ns, input 550, output
# (output_sequence_length) 247, request_latency 8877.620132 ms; line 32 (index 31) sent 141,484 ns later, input 550,
# output 241
A, B = 19, 31


def _edited(tmp_path: Path, pause_s: float | None) -> Path:
    rows = [json.loads(line) for line in RUN1.read_text().splitlines()]
    a, b = rows[A], rows[B]
    b["metadata"]["x_correlation_id"], b["metadata"]["turn_index"] = a["metadata"]["x_correlation_id"], 1
    # turn 1 re-sends the conversation: 550 + 247 + its own 550 = 1347 prompt tokens
    b["metrics"]["input_sequence_length"]["value"] = 550 + 247 + 550
    if pause_s is not None:  # sent pause_s after turn 0 finished (8.877620132 s after turn 0 was sent)
        b["metadata"]["timestamp_ns"] = a["metadata"]["timestamp_ns"] + 8_877_620_132 + int(pause_s * 1e9)
    out = tmp_path / RUN1.name
    out.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return out


def test_single_turn_export_replayed_at_its_arrivals():
    run = load_measured(str(RUN1))
    assert run.sessions is None and "client_loop" not in run.measured.metadata.extra


def test_two_turn_session_replayed_as_a_session(tmp_path):
    run = load_measured(str(_edited(tmp_path, 2.0)))
    loop = run.sessions
    assert isinstance(loop, SessionLoop)
    # 89 successful records, two of them one session: 88 sessions, one of two turns
    assert len(loop.sessions) == 88 and loop.num_turns == 89
    (two,) = [s for s in loop.sessions if len(s.turns) == 2]
    # turn 0: 550 in, 247 out; turn 1: 1347 − 550 − 247 = 550 new tokens, 241 out, sent 2 s after turn 0 finished
    assert (two.turns[0].input_tokens, two.turns[0].output_tokens) == (550, 247)
    assert (two.turns[1].input_tokens, two.turns[1].output_tokens) == (550, 241)
    assert two.turns[1].think_s == pytest.approx(2.0, abs=1e-6)
    # its request: the measured 1347-token prompt, whose first (550 + 247) // 64 = 12 segments are turn 0's
    spec = next(s for s in run.requests if s.num_prompt_tokens == 1347)
    first = next(s for s in run.requests if s.prefix_segments and s.prefix_segments[:8] == spec.prefix_segments[:8]
                 and s.num_prompt_tokens == 550)
    assert len(spec.prefix_segments) == 1347 // 64 and spec.prefix_segments[:12] == first.prefix_segments + \
        first.output_segments
    assert "replayed as its 88 sessions (1 of several turns" in run.measured.metadata.extra["client_loop"]


def test_overlapping_turns_replayed_at_their_send_times(tmp_path):
    run = load_measured(str(_edited(tmp_path, None)))
    # turn 1 left as sent, 141,484 ns after turn 0, which finished 8.877620132 s after it: 8.877 s too early
    assert run.sessions is None
    assert "turn 1 was sent 8.877 s before its turn 0 finished" in run.measured.metadata.extra["client_loop"]
