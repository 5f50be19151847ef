"""The decode time SGLang's prefill steps pause (analyses/serving/sglang_pauses.py): counted where the simulator runs
SGLang's steps (the general step and the arrival stretches' prefill steps), over the records' first-token-to-last
time; a timeline worked by hand, step by step and through the fast paths, with and without token times."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.analyses.serving.sglang_pauses import DecodePauses, decode_pauses
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.records import RequestRecord, RunMetadata, RunRecords

SGL = dict(batching="sglang", prefix_caching_policy="sglang", block_size=1, num_gpu_blocks=4096, max_model_len=512)
# every step 4 ms (no per-token term). A (10-token prompt, 8 tokens out) arrives at 0, B (3 out) at 6 ms, C (2 out)
# at 13 ms. Steps: [0, 4] A's prefill (A's first token at 4 ms); [4, 8] A decodes; at 8 ms B is visible: [8, 12] B's
# prefill, A waits 4 ms without a token; [12, 16] A and B decode; at 16 ms C is visible: [16, 20] C's prefill, A and
# B wait (8 request-ms); [20, 24] all three decode (B's 3rd token and C's 2nd: both finish); A decodes alone to its
# 8th token at 40 ms. Paused 4 + 8 = 12 request-ms; decode time (first token to last) A 4 → 40 ms, B 12 → 24 ms,
# C 20 → 24 ms: 36 + 12 + 4 = 52 request-ms; share 12/52 = 23.1%
WORK = [RequestSpec("A", 0.0, 10, 8), RequestSpec("B", 0.006, 10, 3), RequestSpec("C", 0.013, 10, 2)]


@pytest.mark.parametrize("fast_forward", [True, False])
@pytest.mark.parametrize("token_times", [True, False])
def test_the_prefill_steps_inside_the_decode_phases_are_paused_time(fast_forward, token_times):
    # fast_forward: B's and C's prefill steps run in one SGLang arrival stretch (sglang_stretch.py, counted when it
    # settles); without: in the general step (Replica._skipped)
    res = simulate(WORK, EngineConfig(**SGL), FixedStepCost(0.004, 0.0), fast_forward=fast_forward,
                   record_token_times=token_times)
    (paused,) = res.extra["sglang_paused_request_s"]
    assert paused == pytest.approx(0.012, rel=1e-12)
    got = decode_pauses(paused, res.records)
    assert got.decode_request_s == pytest.approx(0.052, rel=1e-12) and got.share == pytest.approx(12 / 52)


def test_vllm_counts_nothing():
    # vLLM's chunked prefill mixes the decodes into the prefill step: no figure kept
    res = simulate(WORK, EngineConfig(block_size=16, num_gpu_blocks=256, max_model_len=512), FixedStepCost(0.004, 0.0))
    assert "sglang_paused_request_s" not in res.extra


def _run(records: list[RequestRecord]) -> RunRecords:
    return RunRecords(records, RunMetadata("simulator", "simulator"))


def _rec(rid: str, first: float, last: float, n: int, error: str | None = None) -> RequestRecord:
    return RequestRecord(rid, 0.0, 100, n, first, last, np.linspace(first, last, n), error=error)


def test_the_note_reads_the_paused_time_over_the_finished_requests_decode_time():
    # A runs 1.0 → 1.7 s, B 1.5 → 1.7 s: 0.9 request-s; a one-token request and a failed one have none; 0.3 of it
    # paused: 33.3%
    recs = [_rec("A", 1.0, 1.7, 5), _rec("B", 1.5, 1.7, 3), _rec("C", 2.0, 2.0, 1), _rec("D", 1.0, 9.0, 3, "cut")]
    got = decode_pauses(0.3, _run(recs))
    assert got == DecodePauses(0.3, pytest.approx(0.9))
    assert "33.3% of their decode time (0.3 of 0.9 request-s, first token to last)" in got.note()


def test_nothing_paused_is_no_line():
    assert decode_pauses(0.0, _run([_rec("A", 1.0, 1.7, 5)])) is None
    assert decode_pauses(0.3, _run([_rec("A", 1.0, 1.0, 1)])) is None  # one token: no decode phase
