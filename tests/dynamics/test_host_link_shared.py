"""Loads from the host tier share the replica's host link (dynamics/loads_in_flight.py): a load that starts while
another is on the link waits for it. A long-context trial found each load priced at the link's full bandwidth
whatever else was loading, so a burst of returning sessions with long prefixes got every load at once."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn

# Every step costs 10 ms + 10 µs per token it computes. Sessions A and B start at 0 s with 1,024 input + 16 output
# tokens: both prompts fill one 2,048-token step and they decode together, so both finish at the same time, and both
# second turns (64 new tokens, prompt 1,104) arrive 10 s later at the same instant. C (1 s) and D (2 s), 2,000 + 16
# tokens each (126 blocks), evict A's and B's blocks from the 159 usable blocks of HBM, so both second turns load
# their first 1,024 tokens from the host tier: 1,024 × 131,072 B / 0.512 GB/s = L = 262.144 ms each.
L_S = 1024 * 131072 / 0.512e9


def test_two_loads_at_once_take_the_link_one_after_the_other():
    host = HostTier(1000, 131072, 0.512e9, 0.512e9)
    turns = (Turn(1024, 16), Turn(64, 16, think_s=10.0))
    loop = SessionLoop((Session("A", 0.0, turns, 0, 0), Session("B", 0.0, turns, 0, 1),
                        Session("C", 1.0, (Turn(2000, 16),), 0, 2), Session("D", 2.0, (Turn(2000, 16),), 0, 3)), 64)
    cfg = EngineConfig(num_gpu_blocks=160, max_model_len=2048, block_size=16, max_num_batched_tokens=2048)
    run = simulate_offload(loop, cfg, FixedStepCost(0.01, 1e-5), host)
    assert run.tiers.host_hit_tokens == 2 * 1024 and run.tiers.hbm_hit_tokens == 0
    rec = {r.request_id: r for r in run.with_offload.records.records}
    a, b = rec["A-t1"], rec["B-t1"]
    assert a.arrival_s == b.arrival_s and a.num_cached_tokens == b.num_cached_tokens == 1024
    # A's load holds the link for L; A's step then computes 1,104 − 1,024 = 80 tokens: 10 ms + 0.8 ms
    assert a.ttft_s == pytest.approx(L_S + 0.0108)
    # B's load starts when A's ends: ready at 2L, by when A has finished its 16 tokens (≈ 0.17 s), so B's step is its
    # 80 tokens alone. (Before: both loads ran at the full bandwidth at once, both ready at L, one 160-token step:
    # TTFT L + 11.6 ms = 273.744 ms for each.)
    assert b.ttft_s == pytest.approx(2 * L_S + 0.0108)
    # the tier's load time is still the sum of the loads' own times, the wait behind the link not counted in it
    assert run.tiers.host_load_s == pytest.approx(2 * L_S)
