"""Which sliding-window blocks vLLM keeps in its prefix cache, per release (``RETENTION_BY_RELEASE``).

A sliding-window group's hit at ``h`` blocks needs only blocks ``h − cdiv(W − 1, B) .. h − 1`` (hybrid_kv.py), so
vLLM may leave the rest of a sliding group's full blocks unhashed. Releases differ in which it hashes:

* up to 0.28 every full block (0.19 ``v1/core/single_type_kv_cache_manager.py : SingleTypeKVCacheManager.
  cache_blocks``; 0.28 has ``SlidingWindowManager.reachable_block_mask`` but ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``
  unset gives None, dense: one block per segment of ``scheduler_block_size`` = B, fewer than the ``need`` blocks, so
  every block is kept);
* from 0.29 ``--prefix-cache-retention-interval`` defaults to 0 (``config/cache.py``; read in 0.29 and 0.33):
  ``reachable_block_mask`` keeps only the ``need`` = ``cdiv(W − 1, B)`` blocks ending at each reachable boundary,
  ``floor(b / B)`` blocks for ``b`` in: the replay boundary ``num_prompt_tokens − 1`` (``kv_cache_coordinator.py :
  replay_boundaries``, no EAGLE) and, where a full-attention group hit further than the combined hit, the shared-prefix
  junction ``request.shared_prefix_boundary`` = that longest group hit (``KVCacheManager.get_computed_blocks``:
  ``num_new_computed_tokens + num_uncached``; 0 with one group, ``UnitaryKVCacheCoordinator``)::

      W = 128, B = 16 (need 8): 10 prompts of 10,000 tokens sharing their first 8,000 (500 blocks), one after another
      prompt 1   hit 0;  keeps sliding blocks 616–623 (before token 9,999, its own tokens)
      prompt 2   full chain 500 blocks, sliding blocks 492–499 not cached: hit 0; junction 8,000 keeps 492–499
      prompt 3+  hit 500 blocks = 8,000 tokens                    → 64,000 of 100,000 prompt tokens (0.28: 72,000)

``--prefix-cache-retention-interval I`` > 0 (0.29 on, ``with_interval``) keeps besides those tails the ``need`` blocks
before every multiple of ``I`` tokens: block ``i`` where ``i % (I / B) ≥ I / B − need``, every block where
``need ≥ I / B`` (``reachable_block_mask``'s segment tails, read in 0.29 and 0.33; vLLM refuses an ``I`` not a multiple
of B). With it the example's prompt 2 hits 7,936 tokens at ``I`` = 256 (the tail before 7,936 = 31 × 256 is kept).

Before 0.29 the same mask is set only by the environment variable ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` (``envs.py``,
unset: None, dense, the rows above; read in 0.23–0.28, absent in 0.22), which the simulator takes as the flag's value
(``ENV_BY_RELEASE``, ``sliding_retention(version, interval)``). 0.23–0.25 keep the replay boundary's tail only, no
junction (``reachable_block_mask(num_prompt_tokens=…)``); 0.26–0.28 keep both (``reachable_boundaries``, as 0.29).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.vllm_rules import version_tuple

__all__ = ["SlidingRetention", "RETENTION_BY_RELEASE", "ENV_BY_RELEASE", "ENV_FROM", "DENSE", "sliding_retention",
           "reachable_block", "segment_blocks", "with_interval"]


@dataclass(frozen=True)
class SlidingRetention:
    """One release range's rule: from ``since`` on, vLLM's ``prefix_cache_retention_interval`` default (None: dense,
    every full block hashed; 0: only the reachable boundaries' tails), what it keeps and where that was read."""

    since: tuple[int, int, int]
    prefix_cache_retention_interval: int | None
    keeps: str
    source: str
    junction: bool = True  # the shared-prefix junction's tail is kept (False: the replay boundary's only, 0.23–0.25)


#: newest first; a release takes the first row whose ``since`` it reaches
RETENTION_BY_RELEASE: tuple[SlidingRetention, ...] = (
    SlidingRetention((0, 29, 0), 0, "only the window's blocks before the prompt's last block boundary and, where a "
                     "full-attention group hit further, before that junction: the first request to find a shared "
                     "prefix misses it and keeps it for the next (with sliding layers only, a hit needs an earlier "
                     "prompt to have ended there)",
                     "vLLM 0.29 on, prefix_cache_retention_interval 0: v1/core/single_type_kv_cache_manager.py : "
                     "SlidingWindowManager.reachable_block_mask, read in 0.29 and 0.33"),
    SlidingRetention((0, 0, 0), None, "every full block",
                     "vLLM up to 0.28, no retention interval: SingleTypeKVCacheManager.cache_blocks, read in 0.19 "
                     "and 0.28"),
)
DENSE = RETENTION_BY_RELEASE[-1]

ENV_FROM = (0, 23, 0)
"""The first release with ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` (``envs.py``; read in 0.23, not in 0.22's)."""

#: newest first: the rule a release before 0.29 follows with ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL`` set (module doc)
ENV_BY_RELEASE: tuple[SlidingRetention, ...] = (
    SlidingRetention((0, 26, 0), 0, "only the window's blocks before the prompt's last block boundary and the shared "
                     "prefix's junction", "vLLM 0.26–0.28 with VLLM_PREFIX_CACHE_RETENTION_INTERVAL set: "
                     "SlidingWindowManager.reachable_block_mask (reachable_boundaries), read in 0.26, 0.27 and 0.28"),
    SlidingRetention(ENV_FROM, 0, "only the window's blocks before the prompt's last block boundary (no junction: "
                     "a shared prefix is hit only where a segment tail covers it)", "vLLM 0.23–0.25 with "
                     "VLLM_PREFIX_CACHE_RETENTION_INTERVAL set: SlidingWindowManager.reachable_block_mask (replay "
                     "boundary only), read in 0.23, 0.24 and 0.25", junction=False),
)


def sliding_retention(engine_version: str | None, interval: int | None = None) -> SlidingRetention:
    """The row of ``RETENTION_BY_RELEASE`` for a vLLM release; ``DENSE`` where none is named or it does not parse.
    ``interval`` set (not None) before 0.29: the ``ENV_BY_RELEASE`` row that ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``
    selects (``with_interval`` then adds a positive interval's segment tails; 0: the boundaries' tails only, as
    ``reachable_block_mask`` takes 0 in 0.23–0.29 alike)."""
    ver = version_tuple(engine_version) if engine_version else None
    row = next((r for r in RETENTION_BY_RELEASE if ver is not None and ver >= r.since), DENSE)
    if interval is not None and row is DENSE and ver is not None:
        row = next((r for r in ENV_BY_RELEASE if ver >= r.since), row)
    return row


def with_interval(row: SlidingRetention, interval: int) -> SlidingRetention:
    """``row`` (a release's, 0.29 on) run with ``--prefix-cache-retention-interval interval`` > 0 (module doc)."""
    return SlidingRetention(row.since, interval, f"the window's blocks before every multiple of {interval:,} tokens "
                            "(--prefix-cache-retention-interval), besides " + row.keeps.removeprefix("only "),
                            row.source.replace("prefix_cache_retention_interval 0", "the interval's segment tails"),
                            row.junction)


def segment_blocks(retention: SlidingRetention, block_size: int) -> int:
    """Blocks per ``--prefix-cache-retention-interval`` segment, ``I / B``; 0 without a positive interval."""
    return (retention.prefix_cache_retention_interval or 0) // block_size


def reachable_block(i: int, ends: tuple[int, ...], need: int, per_segment: int = 0) -> bool:
    """Whether sliding block ``i`` is one a hit can use under a retention interval: within the ``need`` blocks before
    one of the request's boundary blocks ``ends`` (``floor(b / B)`` each) or, with ``per_segment`` = I / B > 0 blocks,
    before a multiple of I (every block where ``need ≥ per_segment``)."""
    if per_segment and (need >= per_segment or i % per_segment >= per_segment - need):
        return True
    return any(e - need <= i < e for e in ends)
