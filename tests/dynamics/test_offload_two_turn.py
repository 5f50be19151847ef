"""A two-turn session whose second turn reuses a prefix evicted from HBM to the host tier, worked by hand under
vLLM's OffloadingConnector rule and SGLang HiCache's."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn
from kvledger.errors import InputError

# Every step costs 10 ms + 10 µs per token it computes (FixedStepCost(0.01, 1e-5)).
# Session A: turn 0 = 1,024 input tokens, 16 output; turn 1 sent 10 s after turn 0 finished, 64 new input tokens, so
# its prompt is 1,024 + 16 + 64 = 1,104 tokens and its first 1,024 tokens (16 segments of 64) are turn 0's prompt.
# Sessions B and C (1,024 + 16 tokens each) arrive at 1 s and 2 s and push A's prefix out of HBM.
# Host tier: 131,072 B of KV per token (Llama-3.1-8B bf16) read at 51.2 GB/s (PCIe Gen5 x16, 64 GB/s × 0.8):
# loading 1,024 tokens takes 1,024 × 131,072 / 51.2e9 = 2.62144 ms.
LOAD_S = 1024 * 131072 / 51.2e9
HOST = HostTier(1000, 131072, 51.2e9, 51.2e9)


def _sessions() -> SessionLoop:
    a = Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0)), 0, 0)
    b = Session("B", 1.0, (Turn(1024, 16),), 0, 1)
    c = Session("C", 2.0, (Turn(1024, 16),), 0, 2)
    return SessionLoop((a, b, c), 64)


def _turn_two(run):
    return next(r for r in run.with_offload.records.records if r.request_id == "A-t1"), next(
        r for r in run.without_offload.records.records if r.request_id == "A-t1")


def test_vllm_two_turn_load_before_schedule():
    # 80 blocks of 16 tokens (79 usable = 1,264 tokens): B's and C's prompts evict A's blocks from HBM.
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), HOST)
    t = run.tiers
    # stored write-through: each request's full blocks as they are computed. A-t0, B, C end with 1,024 + 15 computed
    # tokens (the last sampled token is never computed) = 64 full blocks each; A-t1's 1,104-token prompt is 69 blocks,
    # the first 64 (A-t0's prompt) already stored, so 5 new; its decode ends at 1,119 tokens, still 69 blocks.
    # 3 × 64 + 5 = 197; the host holds 1,000, so nothing is evicted.
    assert t.stored_units == 197 and t.evicted_units == 0
    # loaded: the 64 blocks (1,024 tokens) beyond an HBM hit of 0
    assert t.host_hit_tokens == 1024 and t.hbm_hit_tokens == 0
    assert t.host_load_s == pytest.approx(LOAD_S)
    # prompt tokens at first admission: 3 × 1,024 + 1,104 = 4,176; host hit rate 1,024 / 4,176
    assert t.prompt_tokens == 4176 and t.host_hit_rate == pytest.approx(1024 / 4176)
    rec, base = _turn_two(run)
    # without offload: one step computing all 1,104 tokens: 10 ms + 11.04 ms = 21.04 ms
    assert base.ttft_s == pytest.approx(0.02104)
    # with offload: the load (2.62144 ms) before the scheduler sees it, then a step computing 1,104 − 1,024 = 80
    # tokens: 10 ms + 0.8 ms. TTFT = 2.62144 + 10.8 = 13.42144 ms; the loaded tokens are its cached tokens.
    assert rec.ttft_s == pytest.approx(LOAD_S + 0.0108)
    assert rec.num_cached_tokens == 1024


def test_sglang_two_turn_load_back_overlapped():
    # a token pool of 1,299 slots (page size 1): B and C evict A's tree nodes; write_through backed them up on insert.
    cfg = EngineConfig(num_gpu_blocks=1300, max_model_len=1200, block_size=1, max_num_batched_tokens=2048,
                       prefix_caching_policy="sglang", batching="sglang")
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), HOST)
    t = run.tiers
    # host units are 64-token segments: A-t0, B, C store 16 each, A-t1 adds its 17th (tokens 1,024–1,087)
    assert t.stored_units == 49
    assert t.host_hit_tokens == 1024 and t.hbm_hit_tokens == 0
    rec, base = _turn_two(run)
    assert base.ttft_s == pytest.approx(0.02104)
    # load_back beside the forward pass: the step takes max(10.8 ms of compute, 2.62 ms of load) = 10.8 ms
    assert rec.ttft_s == pytest.approx(0.0108)
    # the same turn with a link 10× slower (5.12 GB/s): the load (26.2144 ms) now sets the step
    slow = HostTier(1000, 131072, 5.12e9, 5.12e9)
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), slow, compare=False)
    rec = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
    assert rec.ttft_s == pytest.approx(10 * LOAD_S)


def test_write_through_selective_needs_a_second_use():
    cfg = EngineConfig(num_gpu_blocks=1300, max_model_len=1200, block_size=1, max_num_batched_tokens=2048,
                       prefix_caching_policy="sglang", batching="sglang")
    sel = HostTier(1000, 131072, 51.2e9, 51.2e9, "write_through_selective")
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), sel, compare=False)
    # A's segments were held by one request before they were evicted: not backed up, nothing to load for A-t1, which
    # recomputes them; as their second holder A-t1 then gets its 16 reused segments backed up (too late for itself)
    assert run.tiers.host_hit_tokens == 0 and run.tiers.stored_units == 16


def test_host_tier_is_per_replica_and_affinity_keeps_the_hit():
    # Session A alone on two replicas with big pools: round robin sends turn 1 to replica 1, whose HBM and CPU tier
    # never saw turn 0 (each engine has its own host tier), so it recomputes all 1,104 tokens (21.04 ms); session
    # affinity sends it back to replica 0, where turn 0's 1,024 prompt tokens are still in HBM (10 ms + 0.8 ms).
    a = Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0)), 0, 0)
    cfg = EngineConfig(num_gpu_blocks=400, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    ttft = {}
    for router in ("round_robin", "session_affinity"):
        run = simulate_offload(SessionLoop((a,), 64), cfg, FixedStepCost(0.01, 1e-5), HOST, num_replicas=2,
                               router=router, compare=False)
        rec = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
        ttft[router] = (rec.ttft_s, run.tiers.hbm_hit_tokens, run.tiers.host_hit_tokens)
    assert ttft["round_robin"] == (pytest.approx(0.02104), 0, 0)
    assert ttft["session_affinity"] == (pytest.approx(0.0108), 1024, 0)


def test_vllm_two_turn_under_arc_eviction_is_the_same():
    # the host holds 1,000 blocks and 197 are stored: nothing is evicted, so ARC's order cannot change what is loaded
    # (its touch of A-t1's 69 blocks moves the 64 held ones to T2; the lookup finds the same 64)
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    arc = HostTier(1000, 131072, 51.2e9, 51.2e9, eviction="arc")
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), arc, compare=False)
    t = run.tiers
    assert (t.stored_units, t.evicted_units, t.host_hit_tokens) == (197, 0, 1024)
    rec = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
    assert rec.ttft_s == pytest.approx(LOAD_S + 0.0108)


def test_vllm_two_turn_with_lmcache_chunks():
    # LMCache's 256-token chunks (16 blocks): only whole chunks of a prompt are stored, not decoded tokens nor a
    # partial chunk. A-t0, B, C: 1,024-token prompts = 4 chunks each; A-t1's 1,104-token prompt has 4 whole chunks,
    # the same 4 as A-t0's (same prefix, so the same chained key): 12 stored, none evicted.
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    lmcache = HostTier(1000, 131072, 51.2e9, 51.2e9, chunk_tokens=256)
    run = simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), lmcache, compare=False)
    t = run.tiers
    assert (t.stored_units, t.evicted_units) == (12, 0)
    # A-t1's lookup from the prompt's start: 4 whole chunks before its limit of 68 blocks = 1,024 tokens beyond an HBM
    # hit of 0, so the same load and TTFT as the native connector's (2.62144 ms + 10.8 ms)
    assert t.host_hit_tokens == 1024
    rec = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
    assert rec.ttft_s == pytest.approx(LOAD_S + 0.0108)
    with pytest.raises(InputError, match="whole blocks"):
        simulate_offload(_sessions(), cfg, FixedStepCost(0.01, 1e-5), HostTier(10, 1.0, 1.0, 1.0, chunk_tokens=100))


def test_vllm_load_waits_for_the_scheduler_to_reach_the_request():
    # vLLM 0.33 (scheduler.py schedule): a load starts when the scheduler reaches the request at the head of its
    # waiting queue, into blocks held for it, so every loaded block is served. max_num_seqs 1: D (16 + 500 tokens,
    # at 10 s) runs, E (16 + 16, at 10.1 s) waits behind it, and A-t1 (at A-t0's finish + 10 s ≈ 10.17 s) waits
    # behind E. The scheduler reaches A-t1 when E finishes; then the 64-block load (2.62144 ms; 64 + 5 = 69 blocks
    # ≤ 79 free) and one step computing 1,104 − 1,024 = 80 tokens (10 ms + 0.8 ms).
    d = Session("D", 10.0, (Turn(16, 500),), 0, 3)
    e = Session("E", 10.1, (Turn(16, 16),), 0, 4)
    loop = SessionLoop((*_sessions().sessions, d, e), 64)
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048,
                       max_num_seqs=1)
    run = simulate_offload(loop, cfg, FixedStepCost(0.01, 1e-5), HOST)
    rec = next(r for r in run.with_offload.records.records if r.request_id == "A-t1")
    e_rec = next(r for r in run.with_offload.records.records if r.request_id == "E-t0")
    assert rec.arrival_s < e_rec.arrival_s + e_rec.ttft_s  # A-t1 arrived while E still waited or ran
    assert rec.arrival_s + rec.ttft_s == pytest.approx(e_rec.finish_s + LOAD_S + 0.0108)
    # all 1,024 loaded tokens served. Before, the load was made at A-t1's arrival into unreferenced blocks; D's
    # decode (growing to ⌈516 ÷ 16⌉ = 33 blocks) and E (2) then took 19 of them: 304 tokens loaded and recomputed,
    # 720 served, and A-t1's step computed 1,104 − 720 = 384 tokens
    t = run.tiers
    assert rec.num_cached_tokens == 1024 and t.host_hit_tokens == 1024 and not t.host_unserved_tokens
    assert t.host_load_s == pytest.approx(LOAD_S)


def test_vllm_a_host_hit_behind_an_arrival_time_load_waits_for_it():
    # The set-up above with the host read at 51.2 MB/s (a 1,024-token load takes 2.62144 s) and a second two-turn
    # session E at 0.5 s. A-t0 and E-t0: a 1,024-token step (10 ms + 10.24 ms), then 15 decode steps of 10.01 ms:
    # they finish at 0.17039 s and 0.67039 s, and their second turns arrive 10 s later.
    host = HostTier(1000, 131072, 51.2e6, 51.2e9)
    load_s = 1024 * 131072 / 51.2e6
    two = (Turn(1024, 16), Turn(64, 16, think_s=10.0))
    loop = SessionLoop((Session("A", 0.0, two, 0, 0), Session("E", 0.5, two, 0, 1),
                        Session("B", 1.0, (Turn(1024, 16),), 0, 2), Session("C", 2.0, (Turn(1024, 16),), 0, 3)), 64)
    cfg = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    run = simulate_offload(loop, cfg, FixedStepCost(0.01, 1e-5), host)
    recs = {r.request_id: r for r in run.with_offload.records.records}
    finish0_s = 0.02024 + 15 * 0.01001
    # A-t1 reaches an idle replica at 10.17039 s and loads at once (begin_load), reserving its whole 1,120-token
    # sequence: 70 of the 79 usable blocks. E-t1 arrives at 10.67039 s while that load runs and nothing runs: its
    # own 70 blocks do not fit beside A-t1's, so it waits in the queue while the replica waits for A-t1's load.
    # A-t1: its load, then an 80-token step (10.8 ms); 15 decodes later it finishes and frees its blocks.
    a_first_s = finish0_s + 10.0 + load_s + 0.0108
    assert recs["A-t1"].ttft_s == pytest.approx(load_s + 0.0108)
    # E-t1's load starts at the schedule after A-t1's finish; then an 80-token step.
    e_first_s = a_first_s + 15 * 0.01001 + load_s + 0.0108
    assert recs["E-t1"].ttft_s == pytest.approx(e_first_s - (0.5 + finish0_s + 10.0))
    assert recs["A-t1"].num_cached_tokens == recs["E-t1"].num_cached_tokens == 1024
    assert run.tiers.host_hit_tokens == 2048


def test_two_replicas_blocked_on_loads_finish():
    # a random closed-loop workload (the review's off_stress seed 12: 2 replicas, async scheduling, host read at
    # 51.2 MB/s) where both replicas' queues once waited on their loads' reservations with nothing running: their
    # clocks then went forward one ulp at a time. It now finishes, the same twice.
    import random

    rng = random.Random(12)
    sessions = []
    for i in range(rng.randint(3, 25)):
        turns = tuple(Turn(rng.randint(16, 900), rng.randint(1, 64), think_s=rng.uniform(0, 2))
                      for _ in range(rng.randint(1, 4)))
        sessions.append(Session(f"S{i}", rng.uniform(0, 3), turns, rng.choice([0, 64, 256]), i))
    blocks = rng.randint(70, 400)
    cfg = EngineConfig(num_gpu_blocks=blocks, max_model_len=min(16 * (blocks - 1), 4096), block_size=16,
                       max_num_batched_tokens=rng.choice([256, 512, 2048]), max_num_seqs=rng.choice([2, 8, 256]),
                       async_scheduling=rng.random() < 0.5)
    host = HostTier(rng.choice([50, 200, 2000]), 131072, 51.2e9 / rng.choice([1, 100, 1000]), 51.2e9)
    assert rng.choice([1, 1, 2]) == 2 and cfg.async_scheduling and host.read_bytes_per_s == 51.2e6

    def finishes():
        run = simulate_offload(SessionLoop(tuple(sessions), 16), cfg, FixedStepCost(0.01, 1e-5), host,
                               num_replicas=2)
        return sorted((r.request_id, r.ttft_s, r.finish_s, r.error) for r in run.with_offload.records.records)

    first = finishes()
    assert first == finishes() and not any(e for *_, e in first)
