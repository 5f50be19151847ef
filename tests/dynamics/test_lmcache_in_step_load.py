"""LMCache through vLLM's LMCacheConnectorV1 (before 0.33) loads in the step that schedules the request (load_async
False): worked by hand beside the asynchronous, queue-leaving load of the native connector (and of LMCache through
0.33's LMCacheMPConnector), which must stay as it was."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn
from kvledger.errors import InputError

# Every step costs 10 ms + 10 µs per token it computes (FixedStepCost(0.01, 1e-5)).
# Host tier: 131,072 B of KV per token (Llama-3.1-8B bf16) read at 51.2 GB/s; 1,024 hit tokens are
# 1,024 × 131,072 = 134,217,728 B, loaded in 134,217,728 / 51.2e9 = 2.62144 ms.
LOAD_S = 1024 * 131072 / 51.2e9
COST = FixedStepCost(0.01, 1e-5)
# 120 blocks of 16 tokens (119 usable): A-t0, then B and C (65 blocks each) push A's blocks out of HBM; D's 33
# blocks and A-t1's 70 then fit together.
CFG = EngineConfig(num_gpu_blocks=120, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)


def _loop() -> SessionLoop:
    # A: turn 0 = 1,024 input + 16 output tokens (0.02024 s prefill, 15 decodes of 10.01 ms: done at 0.17039 s);
    # turn 1 10 s later (10.17039 s), prompt 1,024 + 16 + 64 = 1,104 tokens whose first 1,024 are 4 LMCache chunks
    # (or 64 native blocks) in the host tier. D: 16 + 500 tokens from 10.0 s, decoding while A-t1 arrives.
    a = Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0)), 0, 0)
    b = Session("B", 1.0, (Turn(1024, 16),), 0, 1)
    c = Session("C", 2.0, (Turn(1024, 16),), 0, 2)
    d = Session("D", 10.0, (Turn(16, 500),), 0, 3)
    return SessionLoop((a, b, c, d), 64)


def _run(host: HostTier):
    run = simulate_offload(_loop(), CFG, COST, host, compare=False)
    recs = {r.request_id: r for r in run.with_offload.records.records}
    return run.tiers, recs["A-t1"], recs["D-t0"]


# D's steps: a 16-token prefill (10.16 ms) at 10.0 s, then decodes of 10.01 ms, starting at 10.01016 + k × 10.01 ms.
# A-t1 arrives at 10.17039 s, 0.07 ms after the decode starting at 10.17032 s (k = 16), which ends at 10.18033 s.
# Its admission step computes D's token and A-t1's 1,104 − 1,024 = 80: 10 ms + 81 × 10 µs = 10.81 ms of forward.
# D then finishes after 499 decodes: 483 alone (10.01 ms), 1 with A-t1's prefill and 15 with A-t1's decodes (10.02 ms).
WAIT_S = 10.18033 - 10.17039
D_SPAN_S = 0.01016 + 483 * 0.01001 + 0.01081 + 15 * 0.01002


def test_lmcache_in_step_load_adds_the_transfer_to_the_step():
    t, a1, d = _run(HostTier(1000, 131072, 51.2e9, 51.2e9, chunk_tokens=256, load_in_step=True))
    # A-t1 is admitted by the step the scheduler reaches it in (10.18033 s), its 1,024 hit tokens counted as computed;
    # that step lasts forward + bytes / bandwidth = 10.81 ms + 2.62144 ms
    assert a1.ttft_s == pytest.approx(WAIT_S + 0.01081 + LOAD_S)
    assert a1.num_cached_tokens == 1024 and t.host_hit_tokens == 1024 and t.hbm_hit_tokens == 0
    assert t.host_load_s == pytest.approx(LOAD_S) and t.loaded_bytes == 1024 * 131072
    # the load slows the request sharing the step: D finishes LOAD_S later than its steps' own time
    assert d.finish_s - 10.0 == pytest.approx(D_SPAN_S + LOAD_S)


@pytest.mark.parametrize("chunk_tokens", [0, 256])
def test_asynchronous_loads_stay_off_the_step(chunk_tokens):
    # the native connector (blocks) and LMCache through 0.33's LMCacheMPConnector (chunks): A-t1's load starts at its
    # arrival (nothing waits ahead) and is done at 10.17301 s, inside D's running decode; A-t1 then re-enters the
    # queue and is scheduled at 10.18033 s with the same 10.81 ms step, so its TTFT has no load in it and D's steps
    # are their own time
    t, a1, d = _run(HostTier(1000, 131072, 51.2e9, 51.2e9, chunk_tokens=chunk_tokens))
    assert a1.ttft_s == pytest.approx(WAIT_S + 0.01081)
    assert a1.num_cached_tokens == 1024 and t.host_hit_tokens == 1024
    assert t.host_load_s == pytest.approx(LOAD_S)
    assert d.finish_s - 10.0 == pytest.approx(D_SPAN_S)


def test_a_lone_request_in_step_is_forward_plus_load():
    # A alone (B and C push its blocks out of HBM; no D): A-t1 reaches an idle replica at 10.17039 s and is
    # scheduled at once in one step: 10 ms + 80 × 10 µs of forward + 2.62144 ms of load = TTFT. The asynchronous
    # load gives the same sum, load first, then the step.
    loop = SessionLoop(_loop().sessions[:3], 64)
    for in_step in (True, False):
        host = HostTier(1000, 131072, 51.2e9, 51.2e9, chunk_tokens=256, load_in_step=in_step)
        run = simulate_offload(loop, CFG, COST, host, compare=False)
        a1 = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
        assert a1.ttft_s == pytest.approx(0.0108 + LOAD_S)


def test_in_step_load_is_lmcaches_only():
    with pytest.raises(InputError, match="only with LMCache's chunks"):
        HostTier(1000, 131072, 51.2e9, 51.2e9, load_in_step=True)
    with pytest.raises(InputError, match="True or False"):
        HostTier(1000, 131072, 51.2e9, 51.2e9, chunk_tokens=256, load_in_step=1)
