"""kv_usage.py: a stretch given as its changes folds to exactly the totals of the same steps given one by one."""

from __future__ import annotations

import pytest

from kvledger.dynamics.outputs.kv_usage import CHUNK_STEPS, KvUsageTracker
from kvledger.dynamics.outputs.step_runs import run_steps


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


@pytest.mark.parametrize("before", [0, CHUNK_STEPS - 2])
def test_steps_given_per_step_or_with_stored_pieces_equal_the_steps_one_by_one(before):
    # The same five steps as _by_step, given to add_steps as per-step arrays, and with the stored tokens as the pieces
    # (0, 3, 2 requests, 10 tokens) and (3, 5, 1 request, 6 tokens): 10, 12, 14, 6, 7, as listed there.
    import numpy as np

    trackers = [KvUsageTracker(4) for _ in range(3)]
    for t in trackers:
        for j in range(before):
            t.add(j * 1e-4, 1e-4, 1, 10, 2, 4)
    _by_step(trackers[0])
    starts, durs = [1.0, 1.5, 2.0, 2.5, 3.0], [0.5] * 5
    used, held = np.array([3.0, 4, 5, 3, 3]), np.array([12.0, 16, 20, 12, 12])
    trackers[1].add_steps(starts, durs, used, 10, np.array([10.0, 12, 14, 6, 7]), held)
    trackers[2].add_steps(starts, durs, used, 10, None, held, pieces=[(0, 3, 2, 10), (3, 5, 1, 6)])
    sums = [t.summary(4.0) for t in trackers]
    assert sums[0] == sums[1] == sums[2]
    assert [t.stored_token_s for t in trackers] == [trackers[0].stored_token_s] * 3


def _buckets_step_by_step(steps, cap):
    """The usage buckets a step-at-a-time loop keeps: width 0.01 s doubling (pairs merged) whenever a step starts
    past bucket 255; per bucket ∫ usage dt, busy s and max usage, each added left to right."""
    width, b = 0.01, []
    for start, dur, used in steps:
        i = int(start / width)
        while i >= 256:
            b = [[x[0] + y[0], x[1] + y[1], max(x[2], y[2])] for x, y in zip(b[::2], b[1::2] + [[0.0, 0.0, 0.0]])]
            width *= 2
            i = int(start / width)
        while len(b) <= i:
            b.append([0.0, 0.0, 0.0])
        u = used / cap
        b[i][0] += u * dur
        b[i][1] += dur
        b[i][2] = max(b[i][2], u)
    return width, b


def test_buckets_folded_together_equal_a_step_at_a_time_loop():
    # 6,000 steps: the first 3,000 every 3 ms (about 3 steps a bucket, past bucket 255 twice inside one fold, so
    # the fold splits at each merge), then 3,000 bunched 3 per second apart from a few long gaps (uneven buckets).
    import random

    rng = random.Random(3)
    steps, t = [], 0.0
    for j in range(6000):
        dur = rng.uniform(0.001, 0.004)
        steps.append((t, dur, rng.randrange(0, 50)))
        t += 0.003 if j < 3000 else (rng.choice([0.0005, 0.0005, 0.0005, 2.5]))
    tracker = KvUsageTracker(16)
    for start, dur, used in steps:
        tracker.add(start, dur, used, 50, 0, 0)
    width, b = _buckets_step_by_step(steps, 50)
    s = tracker.summary(t)
    assert s["bucket_width_s"] == width
    assert [x["mean"] for x in s["series"]] == [x[0] / x[1] if x[1] else 0.0 for x in b]
    assert [x["max"] for x in s["series"]] == [x[2] for x in b]


def test_steps_far_apart_merge_buckets_as_a_step_at_a_time_loop_does():
    # Two steps near 0 s, then three past 1e17 s (beyond what the simulator accepts, but the tracker must not care):
    # the buckets double from 10 ms to past 1.5e17 / 256 s; the fold must merge as often as a loop would, with no
    # integer overflow of the far steps' bucket numbers at the first width (1e17 s / 10 ms is past 2^63).
    steps = [(0.0, 0.01, 5), (0.02, 0.01, 7), (1e17, 0.01, 4), (1.2e17, 0.01, 2), (1.5e17, 0.01, 3)]
    tracker = KvUsageTracker(16)
    for start, dur, used in steps:
        tracker.add(start, dur, used, 10, 0, 0)
    width, b = _buckets_step_by_step(steps, 10)
    s = tracker.summary(1.5e17 + 0.01)
    assert s["bucket_width_s"] == width and width == 0.01 * 2**56  # 0.01·2^56 = 7.2e14 s: 1.5e17 s is bucket 208
    assert [x["mean"] for x in s["series"]] == [x[0] / x[1] if x[1] else 0.0 for x in b]
    assert [x["max"] for x in s["series"]] == [x[2] for x in b]
