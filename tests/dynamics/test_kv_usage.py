"""kv_usage.py: a stretch given as its changes folds to exactly the totals of the same steps given one by one."""

from __future__ import annotations

import pytest

from kvledger.dynamics.kv_usage import CHUNK_STEPS, KvUsageTracker, run_steps


def test_allocation_runs_expand_to_one_block_every_block_size_steps():
    # Two runs with block size 16: from step 3, 2 blocks (steps 3, 19); from step 0 of a stretch starting at
    # buffered step 100, 3 blocks (100, 116, 132).
    assert run_steps([3, 2, 0, 3], 16, [0, 100]).tolist() == [3, 19, 100, 116, 132]
    assert run_steps([], 16).tolist() == []


def _by_step(tracker: KvUsageTracker) -> None:
    # The stretch below, one step at a time. Block size 4, 10 usable blocks. Before it: 3 used blocks, 12 held slots.
    # Steps 0..4 start at 1.0, 1.5, 2.0, 2.5, 3.0 s and last 0.5 s. Allocations: one block in step 1 (run from
    # step 1, 1 block) and one in step 2 (single). A request holding 2 blocks finishes in step 2 and is freed from
    # step 3 on. Stored tokens: 10 + 2·j in steps 0..2 (2 requests), then 6 + 1·(j − 3) (1 request).
    used = [3, 4, 5, 3, 3]
    held = [12, 16, 20, 12, 12]
    stored = [10, 12, 14, 6, 7]
    for j in range(5):
        tracker.add(1.0 + 0.5 * j, 0.5, used[j], 10, stored[j], held[j])


def _as_changes(tracker: KvUsageTracker) -> None:
    tracker.add_stretch([1.0, 1.5, 2.0, 2.5, 3.0], [0.5] * 5, 10, 3, 12, [2], [(3, 2, 2)], [1, 1],
                        [(0, 3, 2, 10), (3, 9, 1, 6)])


@pytest.mark.parametrize("before", [0, CHUNK_STEPS - 2])  # the second case folds the buffer in the middle
def test_a_stretch_as_changes_equals_its_steps_one_by_one(before):
    a, b = KvUsageTracker(4), KvUsageTracker(4)
    for t in (a, b):
        for j in range(before):  # earlier steps: 1 used block, 4 held slots, 2 stored tokens, 1e-4 s each
            t.add(j * 1e-4, 1e-4, 1, 10, 2, 4)
    _by_step(a)
    _as_changes(b)
    sa, sb = a.summary(4.0), b.summary(4.0)
    assert sa == sb
    if before == 0:
        # ∫ usage dt = 0.5 s × (3 + 4 + 5 + 3 + 3) / 10 = 0.9; token-state share = Σ stored / Σ held = 49 / 72.
        assert sa["mean"] == pytest.approx(0.9 / 4.0) and sa["max"] == 0.5
        assert sa["token_state_share"] == pytest.approx(49 / 72)
