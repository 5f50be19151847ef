"""Prompt steps and KV blocks held, read off hand-made records, and the DistServe runs' prompt batches."""

from __future__ import annotations

import pytest

from kvledger.calibration.api import padding_notes
from kvledger.calibration.replay import load_measured
from kvledger.calibration.run_evidence import kv_blocks_held, prompt_steps
from kvledger.dynamics.workload.distserve_runs import load_distserve_run
from kvledger.errors import InputError
from kvledger.records import RequestRecord


def _rec(i: int, prompt: int, first: float, finish: float, out: int = 5) -> RequestRecord:
    return RequestRecord(f"r{i}", 0.0, prompt, out, first_token_s=first, finish_s=finish)


def test_prompt_steps_by_hand():
    # first tokens at 1.000, 1.001, 1.0015 s (one step: each < 5 ms after the previous), 1.030 s (next step), 2.0 s
    recs = [_rec(0, 100, 1.0, 3.0), _rec(1, 400, 1.001, 3.0), _rec(2, 250, 1.0015, 3.0), _rec(3, 50, 1.03, 3.0),
            _rec(4, 80, 2.0, 3.0)]
    steps = prompt_steps(recs)
    assert [s.prompt_tokens for s in steps] == [(100, 400, 250), (50,), (80,)]
    assert steps[0].end_s == 1.0
    # padded to [3, 400]: 1,200 − (100 + 400 + 250) = 450 tokens of padding; a single prompt has none
    assert [s.padding_tokens for s in steps] == [450, 0, 0]


def test_failed_and_unfinished_requests_are_left_out():
    recs = [_rec(0, 100, 1.0, 2.0), RequestRecord("x", 0.0, 300, 0, first_token_s=1.0, finish_s=1.0, error="500"),
            RequestRecord("y", 0.0, 300, 3, first_token_s=1.0)]
    assert [s.prompt_tokens for s in prompt_steps(recs)] == [(100,)]


def test_kv_blocks_held_by_hand():
    # block size 16, grid 0.125 s (exact in binary). Request A: prompt 30, 5 output tokens, first token 0.125 s, finish
    # 0.625 s: generated 1 + 4·(t − 0.125)/0.5 → at t = 0.125, 0.25, 0.375, 0.5: 1, 2, 3, 4 tokens → ceil(31/16) = 2,
    # ceil(32/16) = 2, ceil(33/16) = 3, ceil(34/16) = 3 blocks; gone at 0.625. Request B: prompt 16, 2 output tokens,
    # 0.25 → 0.375 s: ceil(17/16) = 2 blocks at 0.25 only.
    recs = [_rec(0, 30, 0.125, 0.625), _rec(1, 16, 0.25, 0.375, out=2)]
    held = kv_blocks_held(recs, 16, grid_s=0.125)
    assert held.tolist() == [0, 2, 4, 3, 3, 0]


def test_bad_arguments_are_refused():
    with pytest.raises(InputError, match="block_size"):
        kv_blocks_held([], 0)
    with pytest.raises(InputError, match="same_step_s"):
        prompt_steps([], same_step_s=0.0)
    assert kv_blocks_held([], 16).size == 0


def test_distserve_two_req_per_s_runs_break_max_paddings():
    # vLLM 0.2.3 caps a prompt batch's padding at max_paddings = 256. The 3 and 4 req/s runs obey it (largest padding
    # of a batched step 254 and 253 tokens, 20 and 45 batched steps); the 2 req/s runs do not (largest 1,405 tokens),
    # so they were not scheduled by 0.2.3's padded prompt batches (benchmarks/distserve_evidence.py).
    largest = {}
    for name in ("vllm-200-2", "vllm-300-3", "vllm-400-4"):
        steps = [s for s in prompt_steps(load_distserve_run(name).measured.records) if len(s.prompt_tokens) > 1]
        largest[name] = (len(steps), max(s.padding_tokens for s in steps), sum(s.padding_tokens > 256 for s in steps))
    assert largest == {"vllm-200-2": (14, 1405, 9), "vllm-300-3": (20, 254, 0), "vllm-400-4": (45, 253, 0)}


def test_a_run_that_breaks_the_padding_cap_is_replayed_without_it():
    # the 200-request 2 req/s run: 9 batched prompt steps padded past 256 tokens, the largest 1,405 (test above)
    [note] = padding_notes(load_measured("distserve:vllm-200-2"), 256)
    assert note.startswith("9 prompt step(s)") and "largest 1405" in note and "max_paddings unset" in note
    assert padding_notes(load_measured("distserve:vllm-300-3"), 256) == []
    # with a cap of 1,405 tokens nothing breaks it
    assert padding_notes(load_measured("distserve:vllm-200-2"), 1405) == []


def test_each_distserve_run_is_replayed_under_the_padding_rule_its_record_shows():
    # engine_for keeps --max-paddings 256 where a run's prompt steps obey it and drops it where they do not; the
    # replay (DistServe's bundled step cost) then batches prompts as the record does. Prompt steps read off first
    # tokens < 5 ms apart: (batched steps, steps padded > 256 tokens)
    from dataclasses import replace

    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.replay import replay

    a = SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", gpu_memory_utilization=0.95,
                       max_num_batched_tokens=16384, max_num_seqs=1024, max_model_len=2048, block_size=16,
                       batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False,
                       step_cost="calibrated")

    def batching(records):
        steps = [s for s in prompt_steps(records) if len(s.prompt_tokens) > 1]
        return len(steps), sum(s.padding_tokens > 256 for s in steps)

    run = load_measured("distserve:vllm-200-2")
    setup = engine_for(a, run, max_paddings=256)
    assert setup.config.max_paddings is None and any("max_paddings unset" in n for n in setup.notes)
    assert batching(run.measured.records) == (14, 9)  # measured
    assert batching(replay(run, setup.config, setup.cost).records.records) == (10, 8)  # replayed uncapped
    assert batching(replay(run, replace(setup.config, max_paddings=256), setup.cost).records.records) == (5, 0)
    run = load_measured("distserve:vllm-400-4")
    setup = engine_for(a, run, max_paddings=256)
    assert setup.config.max_paddings == 256
    assert batching(run.measured.records) == (45, 0)  # measured
    assert batching(replay(run, setup.config, setup.cost).records.records) == (34, 0)  # replayed capped


def test_decode_steps_read_by_hand():
    from kvledger.calibration.run_evidence import decode_steps_read

    # A: first token 1.0 s, finish 2.0 s, 11 tokens (10 decode steps); B: 1.3 → 1.8 s, 2 tokens; C: 0.5 → 1.5 s,
    # 3 tokens. Prompt steps end at 0.5 (C), 1.0 (A), 1.3 (B), each priced 0.1 s.
    # A: the step ending at 1.3 lies in (1.0, 2.0] → d = (1.0 − 0.1)/10 = 0.09 s, 1/10 prompt steps per decode step;
    #    decoding meanwhile: A 1.0 s + B 0.5 s + C 0.5 s of overlap over 1.0 s = 2.0.
    # B: no step in (1.3, 1.8] → d = 0.5/1; overlap A 0.5 + B 0.5 + C 0.2 over 0.5 s = 2.4.
    # C: steps at 1.0 and 1.3 in (0.5, 1.5] → d = (1.0 − 0.2)/2 = 0.4, 2/2 = 1 per decode step; overlap C 1.0 +
    #    A 0.5 + B 0.2 over 1.0 s = 1.7. Rows come in first-token order: C, A, B.
    recs = [_rec(0, 100, 1.0, 2.0, out=11), _rec(1, 100, 1.3, 1.8, out=2), _rec(2, 100, 0.5, 1.5, out=3)]
    rows = decode_steps_read(recs, lambda step: 0.1, min_output_tokens=2)
    assert rows.ravel().tolist() == pytest.approx([1.7, 0.4, 1.0, 2.0, 0.09, 0.1, 2.4, 0.5, 0.0])
    # only A has ≥ 11 output tokens; the prompt step's price is the caller's (here its prompt tokens, s)
    rows = decode_steps_read(recs, lambda step: sum(step.prompt_tokens) / 1000, min_output_tokens=11)
    assert rows.ravel().tolist() == pytest.approx([2.0, 0.09, 0.1])
    with pytest.raises(InputError, match="min_output_tokens"):
        decode_steps_read(recs, lambda step: 0.1, min_output_tokens=1)
    assert decode_steps_read([], lambda step: 0.1).shape == (0, 3)
