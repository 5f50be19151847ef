"""The host tier's opt-in rules worked by hand: vLLM 0.33's store_threshold gate, SGLang HiCache's write_back, and
the disk tier below host memory (HBM → host → disk): LMCache's local disk and HiCache's storage backend; the remote
store (HBM → host → disk → remote): LMCache's RemoteBackend and HiCache's storage backend as a mooncake store."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.connector_caches import ConnectorLRU
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.engine.store_gate import GatedCache, StoreThreshold
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn
from kvledger.errors import InputError

# As in test_offload_two_turn.py: steps cost 10 ms + 10 µs per computed token; 131,072 B of KV per token; the host
# link reads 51.2 GB/s, so 1,024 tokens load in 1,024 × 131,072 / 51.2e9 = 2.62144 ms. A 64-token segment:
# 64 × 131,072 / 51.2e9 = 0.16384 ms.
BPT = 131072
LOAD_S = 1024 * BPT / 51.2e9
SEG_S = 64 * BPT / 51.2e9
COST = FixedStepCost(0.01, 1e-5)
VLLM = EngineConfig(num_gpu_blocks=80, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
SGLANG = EngineConfig(num_gpu_blocks=1300, max_model_len=1200, block_size=1, max_num_batched_tokens=2048,
                      prefix_caching_policy="sglang", batching="sglang")


def _two_turns(*extra: Session) -> SessionLoop:
    """Session A (1,024 + 16 tokens, then 64 more 10 s after) and B, C (1,024 + 16) at 1 s and 2 s, which push A's
    prefix out of HBM."""
    a = Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0), *((Turn(64, 16, think_s=10.0),)
                                                                         if extra else ())), 0, 0)
    b = Session("B", 1.0, (Turn(1024, 16),), 0, 1)
    c = Session("C", 2.0, (Turn(1024, 16),), 0, 2)
    return SessionLoop((a, b, c, *extra), 64)


def _rec(run, rid: str):
    return next(r for r in run.with_offload.records.records if r.request_id == rid)


def test_store_threshold_counts_offers_and_bounds_its_table():
    gate = StoreThreshold(2)
    lru = GatedCache(ConnectorLRU(10), gate)
    lru.store_run([1, 2, 3])  # each offered once: none stored, 3 skipped
    assert list(lru.keys) == [] and gate.skipped == 3
    lru.store_run([2, 3, 4])  # 2 and 3 offered a second time: stored; 4 (once) skipped
    assert list(lru.keys) == [2, 3] and gate.skipped == 4 and lru.stored == 2
    lru.store_run([2, 5])  # 2 is held (not a candidate, still counted: 3 offers); 5 skipped
    assert gate.counts[2] == 3 and gate.skipped == 5
    # a table of 3 keys: [1, 2, 3] then [4] drops 1 (least recently offered); then [2, 3, 4, 5] counts 2, 3, 4 and
    # finds every tracked key counted by this offer, so 5 is not tracked
    small = StoreThreshold(2, max_tracker_size=3)
    small.record([1, 2, 3])
    small.record([4])
    assert list(small.counts.items()) == [(2, 1), (3, 1), (4, 1)]
    small.record([2, 3, 4, 5])
    assert list(small.counts.items()) == [(2, 2), (3, 2), (4, 2)]


def test_vllm_store_threshold_stores_a_block_on_its_second_offer():
    # store_threshold 2. A-t0, B, C each offer 64 full blocks once: none stored (192 skipped). A-t1 (69 blocks) finds
    # nothing in the CPU tier and recomputes (21.04 ms, as without a tier); its offer is the second of A-t0's 64
    # blocks: stored; its 5 new ones skipped. D and E (1,024 + 16 tokens at 12 s and 13 s, after A-t1 finished) push A
    # out of HBM again and are skipped (128). A-t2 (1,184-token prompt, 74 blocks, sent 10 s after A-t1) loads the 64
    # stored blocks: 2.62144 ms + a step of 10 ms + 160 × 10 µs = 14.22144 ms. After its load it offers only blocks
    # 64–73 (vLLM 0.33's CHUNK_LEVEL): 64–67 (A-t1's 17th prompt segment) on their second offer are stored; 68–73
    # skipped (block 68 held the 16 tokens after A-t1's last whole segment: A-t1 keyed it as its own, since the
    # simulator's content unit is the 64-token segment, so A-t2 offers it for the first time).
    d = Session("D", 12.0, (Turn(1024, 16),), 0, 3)
    e = Session("E", 13.0, (Turn(1024, 16),), 0, 4)
    host = HostTier(1000, BPT, 51.2e9, 51.2e9, store_threshold=2)
    run = simulate_offload(_two_turns(d, e), VLLM, COST, host, compare=False)
    t = run.tiers
    assert _rec(run, "A-t1").ttft_s == pytest.approx(0.02104)
    assert _rec(run, "A-t2").ttft_s == pytest.approx(LOAD_S + 0.0116)
    assert (t.stored_units, t.stores_skipped, t.host_hit_tokens) == (64 + 4, 192 + 5 + 128 + 6, 1024)
    # without the gate A-t1 loads the 1,024 tokens A-t0 stored (13.42144 ms)
    plain = simulate_offload(_two_turns(d, e), VLLM, COST, HostTier(1000, BPT, 51.2e9, 51.2e9), compare=False)
    assert _rec(plain, "A-t1").ttft_s == pytest.approx(LOAD_S + 0.0108) and plain.tiers.stores_skipped is None


def test_sglang_write_back_backs_up_on_eviction_and_waits_for_the_copy():
    # write_through (test_offload_two_turn.py) copies every segment as it enters the tree: 49 stored, A-t1's TTFT is
    # max(10.8 ms, 2.62 ms) = 10.8 ms. Under write_back nothing is copied at insert; a segment is copied when it is
    # evicted, and the evicting step waits for the copy. Pool: 1,299 token slots.
    # B at 1 s needs 1,024 slots, 260 are free (A-t0 left 1,039 in the tree): A's 15-token tail goes (not backed up),
    # then 12 of A's 16 segments (768 tokens): B's prefill step = 20.24 ms + 12 × 0.16384 ms.
    # C at 2 s: 4 free; A's last 4 segments, B's tail, 12 of B's segments: 16 copies.
    # A-t1 needs 1,104 slots (1,024 loaded back + 80 new), 4 free: B's last 4 segments, C's tail, 13 of C's
    # segments (832): 17 copies; its step = max(10.8 ms, 2.62144 ms) + 17 × 0.16384 ms = 13.58528 ms. 3 slots are
    # then free and its 15 decoded tokens need 12 more: one more of C's segments is copied during its decode.
    host = HostTier(1000, BPT, 51.2e9, 51.2e9, "write_back")
    run = simulate_offload(_two_turns(), SGLANG, COST, host)
    t = run.tiers
    assert (t.stored_units, t.write_back_tokens) == (12 + 16 + 17 + 1, 46 * 64)
    assert t.write_back_s == pytest.approx(46 * SEG_S)
    assert t.host_hit_tokens == 1024
    assert _rec(run, "B-t0").ttft_s == pytest.approx(0.02024 + 12 * SEG_S)
    assert _rec(run, "A-t1").ttft_s == pytest.approx(0.0108 + 17 * SEG_S)
    base = next(r for r in run.without_offload.records.records if r.request_id == "A-t1")
    assert base.ttft_s == pytest.approx(0.02104)
    wt = simulate_offload(_two_turns(), SGLANG, COST, HostTier(1000, BPT, 51.2e9, 51.2e9), compare=False)
    assert wt.tiers.write_back_s is None and _rec(wt, "A-t1").ttft_s == pytest.approx(0.0108)


@pytest.mark.parametrize("disk_gb_s, ttft_s", [(7.0, 1024 * BPT / 7e9 + 0.0108), (25.0, 1024 * BPT / 25e9 + 0.0108)])
def test_lmcache_disk_tier_loads_what_host_memory_dropped(disk_gb_s, ttft_s):
    # LMCache's 256-token chunks; the CPU tier holds 4 chunks, the disk 100. A-t0, B, C store 4 chunks each in both:
    # B's evict A's from the CPU tier, C's evict B's; the disk keeps all 12. A-t1's lookup: chunk 0 is not in the CPU
    # tier (0 CPU chunks), then 4 consecutive chunks on disk: 1,024 tokens read from disk before it is scheduled.
    # At the plan's one-NVMe-drive 7 GB/s: 19.17 ms + 10.8 ms = 29.97 ms, slower than recomputing (21.04 ms); at
    # 25 GB/s: 5.37 ms + 10.8 ms = 16.17 ms, faster. The 4 chunks read are written into the CPU tier (evicting C's).
    host = HostTier(4, BPT, 51.2e9, 51.2e9, chunk_tokens=256, disk_capacity_units=100,
                    disk_read_bytes_per_s=disk_gb_s * 1e9)
    run = simulate_offload(_two_turns(), VLLM, COST, host)
    t = run.tiers
    assert (t.hbm_hit_tokens, t.host_hit_tokens, t.disk.hit_tokens) == (0, 0, 1024)
    assert t.disk.load_s == pytest.approx(1024 * BPT / (disk_gb_s * 1e9)) and t.disk.loaded_bytes == 1024 * BPT
    assert (t.stored_units, t.evicted_units, t.disk.stored_units, t.disk.evicted_units) == (16, 12, 12, 0)
    assert _rec(run, "A-t1").ttft_s == pytest.approx(ttft_s)
    base = next(r for r in run.without_offload.records.records if r.request_id == "A-t1")
    assert base.ttft_s == pytest.approx(0.02104)


@pytest.mark.parametrize("disk_gb_s", [7.0, 25.0])
def test_sglang_storage_prefetch_wait_complete(disk_gb_s):
    # HiCache write_through with a host tier of 20 segments and a storage tier of 100 below it; every segment backed
    # up to host is written on to storage. A-t0, B, C back up 16 segments each: B's evict 12 of A's from host, C's the
    # other 4 and 12 of B's; storage keeps all 48. A-t1 arrives with nothing on device or host from its start and
    # 1,104 ≥ 256 tokens beyond that: storage holds its first 16 segments, prefetched into host (evicting 16) in
    # 1,024 × 131,072 B ÷ read rate before it is scheduled (wait_complete), then loaded back beside its 10.8 ms
    # step: TTFT = 19.17 + 10.8 = 29.97 ms at 7 GB/s (recomputing: 21.04 ms), 5.37 + 10.8 = 16.17 ms at 25 GB/s.
    # Its 17th segment is then backed up: host 16 × 3 + 16 + 1 = 65 stored, 12 + 16 + 16 + 1 = 45 evicted;
    # storage 49 stored, none evicted.
    host = HostTier(20, BPT, 51.2e9, 51.2e9, disk_capacity_units=100, disk_read_bytes_per_s=disk_gb_s * 1e9)
    run = simulate_offload(_two_turns(), SGLANG, COST, host)
    t = run.tiers
    fetch_s = 1024 * BPT / (disk_gb_s * 1e9)
    assert (t.hbm_hit_tokens, t.host_hit_tokens, t.disk.hit_tokens) == (0, 0, 1024)
    assert t.disk.load_s == pytest.approx(fetch_s)
    assert (t.stored_units, t.evicted_units, t.disk.stored_units, t.disk.evicted_units) == (65, 45, 49, 0)
    assert _rec(run, "A-t1").ttft_s == pytest.approx(fetch_s + 0.0108)


def test_sglang_storage_hit_under_the_prefetch_threshold_is_revoked():
    # A's first turn is 192 + 16 tokens: 3 segments of 64 backed up to host and on to storage. B and C (16 segments
    # each) push them out of the 1,300-slot device pool and the 20-segment host tier (A 3 + B 16 = 19 ≤ 20; C's 16
    # evict the 15 oldest: A's 3 and 12 of B's); storage keeps all 35. A-t1 (192 + 16 + 512 = 720 prompt tokens)
    # finds nothing on device or host and 720 ≥ 256 tokens beyond that, so it asks storage, which holds only A's
    # first 3 segments: 192 tokens < prefetch_threshold 256, which SGLang 0.5.23 revokes (nothing read). A-t1
    # recomputes its 720 tokens: 10 ms + 720 × 10 µs = 17.2 ms.
    a = Session("A", 0.0, (Turn(192, 16), Turn(512, 16, think_s=10.0)), 0, 0)
    b = Session("B", 1.0, (Turn(1024, 16),), 0, 1)
    c = Session("C", 2.0, (Turn(1024, 16),), 0, 2)
    host = HostTier(20, BPT, 51.2e9, 51.2e9, disk_capacity_units=100, disk_read_bytes_per_s=7e9)
    run = simulate_offload(SessionLoop((a, b, c), 64), SGLANG, COST, host)
    assert (run.tiers.host_hit_tokens, run.tiers.disk.hit_tokens, run.tiers.disk.load_s) == (0, 0, 0.0)
    assert _rec(run, "A-t1").ttft_s == pytest.approx(0.01 + 720e-5)


def test_rules_refused_where_the_engine_has_none():
    with pytest.raises(InputError, match="LMCache's chunks have no such gate"):
        simulate_offload(_two_turns(), VLLM, COST, HostTier(10, 1.0, 1.0, 1.0, chunk_tokens=256, store_threshold=2))
    with pytest.raises(InputError, match="native connector has none"):
        simulate_offload(_two_turns(), VLLM, COST, HostTier(10, 1.0, 1.0, 1.0, disk_capacity_units=5,
                                                            disk_read_bytes_per_s=1.0))
    with pytest.raises(InputError, match="SGLang HiCache has no such gate"):
        simulate_offload(_two_turns(), SGLANG, COST, HostTier(10, 1.0, 1.0, 1.0, store_threshold=2))
    with pytest.raises(InputError, match="store_threshold must be an integer"):
        HostTier(10, 1.0, 1.0, 1.0, store_threshold=-1)


# A-t1 recomputes its 1,104-token prompt in 10 ms + 1,104 × 10 µs = 21.04 ms without a tier (test_tier_rules.py);
# with its 1,024-token prefix read from the remote store at N GB/s it waits 1,024 × 131,072 B ÷ N GB/s, then runs the
# 80 remaining tokens in 10.8 ms. At 50 GB/s (one 400 Gb/s NIC, below the 51.2 GB/s host link): 2.684 + 10.8 =
# 13.48 ms, faster than recomputing; at 12.5 GB/s (100 Gb/s): 10.737 + 10.8 = 21.54 ms, slower.
RECOMPUTE_S = 0.02104


@pytest.mark.parametrize("net_gb_s", [50.0, 12.5])
@pytest.mark.parametrize("disk_units", [8, 0])
def test_lmcache_remote_serves_what_host_and_disk_dropped(net_gb_s, disk_units):
    # 256-token chunks; CPU holds 4, the disk 8 (or none), the remote store 100. A-t0, B, C each store 4 chunks in
    # every level: B's evict A's from the CPU, C's evict B's; on disk C's evict A's (8 held). A-t1's lookup: 0 CPU
    # chunks, 0 disk chunks from chunk 0, then 4 consecutive remote chunks: 1,024 tokens read at the network's rate.
    host = HostTier(4, BPT, 51.2e9, 51.2e9, chunk_tokens=256, disk_capacity_units=disk_units,
                    disk_read_bytes_per_s=7e9 if disk_units else 0.0, remote_capacity_units=100,
                    remote_read_bytes_per_s=net_gb_s * 1e9)
    run = simulate_offload(_two_turns(), VLLM, COST, host)
    t, fetch_s = run.tiers, 1024 * BPT / (net_gb_s * 1e9)
    assert (t.hbm_hit_tokens, t.host_hit_tokens, t.remote.hit_tokens) == (0, 0, 1024)
    assert t.remote.load_s == pytest.approx(fetch_s) and t.remote.loaded_bytes == 1024 * BPT
    assert (t.remote.stored_units, t.remote.evicted_units, t.remote.capacity_units) == (12, 0, 100)
    if disk_units:
        assert (t.disk.hit_tokens, t.disk.stored_units, t.disk.evicted_units) == (0, 12, 4)
    else:
        assert t.disk is None
    assert _rec(run, "A-t1").ttft_s == pytest.approx(fetch_s + 0.0108)
    base = next(r for r in run.without_offload.records.records if r.request_id == "A-t1")
    assert base.ttft_s == pytest.approx(RECOMPUTE_S)
    assert (fetch_s + 0.0108 < RECOMPUTE_S) == (net_gb_s == 50.0)


@pytest.mark.parametrize("net_gb_s", [50.0, 12.5])
def test_sglang_mooncake_storage_is_the_remote_row(net_gb_s):
    # As test_sglang_storage_prefetch_wait_complete with the storage backend a remote store read at the network's
    # rate: A-t1's first 16 segments (1,024 tokens) are prefetched from it before it is scheduled (wait_complete);
    # storage 49 stored, none evicted; host 65 stored, 45 evicted. The figures are the remote row; no disk row.
    host = HostTier(20, BPT, 51.2e9, 51.2e9, remote_capacity_units=100, remote_read_bytes_per_s=net_gb_s * 1e9)
    run = simulate_offload(_two_turns(), SGLANG, COST, host)
    t, fetch_s = run.tiers, 1024 * BPT / (net_gb_s * 1e9)
    assert t.disk is None
    assert (t.hbm_hit_tokens, t.host_hit_tokens, t.remote.hit_tokens) == (0, 0, 1024)
    assert t.remote.load_s == pytest.approx(fetch_s)
    assert (t.stored_units, t.evicted_units, t.remote.stored_units, t.remote.evicted_units) == (65, 45, 49, 0)
    assert _rec(run, "A-t1").ttft_s == pytest.approx(fetch_s + 0.0108)


def test_remote_refused_where_the_engine_has_none():
    with pytest.raises(InputError, match="native connector has none"):
        simulate_offload(_two_turns(), VLLM, COST, HostTier(10, 1.0, 1.0, 1.0, remote_capacity_units=5,
                                                            remote_read_bytes_per_s=1.0))
    with pytest.raises(InputError, match="takes one storage backend"):
        simulate_offload(_two_turns(), SGLANG, COST, HostTier(10, 1.0, 1.0, 1.0, disk_capacity_units=5,
                                                              disk_read_bytes_per_s=1.0, remote_capacity_units=5,
                                                              remote_read_bytes_per_s=1.0))
    with pytest.raises(InputError, match="remote tier needs a read bandwidth"):
        simulate_offload(_two_turns(), VLLM, COST, HostTier(10, 1.0, 1.0, 1.0, chunk_tokens=256,
                                                            remote_capacity_units=5))
