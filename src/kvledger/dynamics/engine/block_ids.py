"""The block ids a fresh pool's free queue starts with, kept between pools of the same size.

``list(range(1, n))`` makes ``n − 1`` int objects on every call (about 4 ms at 100,000 blocks); copying a kept tuple of
them takes a sixth of that. A configuration search builds one pool per probe, a few per candidate of one size, so the
last two sizes are kept (the ints are immutable: sharing them changes nothing a pool does).
"""

from __future__ import annotations

from functools import lru_cache

__all__ = ["free_queue"]


@lru_cache(maxsize=2)
def _ids(num_gpu_blocks: int) -> tuple[int, ...]:
    return tuple(range(1, num_gpu_blocks))


def free_queue(num_gpu_blocks: int) -> list[int]:
    """A new list ``[1, 2, …, num_gpu_blocks − 1]`` (equal to ``list(range(1, num_gpu_blocks))``)."""
    return list(_ids(num_gpu_blocks))
