"""kv_stretch.py: the per-step (used blocks, held slots) a stretch's changes stand for, synchronous and async (``lag``
1)."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.fast.kv_stretch import per_step_samples


def _two_requests(kv: PagedKVManager) -> list[SimRequest]:
    a = SimRequest(0, RequestSpec("a", 0.0, 4, 3))
    b = SimRequest(1, RequestSpec("b", 0.0, 6, 8))
    assert kv.admit(a, [], 4, 4) and kv.admit(b, [], 6, 6)
    return [a, b]


@pytest.mark.parametrize("lag", [0, 1])
def test_a_finisher_leaves_the_samples_from_the_step_after_its_last_whatever_the_lag(lag):
    # Block size 4. a: 4 computed tokens in 1 block, decodes in steps 0 and 1 (rems 2) and finishes after step 1;
    # b: 6 computed in 2 blocks, decodes in steps 0..4 (computed 7..11; rems 6: still running after), needing a 3rd
    # block in step 2 (9 tokens).
    # Step 0 gives a its 2nd block (5 tokens). Samples after each step's allocations: 2 + 2, 2 + 2, then a is gone
    # and b holds 3: [4, 4, 3, 3, 3] blocks, ×4 slots. Synchronously a is freed after step 1; with lag 1 (async)
    # after step 2's allocations, but the general step samples step 2 after that free (Replica.drain), so the
    # samples are the same; only the pool's order differs (step 2's block is taken while a still holds its 2).
    kv = PagedKVManager(num_gpu_blocks=20, block_size=4, enable_caching=False)
    running = _two_requests(kv)
    used0 = kv.num_used_blocks
    assert len(running[0].blocks) == 1 and len(running[1].blocks) == 2  # used0 counts these 3
    used, held = per_step_samples(kv.stretch_commit(running, [4, 6], [2, 6], 5, lag=lag), 5, 4)
    assert (np.asarray(used) - used0 + 3).tolist() == [4, 4, 3, 3, 3]
    assert np.asarray(held).tolist() == [16, 16, 12, 12, 12]
    assert running[0].blocks == [] and len(running[1].blocks) == 3
    assert kv.num_used_blocks - used0 == 0  # a's 2 freed, b's 1 new


def test_async_free_that_falls_past_the_stretch_is_left_to_the_caller():
    # Same requests, k = 2: a finishes after step 1, its async free would follow step 2's allocations (past the
    # stretch), so it keeps its 2 blocks; the samples are [4, 4] either way.
    kv = PagedKVManager(num_gpu_blocks=20, block_size=4, enable_caching=False)
    running = _two_requests(kv)
    used0 = kv.num_used_blocks
    used, held = per_step_samples(kv.stretch_commit(running, [4, 6], [2, 6], 2, lag=1), 2, 4)
    assert (np.asarray(used) - used0 + 3).tolist() == [4, 4] and np.asarray(held).tolist() == [16, 16]
    assert len(running[0].blocks) == 2


@pytest.mark.parametrize("lag", [0, 1])
def test_blocks_handed_out_request_by_request_give_the_samples_of_step_order(lag):
    # With a block registered in the cache the stretch hands blocks out in step, then running order (vLLM's pop
    # order); with none registered, request by request (blocks are interchangeable). Same requests as above: the
    # per-step samples, the blocks each request ends with and the pool's count must agree.
    out = []
    for register in (True, False):
        kv = PagedKVManager(num_gpu_blocks=20, block_size=4, enable_caching=True)
        if register:
            kv.pool.register(kv.pool.allocate(1)[0], 12345)  # a cached block held elsewhere: the step-order path
        running = _two_requests(kv)
        used, held = per_step_samples(kv.stretch_commit(running, [4, 6], [2, 6], 5, lag=lag), 5, 4)
        out.append(((np.asarray(used) - kv.num_used_blocks).tolist(), np.asarray(held).tolist(),
                    [len(r.blocks) for r in running]))
    assert out[0] == out[1]
    assert out[1][1] == [16, 16, 12, 12, 12] and out[1][2] == [0, 3]
