"""PyTorch's CUDA caching allocator as it carves device segments for tensors that stay allocated: the bytes a
sequence of allocations holds on the device, rounding and unusable block tails included.

Rules from ``c10/cuda/CUDACachingAllocator.cpp`` (torch 2.5; the constants sit in ``c10/core/AllocatorConfig.h``
from torch 2.7, same values), default configuration (no ``expandable_segments``, no ``max_split_size_mb``, no
power-of-two rounding):

  * every request is rounded up to 512 B (``round_size``); requests of at most 1 MiB go to the small pool, larger
    ones to the large pool (``get_pool``);
  * a request is served by the smallest cached free block of its pool that fits (``get_free_block``, best fit);
    otherwise a new segment is taken from the driver: 2 MiB for the small pool, 20 MiB for requests under 10 MiB, else
    the request rounded up to 2 MiB (``get_allocation_size``);
  * the block is split and its tail kept free when the tail is at least 512 B (small pool) or more than 1 MiB
    (large pool) (``should_split``); a shorter tail stays part of the allocated block.

A segment with any live block cannot be released (``torch.cuda.empty_cache`` frees only whole free segments), so
the tails of parameter segments stay held: ``torch.cuda.mem_get_info`` (what SGLang's "mem usage" is made of) sees
the segments, not the tensors.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable

__all__ = ["allocation_size", "round_size", "segment_bytes"]

_MIN_BLOCK = 512
_SMALL_SIZE = 1 << 20
_SMALL_BUFFER = 2 << 20
_LARGE_BUFFER = 20 << 20
_MIN_LARGE_ALLOC = 10 << 20
_ROUND_LARGE = 2 << 20


def round_size(n: int) -> int:
    """A request of ``n`` B rounded as the allocator books it (``round_size``), B."""
    return max(_MIN_BLOCK, -(-n // _MIN_BLOCK) * _MIN_BLOCK)


def allocation_size(rounded: int) -> int:
    """The segment the allocator takes from the driver for a rounded request with no cached block to serve it
    (``get_allocation_size``), B."""
    if rounded <= _SMALL_SIZE:
        return _SMALL_BUFFER
    if rounded < _MIN_LARGE_ALLOC:
        return _LARGE_BUFFER
    return -(-rounded // _ROUND_LARGE) * _ROUND_LARGE


def segment_bytes(sizes: Iterable[int]) -> int:
    """Device bytes of the segments that allocations of ``sizes`` B, made in this order and none freed, hold, B.
    Zero-byte tensors take no block."""
    free: dict[bool, list[int]] = {True: [], False: []}  # small pool?, free block sizes kept sorted
    total = 0
    for n in sizes:
        if n <= 0:
            continue
        r = round_size(int(n))
        small = r <= _SMALL_SIZE
        pool = free[small]
        i = bisect_left(pool, r)
        if i < len(pool):
            block = pool.pop(i)
        else:
            block = allocation_size(r)
            total += block
        tail = block - r
        if (tail >= _MIN_BLOCK) if small else (tail > _SMALL_SIZE):
            insort(pool, tail)
    return total
