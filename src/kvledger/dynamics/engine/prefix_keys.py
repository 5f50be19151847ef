"""Content identity of KV blocks for prefix caching: chained keys from a request's shared prompt segments.

vLLM hashes block ``i`` from the hash of block ``i−1`` and the block's own token ids
(``kv_cache_utils.py::hash_block_tokens``), so equal keys mean equal token prefixes. The
simulator has no token ids, only ``RequestSpec.prefix_segments``: segment ``j`` stands for
``segment_tokens`` tokens of text that every request listing the same first ``j+1`` ids
shares. Tokens ``[0, (i+1)·B)`` are therefore fixed by the segments they touch, and block
``i``'s key is ``hash((chain_key(segments[0..j]), i))`` with ``j`` the last segment the
block touches and ``chain_key`` the chained hash of the segment ids. A block that reaches
past the request's shareable tokens (``RequestSpec.num_shareable_tokens``: whole listed
segments inside the prompt) gets no shared key.

Keys are Python ``hash`` values of int tuples: deterministic across runs (ints and tuples of
ints are not salted), 64-bit, no sha256 needed (no adversary in a simulation; a collision
between two of a run's ~10⁶ keys has probability ~10⁻⁷).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec

__all__ = ["shareable_block_keys", "own_block_key", "vectorize_blocks_for_tokens"]

_SEED = hash(("kvledger-prefix-seed", 0))
_OWN = -1  # marks the key of a request's own (unique) block
_LAST_SEGMENT: dict[tuple[int, int], list[int]] = {}  # (block tokens, segment tokens) -> _last_segment's list


def shareable_block_keys(spec: RequestSpec, block_size: int, with_output: bool = False,
                         memo: dict[int, list[int]] | None = None) -> list[int]:
    """Keys of the request's shareable full blocks, in order (empty without shared segments); ``with_output``: also
    the blocks of its output that ``RequestSpec.stream_segments`` covers (vLLM hashes decoded full blocks too).

    ``memo`` (one run's; the caller bounds it): earlier key lists by the chain key of their last block's segment. A
    request whose chain passes through one reuses that list's keys, the same int objects: equal values either way,
    but a dict finds an identical key without comparing two ints (a session's next turn repeats its last one's)."""
    B, S = block_size, spec.segment_tokens
    segs = spec.stream_segments if with_output and spec.output_segments else spec.prefix_segments
    nblk = (spec.num_shareable_tokens if segs is spec.prefix_segments else len(segs) * S) // B if segs else 0
    if nblk == 0:
        return []
    chain, prev = [], hash((_SEED, S))
    for seg in segs[: ((nblk * B - 1) // S) + 1]:
        prev = hash((prev, seg))
        chain.append(prev)
    last = _last_segment(B, S, nblk)
    if memo is None:  # block i's key: hash((chain[last segment it touches], i)), mapped at C level
        return list(map(hash, zip(map(chain.__getitem__, last), range(nblk))))
    old = next(filter(None, map(memo.get, reversed(chain))), None)
    r = min(len(old), nblk) if old is not None else 0
    keys = old[:r] if r else []
    keys += map(hash, zip(map(chain.__getitem__, last[r:]), range(r, nblk)))
    memo[chain[last[-1]]] = keys
    return keys


def _last_segment(block_size: int, segment_tokens: int, nblk: int) -> list[int]:
    """``[((i + 1)·B − 1) // S for i in range(nblk)]``: the last segment each block touches (cached per B, S)."""
    got = _LAST_SEGMENT.get((block_size, segment_tokens))
    if got is None or len(got) < nblk:
        got = _LAST_SEGMENT[(block_size, segment_tokens)] = [
            ((i + 1) * block_size - 1) // segment_tokens for i in range(max(nblk, 4096))]
    return got[:nblk]


def own_block_key(uid: int, i: int) -> int:
    """Key of block ``i`` of request ``uid``'s own content (only that request can hit it, after a preemption)."""
    return hash((_OWN, uid, i))


def vectorize_blocks_for_tokens(fn: Callable) -> Callable[[np.ndarray], np.ndarray]:
    """Wrap ``blocks_for_tokens`` so it maps an int64 array elementwise (numpy broadcasting when ``fn`` supports it)."""
    probe = np.array([[1, 17], [4096, 100000]], dtype=np.int64)
    try:
        out = np.asarray(fn(probe))
        if out.shape == probe.shape and all(
            int(out[i, j]) == int(fn(int(probe[i, j]))) for i in range(2) for j in range(2)
        ):
            return lambda a: np.asarray(fn(a), dtype=np.int64)
    except Exception:  # noqa: BLE001 - a scalar-only callable: elementwise calls instead
        pass
    return np.vectorize(lambda n: int(fn(int(n))), otypes=[np.int64])
