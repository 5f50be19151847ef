"""The decode time SGLang's prefill steps pause (analyses/serving/sglang_pauses.py), read from the records' token
times: a hand-built timeline, and a real simulation checked against its own step log."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.analyses.serving.sglang_pauses import decode_pauses
from kvledger.records import RequestRecord


def _rec(rid: str, times: list[float]) -> RequestRecord:
    return RequestRecord(rid, 0.0, 100, len(times), times[0], times[-1], np.array(times))


def test_a_prefill_step_inside_a_decode_phase_is_paused_time():
    # steps end at 1.0 (A's prefill: its first token), 1.1 and 1.2 (decodes), 1.5 (B's prefill: first tokens only,
    # so a prefill step: A waits 1.2 → 1.5 without a token), 1.6 and 1.7 (decodes of both). A runs 1.0 → 1.7 (0.7 s)
    # and waited 0.3 s of it; B runs 1.5 → 1.7 (0.2 s) with no prefill inside: 0.3 of 0.9 request-s = 33.3%
    got = decode_pauses([_rec("A", [1.0, 1.1, 1.2, 1.6, 1.7]), _rec("B", [1.5, 1.6, 1.7])])
    assert got.paused_request_s == pytest.approx(0.3) and got.decode_request_s == pytest.approx(0.9)
    assert got.share == pytest.approx(1 / 3)
    assert "33.3% of their decode time (0.3 of 0.9 request-s, first token to last)" in got.note()


def test_no_prefill_inside_a_decode_phase_is_no_line():
    # B's prefill ends at 1.5, after A finished at 1.2: nobody waited
    assert decode_pauses([_rec("A", [1.0, 1.1, 1.2]), _rec("B", [1.5, 1.6])]) is None
    assert decode_pauses([_rec("A", [1.0])]) is None  # one token: no decode phase
