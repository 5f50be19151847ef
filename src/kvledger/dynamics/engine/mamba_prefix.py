"""Prefix caching for hybrid full-attention + Mamba (linear-attention) models in vLLM's "align" mode: Qwen3-Next,
Nemotron-H, Jamba, granite-4 from the release that lays them out in align mode.

Source (vLLM 0.33; per-release rules in ``accounting/mamba_prefix_rules.py``): ``v1/core/kv_cache_coordinator.py :
HybridKVCacheCoordinator.find_longest_cache_hit``, ``single_type_kv_cache_manager.py : MambaManager``
(``find_longest_cache_hit``, ``cache_blocks`` / ``reachable_block_mask``, ``remove_skipped_blocks``),
``kv_cache_manager.py : KVCacheManager.get_computed_blocks`` (the junction). One block size for every group, so the
hash block is the block (gcd of the sizes). Rules:

* Full-attention groups hold a block per ``B`` tokens and register their shared full blocks at schedule time, as
  ``HybridKVManager`` does.
* A state group holds real pages, as ``StepBlockRule.held_after`` counts them: the page of the state at the request's
  computed tokens (index ``(t − 1) // B``); a step that crosses a block boundary adds a page and keeps the one it reads
  until the next step; the chunk that can export a prefill checkpoint (0.33) holds that page for the step too.
* The page of a chunk ending on a block boundary ``t`` holds the state after ``t`` tokens: it is registered under
  block ``t // B − 1``'s key where the release keeps that state (every chunk end, or only the prompt's last boundary
  ``(P − 1) // B × B``, the junction and, with ``--prefix-cache-retention-interval I``, every multiple of ``I``, where
  every chunk that can export a checkpoint takes its page); a freed registered page stays cached in the free queue.
* A hit: full attention's chain of cached blocks (capped at ``num_tokens − 1`` tokens), walked back to the last block
  whose state every state group has cached. Where the chain is longer, its end is the request's junction
  (``shared_prefix_boundary``), where its prefill chunks stop (``StepBlockRule.aligned_chunk``)::

      20 prompts of 32,000 tokens sharing 30,000, B = 576 (52 shared blocks = 29,952 tokens), vLLM 0.33:
        request 1   chunks end 8,064 16,128 24,192 32,000; state kept at 31,680 only (its own)
        request 2   chain 52 blocks, no state cached in it: hit 0, junction 29,952 → a chunk ends there, kept
        requests 3+ hit 29,952 tokens

A request whose hit ends on a state registered in the same schedule is not admitted in it (``MambaManager.
get_num_blocks_to_allocate``: ``cached_blocks_this_step``; the admission loop stops there). Not modelled: unique blocks
are not registered (only the request itself could hit them, after a preemption). The fast path's vectorised stretches
are not implemented here, so every step runs the general step (exact, slower).
"""

from __future__ import annotations

from kvledger.dynamics.engine.block_pool import BlockPool
from kvledger.dynamics.engine.kv_interface import PrefixCacheStats, count_admission
from kvledger.dynamics.engine.pool_usage import PoolUsage
from kvledger.dynamics.engine.prefix_keys import shareable_block_keys
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.stretch_alloc import NoStretches
from kvledger.dynamics.engine.swa_step import StepBlockRule

__all__ = ["MambaPrefixKVManager", "supports_mamba_caching"]


def supports_mamba_caching(rule: StepBlockRule) -> bool:
    """Whether ``MambaPrefixKVManager`` models this layout: full and align-mode state groups of one block size, with
    the release's rule known."""
    kinds = {k for k, _, _ in rule.groups}
    return ("state" in kinds and kinds <= {"full", "state"} and len({b for _, b, _ in rule.groups}) == 1
            and rule.state_boundary_page and rule.state_prefix is not None)


class MambaPrefixKVManager(PoolUsage, NoStretches):
    """Full-attention block tables and Mamba state pages over one :class:`BlockPool`, with align-mode prefix caching
    (module doc).

    Args:
        num_gpu_blocks: pool size, blocks (block 0 is the null block).
        rule: the layout's per-step block rule (its groups, the release's ``state_prefix`` rule).
        enable_caching: prefix caching on.
    """

    name = "vllm-hybrid-mamba"
    caches_prefills = False
    plain_block_table = False
    custom_bft = True
    contiguous = False

    def __init__(self, num_gpu_blocks: int, rule: StepBlockRule, enable_caching: bool = True) -> None:
        if not supports_mamba_caching(rule):
            raise ValueError("MambaPrefixKVManager needs full and align-mode state groups of one block size")
        self.pool = BlockPool(num_gpu_blocks, enable_caching)
        self.rule, self.enable_caching, self.prefix_rule = rule, enable_caching, rule.state_prefix
        self.block_size = rule.groups[0][1]
        self.full = [g for g, (k, _, _) in enumerate(rule.groups) if k == "full"]
        self.state = [g for g, (k, _, _) in enumerate(rule.groups) if k == "state"]
        self.bft = rule.steady
        self.prefix_stats = PrefixCacheStats()
        self._held = 0  # live blocks and pages held by requests
        self._this_step: set[int] = set()  # state keys registered since the step's schedule began

    @property
    def held_slots(self) -> int:
        return self._held * self.block_size

    # ------------------------------------------------------------ lookup
    def _cached(self, keys: list[int], g: int, i: int) -> int | None:
        return self.pool.get_cached_block(hash((keys[i], g))) if self.enable_caching else None

    def _keys(self, req: SimRequest) -> list[int]:
        if req.keys is None:  # a session's next turn repeats this one's output: its blocks are keyed too, as in vLLM
            req.keys = shareable_block_keys(req.spec, self.block_size, with_output=True)
        return req.keys

    def match(self, req: SimRequest) -> tuple[int, int]:
        """(hit length in blocks, hit tokens) for a waiting request; sets its junction (``shared_prefix_boundary``),
        as vLLM's ``get_computed_blocks`` does, and nothing else."""
        req.shared_prefix_boundary = 0
        if not self.enable_caching or not req.spec.prefix_segments:
            return 0, 0
        keys = self._keys(req)
        n = min(len(keys), (req.num_tokens - 1) // self.block_size)
        chain = 0
        while chain < n and all(self._cached(keys, g, chain) is not None for g in self.full):
            chain += 1
        h = chain
        while h > 0 and not all(self._cached(keys, g, h - 1) is not None for g in self.state):
            h -= 1
        if self.full and h < chain and self.prefix_rule.junction_stop != "none":
            req.shared_prefix_boundary = chain * self.block_size
        return h, h * self.block_size

    def match_tokens(self, req: SimRequest) -> int:
        return self.match(req)[1]

    def new_step_starts(self) -> None:
        """A schedule begins: states registered in the last one may be hit now (vLLM ``new_step_starts``)."""
        self._this_step.clear()

    # ------------------------------------------------------------ allocation
    def _state_pages(self, computed: int, new: int, at_end: bool) -> tuple[bool, int]:
        """(the step crosses a block boundary, its checkpoint pages) per state group (``StepBlockRule.state_pages``)."""
        B, t = self.block_size, computed + new
        crosses = computed > 0 and (computed - 1) // B != (t - 1) // B
        return crosses, self.rule.state_pages(computed, new, B, at_end) - 1 - crosses

    def admit(self, req: SimRequest, h: int, num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool:
        """Take the hit blocks (and each state group's page at the hit) and blocks for ``num_new_tokens``; False
        (nothing changed) if the admission check fails."""
        B, pool = self.block_size, self.pool
        keys = self._keys(req) if h else []
        if h and any(hash((keys[h - 1], g)) in self._this_step for g in self.state):
            return False  # a state registered by another request in this schedule: not before the next (vLLM)
        c = h * B
        upto = c + num_new_tokens
        rows = [[self._cached(keys, g, i) for i in range(h)] for g in self.full]
        reads = [self._cached(keys, g, h - 1) for g in self.state] if h else []
        live = [b for row in rows for b in row] + reads
        kept, evictable = len(live), pool.num_in_free_queue(live)
        _, ck = self._state_pages(c, num_new_tokens, upto >= _prefill_end(req))
        new = len(rows) * (-(-upto // B) - h) + len(self.state) * (1 + ck)
        fit = max(must_fit_tokens, upto, reserve_tokens)
        if self.rule.admission(fit) - kept + evictable > pool.num_free_blocks or new + evictable > pool.num_free_blocks:
            return False
        pool.touch(live)  # every hit leaves the free queue before any allocation can evict it
        tables = [row + pool.allocate(-(-upto // B) - h) for row in rows]
        cur = pool.allocate(len(self.state))
        # the radix cache's field holds this manager's state: full tables, state pages, pages to free next step, count
        req.node = [tables, cur, [[p] for p in reads] if h else [[] for _ in cur], kept + new]
        req.num_registered = h
        self._held += kept + new
        count_admission(self.prefix_stats, req, c)
        self._checkpoint(req, c, num_new_tokens, ck)
        self._register(req, upto)
        if self.prefix_rule.junction_stop == "first_chunk":  # 0.24–0.25: only the admitted chunk is cut
            req.shared_prefix_boundary = 0
        return True

    def grow(self, req: SimRequest, num_new_tokens: int) -> bool:
        """Free last step's extra state pages, then add blocks and pages for ``num_new_tokens``; False (nothing
        changed) if short."""
        B, pool, c = self.block_size, self.pool, req.num_computed_tokens
        tables, cur, extra = req.node[0], req.node[1], req.node[2]
        upto = c + num_new_tokens
        crosses, ck = self._state_pages(c, num_new_tokens, upto >= _prefill_end(req))
        need = sum(max(0, -(-upto // B) - len(t)) for t in tables) + len(cur) * (int(crosses) + ck)
        freed = pool.num_freed_by_release([p for pages in extra for p in pages])
        if need > pool.num_free_blocks + freed:
            return False
        delta = 0
        for pages in extra:
            for p in pages:
                self._release(p)
            delta -= len(pages)
            pages.clear()
        for t in tables:
            if (add := -(-upto // B) - len(t)) > 0:
                t.extend(pool.allocate(add))
                delta += add
        if crosses:
            for j, p in enumerate(pool.allocate(len(cur))):
                extra[j].append(cur[j])  # the page it reads, kept for this step
                cur[j] = p
            delta += len(cur)
        self._checkpoint(req, c, num_new_tokens, ck)
        delta += ck * len(cur)
        self._held += delta
        req.node[3] += delta
        self._register(req, upto)
        return True

    def _checkpoint(self, req: SimRequest, computed: int, new: int, ck: int) -> None:
        """The chunk exports the state at its last block boundary into ``ck`` more pages per state group (held for
        this step; registered where the release keeps that state); the caller counts them."""
        if not ck:
            return
        position = (computed + new - 1) // self.block_size * self.block_size
        for j, g in enumerate(self.state):
            pages = self.pool.allocate(ck)
            req.node[2][j].extend(pages)
            self._register_state(req, pages[0], g, position)

    def _release(self, b: int) -> None:
        """Free one block: a registered one keeps its key (LRU tail), any other goes to the head."""
        registered = self.pool.key_of(b) is not None
        self.pool.free([b], int(registered), int(registered))

    def _keeps_state(self, req: SimRequest, position: int) -> bool:
        """Whether the release keeps the state after ``position`` tokens (module doc), a block multiple > 0."""
        B = self.block_size
        if self.prefix_rule.every_chunk_end or self.prefix_rule.keeps_periodic(position, B):
            return True
        junction = req.shared_prefix_boundary // B * B if self.prefix_rule.keeps_junction else -1  # 0.24–0.25: none
        return position in ((req.num_prompt_tokens - 1) // B * B, junction)

    def _register_state(self, req: SimRequest, page: int, g: int, position: int) -> None:
        keys, i = self._keys(req), position // self.block_size - 1
        if (self.enable_caching and 0 <= i < len(keys) and position % self.block_size == 0
                and self.pool.key_of(page) is None and self._keeps_state(req, position)):
            self.pool.register(page, key := hash((keys[i], g)))
            self._this_step.add(key)

    def _register(self, req: SimRequest, upto_tokens: int) -> None:
        """Register shared full blocks up to ``upto_tokens`` and, at a block-aligned chunk end, the state pages."""
        if not self.enable_caching or not req.spec.prefix_segments:
            return
        keys, tables = self._keys(req), req.node[0]
        full = min(upto_tokens // self.block_size, len(keys))
        for i in range(req.num_registered, full):
            for g, t in zip(self.full, tables):
                if self.pool.key_of(t[i]) is None:
                    self.pool.register(t[i], hash((keys[i], g)))
        req.num_registered = max(req.num_registered, full)
        for g, page in zip(self.state, req.node[1]):
            self._register_state(req, page, g, upto_tokens)

    def free(self, req: SimRequest, preempted: bool) -> None:
        """Release a finished or preempted request's blocks (each table last block first) and state pages."""
        if req.node is None:
            return
        tables, cur, extra, held = req.node
        for t in tables:
            for b in reversed(t):
                self._release(b)
        for p in [p for pages in extra for p in pages] + cur:
            self._release(p)
        self._held -= held
        req.node, req.num_registered = None, 0

    def held_blocks(self, req: SimRequest) -> int:
        """Blocks and state pages a running request holds over all groups, blocks."""
        return req.node[3] if req.node is not None else 0

    def after_prefill_step(self, req: SimRequest) -> None:
        """Nothing: blocks and states are registered at schedule time (``admit``, ``grow``)."""



def _prefill_end(req: SimRequest) -> int:
    """vLLM 0.33's prefill end, ``max(num_prompt_tokens, num_tokens − 1)``, tokens."""
    return max(req.num_prompt_tokens, req.num_tokens - 1)
