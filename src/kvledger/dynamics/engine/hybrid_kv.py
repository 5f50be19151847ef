"""Prefix caching for hybrid full + sliding-window models (vLLM 0.33's hybrid KV cache coordinator): one block table
per KV cache group, hashed per group, on one shared pool.

Source: ``vllm/v1/core/kv_cache_coordinator.py : HybridKVCacheCoordinator.find_longest_cache_hit``,
``single_type_kv_cache_manager.py`` (``FullAttentionManager.find_longest_cache_hit``,
``SlidingWindowManager.find_longest_cache_hit`` / ``remove_skipped_blocks``),
``config/model.py : ModelConfig.is_prefix_caching_supported`` (on for hybrid models). Rules:

* Every group caches its own full blocks (prompt and decoded ones) under the same content key (per group), at
  schedule time.
* A full-attention group hits the longest chain of cached blocks; a sliding-window group needs only
  the last ``cdiv(W − 1, B)`` blocks before the hit point (earlier ones are outside every later
  token's window and are not loaded), so the hit is the longest length ``h`` (in blocks, ≤ the
  full groups' chain, capped at ``num_tokens − 1`` tokens) at which every sliding group holds
  those blocks::

      shared prompt blocks   0 1 2 3 4 5 6 7 | unique
      full group cached      x x x x x x x x          → chain of 8
      sliding (W = 8, B = 4) . . x . . . x x          → blocks 6, 7 cached: hit 8 blocks

* Blocks that leave the window while a request runs are freed with their hash (they stay cached
  in the free queue's LRU order until reused).
* Which sliding blocks get a hash depends on the release (``rule.retention``, swa_retention.py): every full block up
  to vLLM 0.28; from 0.29 only the window's blocks before ``num_prompt_tokens − 1`` and before the shared-prefix
  junction (the full groups' chain where it is longer than the hit), and with ``--prefix-cache-retention-interval I``
  before every multiple of ``I``; the others are freed unhashed (evicted first).

Mamba state groups in ``mamba_cache_mode`` "all" (vLLM 0.19–0.27, models implementing SupportsMambaPrefixCaching:
Jamba, Nemotron-H, granite-4; ``StepBlockRule.state_per_block``) are a group of this kind too: a page per block, the
state after that block's tokens, every full one hashed (``MambaManager.cache_blocks``, the base rule), the pages before
the last computed token's freed with their hash (``get_num_skipped_tokens`` = computed − 1); a hit needs only the
state of its last block (``MambaManager.find_longest_cache_hit``, right to left), and not one hashed in this schedule
(``cached_blocks_this_step``; read in 0.19 and 0.27)::

    B = 4, a 16-token prompt sent twice: the first hashes the states after 4, 8, 12 and 16 tokens; the second's full
    chain is capped at (16 − 1) // 4 = 3 blocks and finds the state after 12 → a 12-token hit (its page the only live
    one of blocks 0–2)

Only layouts whose groups share one block size are handled (gpt-oss, Gemma-2/3, "all"-mode Mamba hybrids); the fast
path's vectorised stretches are not implemented for this manager, so every step runs the general step (exact by
construction, slower).
"""

from __future__ import annotations

from kvledger.dynamics.engine.block_pool import BlockPool
from kvledger.dynamics.engine.kv_interface import PrefixCacheStats, count_admission
from kvledger.dynamics.engine.pool_usage import PoolUsage
from kvledger.dynamics.engine.prefix_keys import shareable_block_keys
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.stretch_alloc import NoStretches
from kvledger.dynamics.engine.swa_retention import reachable_block, segment_blocks
from kvledger.dynamics.engine.swa_step import StepBlockRule

__all__ = ["HybridKVManager", "supports_hybrid_caching"]


def supports_hybrid_caching(rule: StepBlockRule) -> bool:
    """Whether ``HybridKVManager`` models this layout: full and sliding-window groups, or "all"-mode Mamba state groups,
    of one block size."""
    kinds = {k for k, _, _ in rule.groups} - ({"state"} if rule.state_per_block else set())
    return kinds <= {"full", "sliding_window"} and len({b for _, b, _ in rule.groups}) == 1


class HybridKVManager(PoolUsage, NoStretches):
    """Per-group block tables over one :class:`BlockPool` with per-group prefix caching (module doc).

    Args:
        num_gpu_blocks: pool size, blocks (block 0 is the null block).
        rule: the layout's per-step block rule (its groups, L and in-flight tokens).
        enable_caching: prefix caching on.
    """

    name = "vllm-hybrid"
    caches_prefills = False
    plain_block_table = False
    custom_bft = True
    contiguous = False

    def __init__(self, num_gpu_blocks: int, rule: StepBlockRule, enable_caching: bool = True) -> None:
        if not supports_hybrid_caching(rule):
            raise ValueError("HybridKVManager needs attention-only groups of one block size")
        self.pool = BlockPool(num_gpu_blocks, enable_caching)
        self.rule, self.enable_caching = rule, enable_caching
        self.block_size = B = rule.groups[0][1]
        # (kind, window, blocks a hit needs before it): an "all"-mode state group needs its last block's state only
        self.groups = [(kind, W, -(-(W - 1) // B) if kind == "sliding_window" else int(kind == "state"))
                       for kind, _, W in rule.groups]
        self.bft = rule.steady
        self.sparse = rule.retention.prefix_cache_retention_interval is not None  # None: dense (swa_retention.py)
        self.per_segment = segment_blocks(rule.retention, B)  # --prefix-cache-retention-interval's segment, blocks
        self.prefix_stats = PrefixCacheStats()
        self._held = 0  # live blocks held by requests, blocks
        self._this_step: set[int] = set()  # state keys hashed since the step's schedule began

    # ------------------------------------------------------------ accounting (capacity, free, used, usage: PoolUsage)
    @property
    def held_slots(self) -> int:
        return self._held * self.block_size

    # ------------------------------------------------------------ lookup
    def _key(self, key: int, g: int) -> int:
        return hash((key, g))

    def _cached(self, keys: list[int], g: int, i: int) -> int | None:
        return self.pool.get_cached_block(self._key(keys[i], g)) if self.enable_caching else None

    def match(self, req: SimRequest) -> tuple[int, int]:
        """(hit length in blocks, hit tokens) for a waiting request; does not mutate."""
        if not self.enable_caching or not req.spec.prefix_segments:
            return 0, 0
        keys = req.keys if req.keys is not None else self._keys(req)
        h = self._full_chain(req, keys)
        while h > 0 and not all(self._cached(keys, g, i) is not None
                                for g, (k, _, w) in enumerate(self.groups) if k != "full"
                                for i in range(max(0, h - w), h)):
            h -= 1
        return h, h * self.block_size

    def _full_chain(self, req: SimRequest, keys: list[int]) -> int:
        """Blocks the full-attention groups hit (every group, from block 0), capped at ``num_tokens − 1`` tokens."""
        n = min(len(keys), (req.num_tokens - 1) // self.block_size)
        h = 0
        while h < n and all(self._cached(keys, g, h) is not None for g, (k, _, _) in enumerate(self.groups)
                            if k == "full"):
            h += 1
        return h

    def _boundary_ends(self, req: SimRequest, h: int) -> tuple[int, ...]:
        """With a retention interval (0 or more): the blocks ``floor(b / B)`` of the request's boundaries ``b``, its
        replay boundary ``num_prompt_tokens − 1`` and, where the full groups' chain is longer than the hit ``h``, that
        chain's end (vLLM's ``shared_prefix_boundary``); () when every block is kept."""
        if not self.sparse:
            return ()
        ends = [(req.num_prompt_tokens - 1) // self.block_size]
        if (self.rule.retention.junction and self.enable_caching and req.spec.prefix_segments
                and any(k == "full" for k, _, _ in self.groups)):  # 0.23–0.25 keep no junction (swa_retention.py)
            chain = self._full_chain(req, self._keys(req))
            ends += [chain] if chain > h else []
        return tuple(ends)

    def match_tokens(self, req: SimRequest) -> int:
        return self.match(req)[1]

    def _keys(self, req: SimRequest) -> list[int]:
        if req.keys is None:
            req.keys = shareable_block_keys(req.spec, self.block_size, with_output=True)  # decoded blocks too
        return req.keys

    # ------------------------------------------------------------ allocation
    def new_step_starts(self) -> None:
        """A schedule begins: states hashed in the last one may be hit now (vLLM ``MambaManager.new_step_starts``)."""
        self._this_step.clear()

    def _skipped(self, g: int, computed: int) -> int:
        kind, W, _ = self.groups[g]
        if kind == "state":  # Mamba keeps the last computed token's state only (get_num_skipped_tokens)
            return max(0, computed - 1) // self.block_size
        return max(0, computed - W + 1) // self.block_size if kind == "sliding_window" else 0

    def admit(self, req: SimRequest, h: int, num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool:
        """Take the hit blocks and blocks for ``num_new_tokens``; False (nothing changed) if the admission check
        fails."""
        B, pool, keys = self.block_size, self.pool, self._keys(req) if h else []
        states = [g for g, (kind, _, _) in enumerate(self.groups) if kind == "state"]
        if h and any(hash((keys[h - 1], g)) in self._this_step for g in states):
            return False  # a state hashed by another request in this schedule: not before the next (vLLM)
        c = h * B
        upto = c + num_new_tokens
        hits: list[list[int | None]] = []
        kept = evictable = 0
        for g, _group in enumerate(self.groups):
            skip = self._skipped(g, c)
            row = [None] * skip + [self._cached(keys, g, i) for i in range(skip, h)]
            hits.append(row)
            live = [b for b in row if b is not None]
            kept += len(live)
            evictable += pool.num_in_free_queue(live)
        fit = max(must_fit_tokens, upto, reserve_tokens)
        new = len(hits) * (-(-upto // B) - h)  # every group gets blocks h .. cdiv(upto, B) − 1
        counted = kept + len(states) * max(0, h - 1)  # vLLM counts a state hit's null blocks as computed ones too
        free = pool.num_free_blocks
        if self.rule.admission(fit) - counted + evictable > free or new + evictable > free:
            return False
        ends = self._boundary_ends(req, h)  # before any allocation evicts a block of the full groups' chain
        for row in hits:  # every hit leaves the free queue before any allocation can evict it
            pool.touch([b for b in row if b is not None])
        tables = [row + pool.allocate(-(-upto // B) - len(row)) for row in hits]
        firsts = [self._skipped(g, c) for g in range(len(tables))]  # first live index per group
        # the radix cache's field holds this manager's state: per-group tables, first live indices, live count, and
        # the boundary blocks whose sliding tails get hashes under retention 0
        req.node = [tables, firsts, kept + new, ends]
        req.num_registered = h
        self._held += kept + new
        count_admission(self.prefix_stats, req, c)
        self._register(req, upto)
        return True

    def grow(self, req: SimRequest, num_new_tokens: int) -> bool:
        """Free blocks that left the window, then add blocks for ``num_new_tokens``; False (nothing changed) if
        short."""
        B, pool, c = self.block_size, self.pool, req.num_computed_tokens
        tables, firsts = req.node[0], req.node[1]
        upto = c + num_new_tokens
        drop = [range(firsts[g], self._skipped(g, c)) for g in range(len(tables))]
        need = sum(max(0, -(-upto // B) - len(t)) for t in tables)
        freed = pool.num_freed_by_release([tables[g][i] for g, d in enumerate(drop) for i in d])  # shared ones stay
        if need > pool.num_free_blocks + freed:
            return False
        delta = 0
        for g, idx in enumerate(drop):
            for i in idx:
                self._release(req, tables[g][i], i)
                tables[g][i] = None
            if len(idx):
                firsts[g] = idx.stop
                delta -= len(idx)
        for t in tables:
            add = -(-upto // B) - len(t)
            if add > 0:
                t.extend(pool.allocate(add))
                delta += add
        self._held += delta
        req.node[2] += delta
        self._register(req, upto)
        return True

    def _release(self, req: SimRequest, b: int, i: int) -> None:
        """Free one block of a request: a registered one keeps its hash (LRU tail), any other goes to the head."""
        registered = i < req.num_registered and self.pool.key_of(b) is not None  # retention 0 skips some
        self.pool.free([b], 1 if registered else 0, 1 if registered else 0)

    def _register(self, req: SimRequest, upto_tokens: int) -> None:
        if not self.enable_caching or not req.spec.prefix_segments:
            return
        keys, ends = self._keys(req), req.node[3]
        full = min(upto_tokens // self.block_size, len(keys))
        for i in range(req.num_registered, full):
            for g, t in enumerate(req.node[0]):
                b, (kind, _, need) = t[i], self.groups[g]
                if ends and kind == "sliding_window" and not reachable_block(i, ends, need, self.per_segment):
                    continue
                if b is not None and self.pool.key_of(b) is None:
                    self.pool.register(b, key := self._key(keys[i], g))
                    if kind == "state":
                        self._this_step.add(key)
        req.num_registered = max(req.num_registered, full)

    def free(self, req: SimRequest, preempted: bool) -> None:
        """Release a finished or preempted request's blocks, each group last block first (vLLM order)."""
        if req.node is None:
            return
        tables, firsts, held, _ = req.node
        for t, first in zip(tables, firsts):
            for i in range(len(t) - 1, first - 1, -1):
                if t[i] is not None:
                    self._release(req, t[i], i)
        self._held -= held
        req.node, req.num_registered = None, 0

    def held_blocks(self, req: SimRequest) -> int:
        """Blocks a running request holds over all groups, blocks."""
        return req.node[2] if req.node is not None else 0

    def after_prefill_step(self, req: SimRequest) -> None:
        """Nothing: blocks are registered at schedule time (``admit``, ``grow``)."""

