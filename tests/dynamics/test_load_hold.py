"""vLLM's WAITING_FOR_REMOTE_KVS hold (load_hold.py), worked by hand on a 10-block pool of 16-token blocks."""

from __future__ import annotations

import pytest

from kvledger.dynamics.engine.offload import HostTier, OffloadingPagedKVManager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest

B = 16
HOST = HostTier(100, 131072, 51.2e9, 51.2e9)  # 100 blocks; 131,072 B per token read at 51.2 GB/s


def _req(uid: int, tokens: int, segments: tuple[int, ...] = ()) -> SimRequest:
    return SimRequest(uid, RequestSpec(f"r{uid}", 0.0, tokens, 1, segments, B))


def _run(kv, req) -> None:
    """Admit ``req`` with no hit and compute its whole prompt."""
    assert kv.admit(req, [], req.num_tokens, req.num_tokens)
    req.num_computed_tokens = req.num_tokens


LOAD_4_BLOCKS_S = 64 * 131072 / 51.2e9  # 64 tokens × 131,072 B / 51.2e9 B/s = 163.84 µs


def _loaded_and_waiting(running: bool, r_tokens: int = 80, queued: bool = False, loads: bool = True):
    """A (64 tokens, segments 1–4) runs and finishes: its 4 blocks are cached in HBM and stored in the host tier.
    F (160 unique tokens = all 10 usable blocks) evicts them from HBM and finishes. With ``running``, E (16 unique
    tokens, 1 block) then runs. R (80 tokens, segments 1–5) arrives: HBM hit 0, host hit = blocks 0–3 (the lookup
    stops at (80 − 1) // 16 = 4), so 4 blocks are loaded and held for R (``loads``: at its arrival)."""
    kv = OffloadingPagedKVManager(11, B, True, host=HOST)  # 11 blocks, the null block aside: 10 usable
    a, f = _req(1, 64, (1, 2, 3, 4)), _req(2, 160)
    _run(kv, a)
    kv.free(a, False)
    _run(kv, f)
    kv.free(f, False)
    assert kv.match(_req(9, 80, (1, 2, 3, 4, 5)))[1] == 0  # A's prefix left HBM
    e = _req(3, 16)
    if running:
        _run(kv, e)
    r = _req(4, r_tokens, tuple(range(1, r_tokens // B + 1)))
    assert kv.begin_load(r, queued) == (pytest.approx(LOAD_4_BLOCKS_S) if loads else 0.0)
    assert kv.host_hit_tokens == (64 if loads else 0)
    return kv, r, e


def test_loaded_blocks_survive_an_admission_between_load_and_admission():
    kv, r, _ = _loaded_and_waiting(running=True)
    # R's whole prompt is 5 blocks: 4 loaded + 1 at admission ≤ 9 free, none reserved: held
    assert kv.held_for_load_blocks == 4
    # free: 10 − 1 (E) − 4 (held) = 5. D (96 unique tokens) needs 6 blocks: it does not fit. Before the hold the 4
    # loaded blocks sat in the free queue (9 free): D took them, evicting R's last loaded block, and R's hit fell to
    # 48 tokens while 64 counted as loaded: an HBM hit of 48 − 64 = −16 tokens.
    assert kv.num_free_blocks == 5
    d = _req(5, 96)
    assert not kv.admit(d, [], 96, 96)
    assert kv.held_for_load_blocks == 4  # a failed admission (D's) leaves R's hold; R's own would too
    hits, hit_tokens = kv.match(r)
    assert hit_tokens == 64  # the 4 loaded blocks
    # R's admission: 16 new tokens, must fit 80 (5 blocks): 5 − 4 hits + 0 hits in the free queue = 1 ≤ 5 free
    assert kv.admit(r, hits, 16, 80)
    assert kv.held_for_load_blocks == 0 and kv.pool.refs_of(hits) == [1, 1, 1, 1]  # the hold went to R
    assert kv.num_free_blocks == 4  # 10 − E's 1 − R's 5
    # hits at first admission: A 0, F 0, E 0, R 64; loaded 64 (counted once): HBM's own hits 64 − 64 = 0
    assert kv.prefix_stats.hits == 64 and kv.host_hit_tokens == 64
    assert kv.prefix_stats.hits - kv.host_hit_tokens == 0


def test_a_hold_gives_way_when_nothing_runs_and_its_lost_blocks_are_not_counted():
    kv, r, _ = _loaded_and_waiting(running=False)
    assert kv.held_for_load_blocks == 4
    # nothing runs: D (7 blocks, 112 tokens) cannot fit beside the hold (10 − 4 = 6 free), and nothing would ever
    # free a block, so the hold gives way: D takes 7 of the 10 free blocks. The free queue holds F's 6 remaining
    # blocks, then the released ones last-first (block 3, 2, 1, 0 of R's load); D takes F's 6 and R's block 3.
    d = _req(5, 112)
    assert kv.admit(d, [], 112, 112) and kv.holds_given_way == 1 and kv.held_for_load_blocks == 0
    d.num_computed_tokens = 112
    kv.free(d, False)  # D finishes; its blocks are unregistered, so R's blocks 0–2 stay the only cached ones
    hits, hit_tokens = kv.match(r)
    assert hit_tokens == 48  # blocks 0–2 survived, block 3 is gone
    assert kv.admit(r, hits, 32, 80)
    # the evicted block (16 tokens) is recomputed, not served by the host: 64 − 16 = 48 loaded tokens count;
    # HBM's own hits: 48 − 48 = 0
    assert kv.host_hit_tokens == 48 and kv.prefix_stats.hits == 48
    # the 16 lost tokens were still read: they count as loaded, unserved, and the load's 64-token time stays
    assert kv.host_unserved_tokens == 16 and kv.host_load_s == pytest.approx(64 * 131072 / 51.2e9)


def test_a_load_whose_prompt_does_not_fit_waits_until_it_does():
    # vLLM 0.33 (scheduler.py schedule: allocate_slots with full_sequence_must_fit and the in-flight reservations)
    # starts no load that does not fit; the scheduler stops at the request and tries again next step
    kv, r, e = _loaded_and_waiting(running=True, r_tokens=160, loads=False)
    # R: 160 tokens (10 blocks), host hit blocks 0–3 (the lookup runs to (160 − 1) // 16 = 9; segments 5–10 were
    # never stored). Its whole prompt needs 4 loaded + 6 more = 10 blocks > 9 free (E holds 1): nothing is loaded
    assert kv.held_for_load_blocks == 0 and kv.num_free_blocks == 9
    assert kv.start_load(r) is None and kv.host_hit_tokens == 0  # the scheduler reaches it: still 10 > 9, it waits
    e.num_computed_tokens = 16
    kv.free(e, False)  # E finishes: 10 free
    # now 4 + 6 = 10 ≤ 10 free − 0 reserved: the load starts, its 4 blocks held for R
    assert kv.start_load(r) == pytest.approx(LOAD_4_BLOCKS_S)
    assert kv.take_started_loads() == [(r, pytest.approx(LOAD_4_BLOCKS_S))] and kv.take_started_loads() == []
    assert kv.held_for_load_blocks == 4 and kv.host_hit_tokens == 64
    hits, hit_tokens = kv.match(r)
    assert hit_tokens == 64
    # R's admission: 96 new tokens, must fit 160 (10 blocks): 10 − 4 hits + 0 in the free queue = 6 ≤ 6 free
    assert kv.admit(r, hits, 96, 160)
    # every loaded token served: 64 loaded, 64 hit at admission, none unserved (before: 16 of the 64 were evicted
    # by D between an arrival-time load and R's admission, and recomputed)
    assert kv.host_hit_tokens == 64 and kv.prefix_stats.hits == 64 and not getattr(kv, "host_unserved_tokens", 0)


def test_a_load_behind_waiting_requests_starts_when_the_scheduler_reaches_it():
    # requests wait ahead of R on its replica: vLLM loads it when the scheduler reaches it, so at arrival nothing is
    # loaded (9 free: F's 5, then A's 4 still cached in the host tier only)
    kv, r, _ = _loaded_and_waiting(running=True, queued=True, loads=False)
    assert kv.held_for_load_blocks == 0 and kv.num_free_blocks == 9
    # the scheduler reaches R: 4 loaded + 1 more = 5 ≤ 9 free: the load starts and is held
    assert kv.start_load(r) == pytest.approx(LOAD_4_BLOCKS_S)
    assert kv.held_for_load_blocks == 4 and kv.host_hit_tokens == 64
    assert kv.start_load(r) == 0.0  # back at the queue's head after its load: nothing more to load, admit it


def test_least_loaded_counts_requests_whose_load_is_in_flight():
    # a request loading its KV holds GPU blocks: the least-loaded router counts it with the running and waiting ones
    from kvledger.accounting.stepcost import FixedStepCost
    from kvledger.dynamics.engine.config import EngineConfig
    from kvledger.dynamics.engine.router import make_router
    from kvledger.dynamics.replica import Replica

    cfg = EngineConfig(num_gpu_blocks=10, max_model_len=144, block_size=B, max_num_batched_tokens=2048)
    busy, idle = (Replica(cfg, FixedStepCost(0.01, 1e-5), i) for i in range(2))
    busy.hold_load(_req(0, 64), 2.5)  # its load (begun at arrival, 0 s) is ready at 2.5 s
    assert busy.num_outstanding == 1 and busy.loads_in_flight == 1 and busy.has_work
    assert idle.num_outstanding == 0
    assert make_router("least_loaded")([busy, idle], _req(1, 64)) == 1
