"""PyTorch's caching-allocator segments (c10/cuda/CUDACachingAllocator.cpp, default config), worked by hand."""

from __future__ import annotations

from kvledger.accounting.cuda_segments import allocation_size, round_size, segment_bytes

MiB = 1 << 20


def test_round_size_is_512_byte_steps():
    # round_size: at least 512 B, else up to the next multiple of 512
    assert round_size(1) == 512
    assert round_size(3584) == 3584  # 7 × 512: a fused q/k/v bias of QwQ-32B at TP 4 (1,792 × 2 B)
    assert round_size(10_241) == 10_752


def test_allocation_size_by_pool():
    # ≤ 1 MiB: a 2 MiB small segment; 1–10 MiB: a 20 MiB large segment; ≥ 10 MiB: rounded up to 2 MiB
    assert allocation_size(MiB) == 2 * MiB
    assert allocation_size(MiB + 512) == 20 * MiB
    assert allocation_size(10 * MiB) == 10 * MiB
    assert allocation_size(int(12.5 * MiB)) == 14 * MiB


def test_big_tensors_hold_their_2_mib_tails():
    # QwQ-32B at TP 4, one layer: q/k/v 17.5 MiB → 18, o_proj 12.5 → 14 (its 1.5 MiB tail is split off but nothing
    # of 1–1.5 MiB comes later), gate/up 135 → 136, down 67.5 → 68: 236 MiB of segments for 232.5 MiB of tensors
    layer = [int(17.5 * MiB), int(12.5 * MiB), 135 * MiB, int(67.5 * MiB)]
    assert segment_bytes(layer) == 236 * MiB
    assert segment_bytes(layer * 2) == 472 * MiB


def test_mid_sized_tensors_share_a_20_mib_segment():
    # 9 MiB takes a new 20 MiB segment, its 11 MiB tail (> 1 MiB) is split off and serves the 8 MiB that follows;
    # the 3 MiB left cannot serve the next 9 MiB, which opens a second segment (Qwen3-235B-A22B-FP8 q/k/v and o_proj
    # at TP 4)
    assert segment_bytes([9 * MiB, 8 * MiB]) == 20 * MiB
    assert segment_bytes([9 * MiB, 8 * MiB, 9 * MiB]) == 40 * MiB


def test_small_pool_packs_into_2_mib():
    # two 1 MiB tensors: the first opens a 2 MiB small segment, its 1 MiB tail (≥ 512 B) serves the second;
    # a third opens another segment; zero-byte tensors take nothing
    assert segment_bytes([MiB, MiB]) == 2 * MiB
    assert segment_bytes([MiB, MiB, MiB, 0]) == 4 * MiB
    # a large-pool tail of ≤ 1 MiB is not split (17.5 MiB in an 18 MiB segment keeps its 0.5 MiB inside the block),
    # and the pools never lend to each other: a 0.5 MiB tensor still opens a 2 MiB small segment
    assert segment_bytes([int(17.5 * MiB), MiB // 2]) == 20 * MiB
