"""A session's next turn hits the KV of the previous turn's decoded tokens (vLLM hashes every full block, decoded ones
included; SGLang's cache_finished_req inserts the output), worked by hand."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.simulator import simulate
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn, turn_specs

# One session, no system prompt, 64-token segments. Turn 0: 64 input tokens, 65 output; its last sampled token is
# never computed, so it ends with 64 + 64 = 128 computed tokens: 8 full blocks of 16, segments 0 (prompt) and 1
# (tokens 64–127, all output). Turn 1 (10 s later): 64 new tokens; prompt 64 + 65 + 64 = 193 tokens, whole segments
# 0, 1, 2 (192 tokens). Every step costs 10 ms + 10 µs per computed token.
SESSION = Session("A", 0.0, (Turn(64, 65), Turn(64, 4, think_s=10.0)), 0, 0)
VLLM = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=400, max_num_batched_tokens=2048)
SGLANG = EngineConfig(num_gpu_blocks=1000, block_size=1, max_model_len=400, max_num_batched_tokens=2048,
                      prefix_caching_policy="sglang", batching="sglang")


def test_turn_lists_the_whole_segments_of_its_output():
    t0, t1 = turn_specs(SESSION, 64)
    # turn 0's stream is 64 + 65 = 129 tokens: segment 1 (tokens 64–127) is whole, the 129th token starts segment 2
    assert len(t0.prefix_segments) == 1 and len(t0.output_segments) == 1
    assert t0.stream_segments == t1.prefix_segments[:2]
    assert turn_specs(SESSION, 64, reuse_output=False)[0].output_segments == ()


@pytest.mark.parametrize("cfg", [VLLM, SGLANG], ids=["vllm", "sglang"])
@pytest.mark.parametrize("reuse", [True, False])
def test_next_turn_hits_the_previous_turns_output(cfg, reuse):
    res = simulate(SessionLoop((SESSION,), 64, reuse_output=reuse), cfg, FixedStepCost(0.01, 1e-5))
    rec = next(r for r in res.records.records if r.request_id == "A-t1")
    if reuse:
        # hit: blocks 0–7 / segments 0–1 = 128 tokens (cap 193 − 1); compute 65 tokens: 10 ms + 0.65 ms
        assert rec.num_cached_tokens == 128 and rec.ttft_s == pytest.approx(0.01065)
    else:
        # only turn 0's prompt (64 tokens) is shared; compute 129 tokens: 10 ms + 1.29 ms
        assert rec.num_cached_tokens == 64 and rec.ttft_s == pytest.approx(0.01129)
