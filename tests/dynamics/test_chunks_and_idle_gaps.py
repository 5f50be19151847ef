"""Chunk-continuation steps and idle gaps, the two kinds of step the search's simulations spend most time in off the
compiled arrival stretches, give every per-request figure the same with the fast path on (compiled core and its
pure-Python fallback; chunk continuations by fast/chunk_step.py) and off (step by step)."""

from __future__ import annotations

import json

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.fast import native
from kvledger.dynamics.simulator import EngineConfig, simulate

BUDGET = 256  # max_num_batched_tokens: a 900-token prompt needs four steps
COST = FixedStepCost(0.004, 1e-5)  # a step costs 4 ms + 10 µs per token


def _trace() -> list[RequestSpec]:
    """Three bursts 30 s apart (each ends long before the next: idle gaps between), each a steady batch of short
    prompts that a long prompt joins while they decode (chunked over several steps, arrivals waiting behind it), then
    a long prompt alone on the idle replica."""
    reqs, t = [], 0.0
    for burst in range(3):
        t = 30.0 * burst
        for i in range(6):  # the steady batch
            reqs.append(RequestSpec(f"b{burst}s{i}", t + 0.001 * i, 20 + 7 * i, 40 + 11 * i))
        reqs.append(RequestSpec(f"b{burst}long", t + 0.05, 900, 30))  # joins mid-decode: chunk continuations
        reqs.append(RequestSpec(f"b{burst}behind", t + 0.052, 60, 25))  # waits behind the chunked prompt
        reqs.append(RequestSpec(f"b{burst}late", t + 0.3, 500, 12))  # chunked again, later in the burst
    reqs.append(RequestSpec("alone", 120.0, 900, 3))  # an idle replica: four prefill chunks on their own
    return reqs


def _records(res) -> list[str]:
    return [json.dumps(r.to_dict() if hasattr(r, "to_dict") else str(r), sort_keys=True, default=str)
            for r in res.records.records]


@pytest.mark.parametrize("lag", [False, True])
@pytest.mark.parametrize("token_times", [True, False])
def test_chunk_continuations_and_idle_gaps_are_the_same_with_the_fast_path_on_and_off(monkeypatch, lag, token_times):
    cfg = EngineConfig(num_gpu_blocks=2000, block_size=16, max_model_len=4096, max_num_batched_tokens=BUDGET,
                       async_scheduling=lag)
    reqs = _trace()
    runs = {"step by step": simulate(reqs, cfg, COST, fast_forward=False, record_token_times=token_times),
            "fast path": simulate(reqs, cfg, COST, record_token_times=token_times)}
    monkeypatch.setattr(native, "core", None)  # the compiled core's pure-Python fallback (KVLEDGER_PURE_PYTHON=1)
    runs["fast path, pure Python"] = simulate(reqs, cfg, COST, record_token_times=token_times)
    monkeypatch.undo()
    recs = {name: _records(res) for name, res in runs.items()}
    assert recs["fast path"] == recs["step by step"]
    assert recs["fast path, pure Python"] == recs["step by step"]
    summaries = {name: json.dumps(res.to_dict(include_records=False), sort_keys=True, default=str)
                 for name, res in runs.items()}
    assert summaries["fast path"] == summaries["step by step"] == summaries["fast path, pure Python"]

    by_id = {r.request_id: r for r in runs["fast path"].records.records}
    # the trace has what it is for: every burst is over before the next arrives (idle gaps) ...
    for burst in (0, 1):
        assert max(r.finish_s for k, r in by_id.items() if k.startswith(f"b{burst}")) < 30.0 * (burst + 1)
    assert max(r.finish_s for r in by_id.values() if r.request_id != "alone") < 120.0
    # ... and the lone 900-token prompt on the idle replica takes four chunks (256 + 256 + 256 + 132 tokens), its
    # first token at the end of the fourth: TTFT = 4 × 4 ms + 900 × 10 µs = 25 ms (synchronous: its first step starts
    # at its arrival; under async scheduling too, nothing being in flight)
    assert by_id["alone"].ttft_s == pytest.approx(4 * 0.004 + 900 * 1e-5, abs=1e-12)
    # the long prompt joining six decoding requests gets 256 − 6 = 250 tokens a step (250, 250, 250, then 150): four
    # steps of at least 150 tokens, each at least 4 ms + 150 × 10 µs; the 60-token prompt that arrived 2 ms after it
    # waits behind it and is admitted whole with the last chunk's leftover budget (6 + 150 + 60 = 216 ≤ 256): both
    # first tokens come at that step's end
    assert by_id["b0long"].ttft_s >= 4 * (0.004 + 150 * 1e-5)
    assert by_id["b0behind"].first_token_s == by_id["b0long"].first_token_s
