"""The vLLM-style KV cache manager: block tables over a BlockPool, chained block hashes for prefix caching, and
reservation variants.

Engine rules it follows (docs/engine-model.md §2.3; vLLM ``v1/core/kv_cache_manager.py``,
``kv_cache_utils.py::hash_block_tokens``):

* Only full blocks get a hash. Block ``i``'s hash depends on block ``i-1``'s hash and the
  block's own tokens, so a hit on block ``i`` needs hits on blocks ``0..i-1``.
* Content identity comes from ``RequestSpec.prefix_segments`` (prefix_keys.py): only
  blocks wholly inside the request's shareable tokens get a shared key; the unique
  remainder and a trailing partial segment are never shared.
* The hit is capped at ``num_tokens − 1`` tokens, because the last token must be
  recomputed to get logits (``KVCacheManager.get_computed_blocks``).
* A request's unique full blocks are also hashed in vLLM. Nobody else can hit them, so
  they are registered only when the request is preempted (then the request itself can
  hit them when it is re-admitted, as in vLLM); until then they just go to the LRU tail
  when freed, as hashed blocks do.
* ``contiguous=True`` is the pre-paging baseline: a request reserves
  ``blocks_for_tokens(max_model_len)`` blocks when admitted (Orca "Max", PagedAttention §3).
"""

from __future__ import annotations

from collections.abc import Callable

from kvledger.dynamics.engine.block_pool import BlockPool
from kvledger.dynamics.engine.kv_interface import PrefixCacheStats, count_admission
from kvledger.dynamics.engine.pool_usage import PoolUsage
from kvledger.dynamics.engine.prefix_keys import own_block_key, shareable_block_keys, vectorize_blocks_for_tokens
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.stretch_alloc import PagedStretches

__all__ = ["PagedKVManager"]

class PagedKVManager(PoolUsage, PagedStretches):
    """Block tables for running requests on one :class:`BlockPool`, with vLLM's prefix caching.

    Args:
        num_gpu_blocks: pool size, blocks (block 0 is the null block).
        block_size: tokens per block, tokens.
        enable_caching: vLLM automatic prefix caching.
        blocks_for_tokens: blocks a request holds with ``n`` computed tokens; None means
            ``ceil(n / block_size)``. A custom one (hybrid / sliding-window plans) disables
            block-level hashing (the caller must pass ``enable_caching=False``).
        contiguous: reserve ``blocks_for_tokens(max_model_len)`` blocks at admission.
        max_model_len: the engine's max_model_len, tokens (used when ``contiguous``).
        step_blocks: vLLM's per-step sliding-window rule (swa_step.py ``StepBlockRule``): a chunk's
            blocks while it is computed and the capped admission check; None → ``blocks_for_tokens``.
    """

    name = "vllm"
    supports_stretches = True
    caches_prefills = False

    def __init__(self, num_gpu_blocks: int, block_size: int, enable_caching: bool,
                 blocks_for_tokens: Callable[[int], int] | None = None, contiguous: bool = False,
                 max_model_len: int = 0, step_blocks=None) -> None:
        self.pool = BlockPool(num_gpu_blocks, enable_caching)
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.custom_bft = blocks_for_tokens is not None
        self.plain_block_table = not self.custom_bft
        B = block_size
        self.bft: Callable[[int], int] = blocks_for_tokens or (lambda n: -(-n // B))
        self._bft_vec = vectorize_blocks_for_tokens(blocks_for_tokens) if blocks_for_tokens else None
        self.contiguous = contiguous
        self.max_model_len = max_model_len
        self.step_blocks = step_blocks
        self.prefix_stats = PrefixCacheStats()
        self._req_blocks = 0  # Σ over running requests of their block-table lengths (shared blocks per holder)
        self._key_memo: dict[int, list[int]] = {}  # earlier requests' block keys (prefix_keys.shareable_block_keys)

    # ------------------------------------------------------------ accounting (capacity, free, used, usage: PoolUsage)
    @property
    def held_slots(self) -> int:
        """KV token slots allocated to running requests (each request's blocks × block_size), tokens."""
        return self._req_blocks * self.block_size

    # ------------------------------------------------------------- hashing
    def _keys(self, req: SimRequest) -> list[int]:
        """Cache keys of the request's shareable full blocks (computed once per request)."""
        if req.keys is None:
            if len(self._key_memo) >= 4096:  # bounded: a session's next turn comes within a few thousand requests
                self._key_memo.clear()
            req.keys = shareable_block_keys(req.spec, self.block_size, with_output=True, memo=self._key_memo)
        return req.keys

    def _key(self, req: SimRequest, i: int) -> int:
        keys = self._keys(req)
        return keys[i] if i < len(keys) else own_block_key(req.uid, i)

    def _keys_range(self, req: SimRequest, start: int, stop: int) -> list[int]:
        """``[_key(req, i) for i in range(start, stop)]``: shared keys, then the request's own."""
        keys = self._keys(req)
        if stop <= len(keys):
            return keys[start:stop]
        return keys[start:] + [own_block_key(req.uid, i) for i in range(max(start, len(keys)), stop)]

    def match(self, req: SimRequest) -> tuple[list[int], int]:
        """(blocks a waiting request can take from the cache, in order; their tokens); does not mutate."""
        if not self.enable_caching:
            return [], 0
        keys = req.keys if req.keys is not None else self._keys(req)
        if not keys and not req.num_preemptions:
            return [], 0
        limit = (req.num_tokens - 1) // self.block_size
        nkeys = len(keys)
        if not req.num_preemptions:
            hits = self.pool.cached_prefix(keys, max(0, min(limit, nkeys)))
            return hits, len(hits) * self.block_size
        get = self.pool.get_cached_block
        hits: list[int] = []
        for i in range(limit):
            if i < nkeys:
                b = get(keys[i])
            elif req.num_preemptions:
                b = get(own_block_key(req.uid, i))
            else:
                break
            if b is None:
                break
            hits.append(b)
        return hits, len(hits) * self.block_size

    def match_tokens(self, req: SimRequest) -> int:
        """Tokens a request would get from the cache now (for longest-prefix-match ordering), tokens."""
        return self.match(req)[1]

    def _register(self, req: SimRequest, upto_tokens: int, shared_only: bool) -> None:
        """Register the request's full blocks up to ``upto_tokens`` (only shareable ones if ``shared_only``)."""
        full = upto_tokens // self.block_size
        if shared_only:
            full = min(full, len(self._keys(req)))
        start = req.num_registered
        if full > start:
            self.pool.register_run(req.blocks[start:full], self._keys_range(req, start, full))
            req.num_registered = full

    # ---------------------------------------------------------- allocation
    def admit(self, req: SimRequest, hits: list[int], num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool:
        """Admit a waiting request: take ``hits`` from the cache and blocks for ``num_new_tokens`` more.

        Check first: the blocks for ``max(must_fit_tokens, reserve_tokens)`` (vLLM
        ``scheduler_reserve_full_isl``: the whole prompt) minus the hits, plus hit blocks
        that now sit in the free queue, must not exceed the free blocks; returns False
        (nothing changed) when they do. Blocks for ``reserve_tokens`` (static batching: the
        whole sequence) or ``max_model_len`` (contiguous) are taken now.
        """
        pool, B = self.pool, self.block_size
        n_hit = len(hits)
        hit_tokens = n_hit * B
        if self.contiguous:
            reserve_tokens = self.max_model_len
        alloc_tokens = hit_tokens + num_new_tokens
        if reserve_tokens > alloc_tokens:
            alloc_tokens = reserve_tokens
        fit_tokens = must_fit_tokens if must_fit_tokens > alloc_tokens else alloc_tokens
        if hits:
            refs = pool.refs_of(hits)
            if self.bft(fit_tokens) - n_hit + refs.count(0) > pool.num_free_blocks:  # ref 0: in the free queue
                return False
            pool.touch(hits, refs)
            req.blocks = hits + pool.allocate(self.bft(alloc_tokens) - n_hit)
        else:
            if self.step_blocks is not None:  # the chunk reaches the prefill end: it may take a checkpoint page
                need = self.step_blocks.held_after(0, alloc_tokens, alloc_tokens >= _prefill_end(req))
                need_fit = max(self.step_blocks.admission(fit_tokens), need)
            elif self.custom_bft:
                need_fit, need = self.bft(fit_tokens), self.bft(alloc_tokens)
            else:
                need_fit, need = -(-fit_tokens // B), -(-alloc_tokens // B)
            if need_fit > pool.num_free_blocks:
                return False
            req.blocks = pool.allocate(need)
        req.num_registered = n_hit
        self._req_blocks += len(req.blocks)
        count_admission(self.prefix_stats, req, hit_tokens)
        if self.enable_caching and req.keys:
            self._register(req, hit_tokens + num_new_tokens, True)
        return True

    def grow(self, req: SimRequest, num_new_tokens: int) -> bool:
        """Blocks for ``num_new_tokens`` more tokens of a running request; False (nothing changed) if they do not
        fit."""
        upto = req.num_computed_tokens + num_new_tokens
        if self.step_blocks is not None:
            need = self.step_blocks.held_after(req.num_computed_tokens, num_new_tokens,
                                               upto >= _prefill_end(req)) - len(req.blocks)
        elif self.custom_bft:
            need = self.bft(upto) - len(req.blocks)
        else:
            need = (upto + self.block_size - 1) // self.block_size - len(req.blocks)
        if need > 0:
            if need > self.pool.num_free_blocks:
                return False
            req.blocks.extend(self.pool.allocate(need))
            self._req_blocks += need
        elif need < 0 and self.custom_bft and not self.contiguous:
            # sliding-window layers dropped blocks that left the window (vLLM remove_skipped_blocks)
            dropped, req.blocks = req.blocks[:-need], req.blocks[-need:]
            self.pool.free(dropped, 0, 0)
            self._req_blocks += need
        if self.enable_caching and req.num_registered < len(req.keys or self._keys(req)):
            self._register(req, upto, True)
        return True

    def after_prefill_step(self, req: SimRequest) -> None:
        """Nothing: vLLM registers a request's full blocks at schedule time (``admit``, ``grow``)."""

    def held_blocks(self, req: SimRequest) -> int:
        """Blocks a running request holds, blocks."""
        return len(req.blocks)

    def free_finished(self, reqs: list[SimRequest]) -> None:
        """``free(r, preempted=False)`` for each of ``reqs`` in order, none holding a registered block, done at once."""
        B, batch, n = self.block_size, [], 0
        for r in reqs:
            if r.num_registered:
                raise RuntimeError(f"request {r.uid} holds registered blocks; free it with free()")
            batch.append((r.blocks, r.num_computed_tokens // B))
            n += len(r.blocks)
            r.blocks = []
        self.pool.free_unregistered(batch)
        self._req_blocks -= n

    def free(self, req: SimRequest, preempted: bool) -> None:
        """Release a finished or preempted request's blocks (vLLM order; see :meth:`BlockPool.free`)."""
        if self.enable_caching:
            num_hashed = req.num_computed_tokens // self.block_size
            # decoded full blocks a later prompt can repeat (a session's next turn) are cached as vLLM caches every
            # full block; registered here, at the latest (a decode stretch registers nothing, and no other request
            # can hit them before this one finishes)
            self._register(req, req.num_computed_tokens, not preempted)
            self.pool.free(req.blocks, req.num_registered, num_hashed)
        else:
            self.pool.free(req.blocks, 0, 0)
        self._req_blocks -= len(req.blocks)
        req.blocks = []
        req.num_registered = 0


def _prefill_end(req: SimRequest) -> int:
    """Where a request's prefill ends, vLLM 0.33's ``max(num_prompt_tokens, num_tokens − 1)`` (a resumed request
    replays its output tokens), tokens."""
    return max(req.num_prompt_tokens, req.num_tokens - 1)
