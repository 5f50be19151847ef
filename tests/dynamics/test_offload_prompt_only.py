"""What vLLM's native CPU tier stores, by release: every full block (0.19.0–0.22.0) or the prompt's only (from 0.23.0,
``offload_prompt_only``), seen from a session's next turn; and a request looked up again at a later attempt. Worked
by hand.

Every step costs 10 ms + 10 µs per token it computes (FixedStepCost(0.01, 1e-5)); 16-token blocks; 64-token segments.
Session A: turn 0 = 1,024 input tokens, 144 output; turn 1 sent 10 s after turn 0 finished with 64 new input tokens,
so its prompt is 1,024 + 144 + 64 = 1,232 tokens. Its first 1,152 tokens are turn 0's prompt (16 segments) and the
first 128 output tokens (segments 16 and 17, whole inside turn 0's 1,168 tokens: the session's output segments).
Sessions B and C (1,024 + 16 tokens each) arrive at 1 s and 2 s and push A's blocks out of HBM: 80 GPU blocks (79
usable); A-t0 frees its 73 blocks tail first, B takes the 6 never-used blocks then A72 … A14 (65 blocks), C takes
A13 … A0 first: A-t1 finds nothing in HBM.

Stores (write-through, a block when the tokens computed complete it; the last sampled token is never computed):
* 0.19.0 rules: A-t0 computes 1,024 + 143 = 1,167 tokens = 72 full blocks (64 prompt + 8 output); B and C 1,039 =
  64 each; A-t1's prompt 1,232 = 77 full blocks, 72 already there, 5 new; its decode ends at 1,247 = 77. 72 + 64 + 64
  + 5 = 205 stored.
* 0.33.0 rules: A-t0, B, C store their 64 prompt blocks; A-t1's 77 prompt blocks, 64 there, 13 new (blocks 64–71
  hold turn 0's output, never stored): 64 × 3 + 13 = 205 stored too.
A-t1's lookup (beyond an HBM hit of 0, at most (1,232 − 1) // 16 = 76 blocks): 72 blocks = 1,152 tokens (0.19.0)
or 64 = 1,024 (0.33.0). Prompt tokens at first admission: 3 × 1,024 + 1,232 = 4,304.
Host tier: 131,072 B per token at 51.2 GB/s: loading n tokens takes n × 131,072 / 51.2e9 s.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier, OffloadingPagedKVManager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn

COST = FixedStepCost(0.01, 1e-5)
CFG = EngineConfig(num_gpu_blocks=80, max_model_len=1264, block_size=16, max_num_batched_tokens=2048)


def _load_s(tokens: int) -> float:
    return tokens * 131072 / 51.2e9


def _run(prompt_only: bool):
    a = Session("A", 0.0, (Turn(1024, 144), Turn(64, 16, think_s=10.0)), 0, 0)
    b = Session("B", 1.0, (Turn(1024, 16),), 0, 1)
    c = Session("C", 2.0, (Turn(1024, 16),), 0, 2)
    host = HostTier(1000, 131072, 51.2e9, 51.2e9, prompt_only=prompt_only)
    run = simulate_offload(SessionLoop((a, b, c), 64), CFG, COST, host)
    return run.tiers, next(r for r in run.with_offload.records.records if r.request_id == "A-t1")


def test_vllm_0_19_rules_the_next_turn_loads_the_previous_output_from_the_host():
    t, rec = _run(prompt_only=False)
    assert t.stored_units == 205 and t.evicted_units == 0
    assert t.hbm_hit_tokens == 0 and t.host_hit_tokens == 1152
    assert t.prompt_tokens == 4304 and t.host_hit_rate == pytest.approx(1152 / 4304)
    # TTFT: the load (1,152 tokens: 2.94912 ms), then one step computing 1,232 − 1,152 = 80 tokens: 10.8 ms
    assert rec.num_cached_tokens == 1152
    assert rec.ttft_s == pytest.approx(_load_s(1152) + 0.0108)


def test_vllm_0_33_rules_the_host_holds_only_turn_0s_prompt():
    t, rec = _run(prompt_only=True)
    assert t.stored_units == 205 and t.evicted_units == 0
    assert t.hbm_hit_tokens == 0 and t.host_hit_tokens == 1024
    assert t.prompt_tokens == 4304 and t.host_hit_rate == pytest.approx(1024 / 4304)
    # TTFT: the load (1,024 tokens: 2.62144 ms), then one step computing 1,232 − 1,024 = 208 tokens: 12.08 ms
    assert rec.num_cached_tokens == 1024
    assert rec.ttft_s == pytest.approx(_load_s(1024) + 0.01208)


def _manager(prompt_only: bool) -> OffloadingPagedKVManager:
    return OffloadingPagedKVManager(9, 4, True, max_model_len=32,
                                    host=HostTier(100, 131072, 51.2e9, 51.2e9, prompt_only=prompt_only))


def _req(uid: int, rid: str, prompt: int, output: int, segs: tuple) -> SimRequest:
    return SimRequest(uid, RequestSpec(rid, 0.0, prompt, output, prefix_segments=segs, segment_tokens=4))


def test_a_first_arrival_found_nothing_then_is_looked_up_again_at_a_later_attempt():
    # 4-token blocks, 8 usable. X (8 prompt tokens, segments 1 and 2 of 4 tokens each) arrives with nothing in the host:
    # begin_load finds nothing (that lookup is its first attempt's). Y, the same 8 tokens, is admitted and stores
    # them (2 blocks); they leave HBM (freed and evicted by Z). X's next attempt (vLLM ``schedule``: the connector is
    # asked while nothing is computed) looks up to (8 − 1) // 4 = 1 block (the last prompt token is always computed)
    # and finds it in the host: 4 tokens, 4 × 131,072 / 51.2e9 s. Before the rule: 0.0, never looked up again.
    kv = _manager(prompt_only=True)
    x = _req(1, "X", 8, 4, (1, 2))
    y = _req(2, "Y", 8, 4, (1, 2))
    z = _req(3, "Z", 32, 1, ())
    assert kv.begin_load(x) == 0.0 and kv.start_load(x) == 0.0  # the attempt begin_load stood for
    assert kv.admit(y, kv.match(y)[0], 8, 8)
    kv.free(y, False)
    assert kv.admit(z, kv.match(z)[0], 32, 32)  # all 8 usable blocks: Y's cached ones evicted
    kv.free(z, False)
    assert kv.match(x)[1] == 0
    assert kv.start_load(x) == pytest.approx(_load_s(4))
    assert kv.host_hit_tokens == 4
    assert kv.start_load(x) == 0.0  # loaded once: not looked up again

