"""vLLM V0's prefill-first rule (batching="vllm_v0") on tiny hand-checkable setups: block size 4, FixedStepCost.

Every expected number is worked out by hand in the comments from V0's rule (scheduler.py module
doc): a step is prompt-only when a waiting prompt can be admitted, else every running request
decodes; a prompt needs its whole blocks plus the 1% watermark free; a decode needs a free block.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.cluster import run_cluster
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.router import make_router
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.errors import InputError

STEP = FixedStepCost(per_step_s=0.01)
V0 = dict(batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False)


def run(reqs, fast_forward=True, cost=STEP, **cfg):
    rep = Replica(EngineConfig(**cfg), cost, fast_forward=fast_forward)
    recs = run_cluster(reqs, [rep], make_router("round_robin"))
    return {r.request_id: r for r in recs}, rep


@pytest.mark.parametrize("ff", [True, False])
def test_a_prompt_arriving_mid_decode_pauses_the_running_decodes_for_one_step(ff):
    # a: P=4, O=4 at t=0; b: P=4, O=2 at t=0.015 (visible from the step starting at .02).
    # V0: step 0 [0, .01) prompt a → a1 at .01; step 1 decode a → a2 at .02;
    #     step 2 prompt-only b → b1 at .03 (a pauses); step 3 decode a, b → a3, b2 at .04 (b done);
    #     step 4 decode a → a4 at .05.
    # v1: step 2 is mixed (a decodes while b's prompt runs): a at .01 .02 .03 .04, b at .03 .04.
    reqs = [RequestSpec("a", 0.0, 4, 4), RequestSpec("b", 0.015, 4, 2)]
    kw = dict(num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=16)
    v0, _ = run(reqs, ff, **kw, **V0)
    np.testing.assert_allclose(v0["a"].chunk_times_s, [0.01, 0.02, 0.04, 0.05])
    np.testing.assert_allclose(v0["b"].chunk_times_s, [0.03, 0.04])
    np.testing.assert_allclose(v0["a"].itls_s, [0.01, 0.02, 0.01])  # the 20 ms gap is b's prompt step
    v1, _ = run(reqs, ff, **kw, enable_chunked_prefill=False, enable_prefix_caching=False)
    np.testing.assert_allclose(v1["a"].chunk_times_s, [0.01, 0.02, 0.03, 0.04])
    np.testing.assert_allclose(v1["b"].chunk_times_s, [0.03, 0.04])


@pytest.mark.parametrize("max_paddings, expect", [
    # cost 10 ms + 1 ms per token; budget 16; a: P=8, b: P=3, c: P=6, all O=1 at t=0.
    # padded (max_paddings 4): a alone (a+b would pad to 2 × 8 = 16 with 16 − 11 = 5 > 4 padding);
    #   step 0 [a] 8 tokens → .018; step 1 [b, c]: 2 × 6 = 12 ≤ 16, padding 12 − 9 = 3 ≤ 4, priced
    #   on the 12 padded tokens → .018 + .022 = .040.
    (4, {"a": 0.018, "b": 0.040, "c": 0.040}),
    # unpadded (later V0): step 0 [a, b] 11 tokens (c would make 17 > 16) → .021; step 1 [c] 6 → .037.
    (None, {"a": 0.021, "b": 0.021, "c": 0.037}),
])
def test_prompt_batches_form_under_the_budget_and_the_padding_limit(max_paddings, expect):
    reqs = [RequestSpec("a", 0.0, 8, 1), RequestSpec("b", 0.0, 3, 1), RequestSpec("c", 0.0, 6, 1)]
    recs, _ = run(reqs, cost=FixedStepCost(0.01, 0.001), num_gpu_blocks=40, block_size=4, max_model_len=16,
                  max_num_batched_tokens=16, max_paddings=max_paddings, **V0)
    assert {k: r.first_token_s for k, r in recs.items()} == pytest.approx(expect)


def test_max_num_seqs_caps_the_prompt_batch():
    # max_num_seqs 2: step 0 admits a, b (tokens .01); c waits while 2 run; step 1 decodes a, b
    # (a done); step 2: c's prompt-only step → .03 while b pauses; step 3: b's last token at .04.
    reqs = [RequestSpec("a", 0.0, 4, 2), RequestSpec("b", 0.0, 4, 3), RequestSpec("c", 0.0, 4, 1)]
    recs, _ = run(reqs, num_gpu_blocks=20, block_size=4, max_model_len=16, max_num_batched_tokens=16,
                  max_num_seqs=2, **V0)
    assert recs["c"].first_token_s == pytest.approx(0.03)
    np.testing.assert_allclose(recs["b"].chunk_times_s, [0.01, 0.02, 0.04])


def test_the_watermark_keeps_one_percent_of_the_blocks_free_at_admission():
    # 100 blocks of 4 tokens, all usable in V0 (no null block); watermark int(0.01 × 100) = 1 block.
    # a: P=392 (98 blocks), O=2; b: P=8 (2 blocks), O=1; both at t=0; budget 512.
    # step 0: a admitted (100 − 98 = 2 ≥ 1); b not: 2 free − 2 = 0 < 1, though its 2 blocks are free.
    # step 1: b still refused; a decodes token index 392 into a 99th block → .02, a done, freed.
    # step 2: b's prompt → .03 (without the watermark it would have joined step 0: .01).
    cfg = dict(num_gpu_blocks=100, block_size=4, max_model_len=396, max_num_batched_tokens=512, **V0)
    assert EngineConfig(**cfg).v0_watermark_blocks == 1 and EngineConfig(**cfg).num_usable_blocks == 100
    recs, rep = run([RequestSpec("a", 0.0, 392, 2), RequestSpec("b", 0.0, 8, 1)], **cfg)
    np.testing.assert_allclose(recs["a"].chunk_times_s, [0.01, 0.02])
    assert recs["b"].first_token_s == pytest.approx(0.03)
    assert rep.kv.capacity_blocks == 100


@pytest.mark.parametrize("ff", [True, False])
def test_a_decode_needs_a_free_block_even_when_its_token_fits(ff):
    # a: P=4, O=3; b: P=2, O=3; both at t=0; blocks of 4 tokens, V0: all blocks usable, watermark 0.
    # 4 blocks: step 0: prompts a [1 block], b [1 block] → a1, b1 at .01; 2 blocks free. step 1: a's
    #   token index 4 takes a new block (1 left), b's index 2 fits its block and a block is free →
    #   .02; step 2: both fit → .03.
    # 3 blocks: step 1: a takes the last free block; b's token fits, but V0 requires a free block, so
    #   b (the newest) is preempted: a2 at .02. step 2: b recomputes its 3 tokens as a prompt (1 block)
    #   → b2 at .03, a pauses. step 3: no block free → b preempted again; a's index 5 fits → a3 at
    #   .04, a done (2 blocks freed). step 4: b recomputes its 4 tokens → b3 at .05.
    kw = dict(block_size=4, max_model_len=12, max_num_batched_tokens=12, **V0)
    reqs = [RequestSpec("a", 0.0, 4, 3), RequestSpec("b", 0.0, 2, 3)]
    roomy, _ = run(reqs, ff, num_gpu_blocks=4, **kw)
    np.testing.assert_allclose(roomy["a"].chunk_times_s, [0.01, 0.02, 0.03])
    np.testing.assert_allclose(roomy["b"].chunk_times_s, [0.01, 0.02, 0.03])
    recs, rep = run(reqs, ff, num_gpu_blocks=3, **kw)
    np.testing.assert_allclose(recs["a"].chunk_times_s, [0.01, 0.02, 0.04])
    np.testing.assert_allclose(recs["b"].chunk_times_s, [0.01, 0.03, 0.05])
    assert recs["b"].num_preemptions == 2 and recs["a"].num_preemptions == 0 and rep.num_preemptions == 2
    # vLLM v1 with the same 3 usable blocks (4 with its null block) grows only when a token needs a
    # block: a takes the last block at step 1, b's tokens fit → both at .01 .02 .03, no preemption.
    v1, _ = run(reqs, ff, num_gpu_blocks=4, block_size=4, max_model_len=12, max_num_batched_tokens=12,
                enable_chunked_prefill=False, enable_prefix_caching=False)
    np.testing.assert_allclose(v1["b"].chunk_times_s, [0.01, 0.02, 0.03])
    assert v1["b"].num_preemptions == 0


def test_v0_settings_are_checked():
    base = dict(num_gpu_blocks=100, block_size=4, max_model_len=16, max_num_batched_tokens=16)
    with pytest.raises(InputError, match="enable_chunked_prefill=False"):
        EngineConfig(**base, batching="vllm_v0", enable_prefix_caching=False)
    with pytest.raises(InputError, match="prefix caching is not modelled"):
        EngineConfig(**base, batching="vllm_v0", enable_chunked_prefill=False)
    with pytest.raises(InputError, match="max_paddings applies to vLLM V0"):
        EngineConfig(**base, max_paddings=256)
    with pytest.raises(InputError, match="max_paddings must be None or an integer"):
        EngineConfig(**base, **V0, max_paddings=-1)
    # 100 blocks, watermark 1: a 400-token request needs all 100 blocks → V0 would ignore it (NEVER)
    with pytest.raises(InputError, match="watermark of 1"):
        EngineConfig(num_gpu_blocks=100, block_size=4, max_model_len=400, max_num_batched_tokens=400, **V0)


def test_v0_notes_and_summary_name_the_rule():
    res = simulate([RequestSpec("a", 0.0, 4, 2)], EngineConfig(num_gpu_blocks=10, block_size=4, max_model_len=16,
                                                               max_num_batched_tokens=16, **V0), STEP)
    assert any("vLLM V0 prefill-first rule" in d for d in res.summary.definitions)
    assert res.config["batching"] == "vllm_v0"


LAG = dict(V0, async_output_proc=True)  # V0's async output processor (vLLM 0.6.0–0.10, CUDA graphs on)


def test_async_output_proc_holds_a_finished_requests_seat_through_an_extra_decode_run():
    # max_num_seqs 1; a: P=4, O=2 and b: P=4, O=1, both at t=0; 10 ms a step.
    # synchronous V0: step 0 prompt a → .01; step 1 decode a → .02 (a done, freed); step 2 prompt b → .03.
    # async output processor (0.9.0 engine/llm_engine.py step): a's last token, sampled in step 1, is processed in
    #   a callback during step 2, so a is still running when step 2 is scheduled — b cannot take its seat and
    #   _schedule_running decodes a once more [.02, .03) ("an extra decode run is done", core/scheduler.py); the
    #   callback frees a, and step 3 runs b's prompt → .04.
    reqs = [RequestSpec("a", 0.0, 4, 2), RequestSpec("b", 0.0, 4, 1)]
    kw = dict(num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=16, max_num_seqs=1)
    sync, _ = run(reqs, **kw, **V0)
    assert sync["b"].first_token_s == pytest.approx(0.03)
    lag, rep = run(reqs, **kw, **LAG)
    np.testing.assert_allclose(lag["a"].chunk_times_s, [0.01, 0.02])  # the client sees a's tokens as before
    assert lag["b"].first_token_s == pytest.approx(0.04)
    assert rep.num_steps == 5 and rep.kv.num_used_blocks == 0


def test_async_output_procs_extra_decode_run_is_priced_with_the_running_batch():
    # 10 ms + 1 ms a token; max_num_seqs 4; a: P=4, O=2; c: P=4, O=4; both at t=0.
    # synchronous: step 0 prompts a, c (8 tokens) → .018; step 1 decodes a, c (2) → .030, a done; step 2 c (1) →
    #   .041; step 3 c → .052.
    # async output processor: step 2 decodes c and, once more, a (2 tokens) → .042; step 3 c → .053.
    reqs = [RequestSpec("a", 0.0, 4, 2), RequestSpec("c", 0.0, 4, 4)]
    kw = dict(num_gpu_blocks=10, block_size=4, max_model_len=16, max_num_batched_tokens=16, max_num_seqs=4)
    cost = FixedStepCost(0.01, 0.001)
    sync, _ = run(reqs, cost=cost, **kw, **V0)
    np.testing.assert_allclose(sync["c"].chunk_times_s, [0.018, 0.030, 0.041, 0.052])
    lag, _ = run(reqs, cost=cost, **kw, **LAG)
    np.testing.assert_allclose(lag["c"].chunk_times_s, [0.018, 0.030, 0.042, 0.053])
    with pytest.raises(InputError, match="needs batching='vllm_v0'"):
        EngineConfig(**kw, enable_chunked_prefill=False, enable_prefix_caching=False, async_output_proc=True)
