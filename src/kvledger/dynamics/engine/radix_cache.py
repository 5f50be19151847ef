"""The SGLang-style KV cache: a token pool (page_size 1) plus a radix tree over prompt content with LRU eviction of
leaves.

Follows SGLang's ``mem_cache/radix_cache.py`` (docs/engine-model.md §3.3, §6.8), run
"simulated" on token counts: the pool holds ``capacity_tokens`` token slots; finished
requests leave their tokens in the tree, where they stay matchable and evictable, retracted ones only what their
last prefill checkpointed (``free``); running requests lock the path they use; allocation evicts least-recently
used unlocked leaves, a whole node at a time (``evict``).

Content model. A node stands for one whole prompt segment (``RequestSpec.prefix_segments``,
``segment_tokens`` tokens each) or for one request's own unique tokens (key
``(-1, uid)``). Matching is token-granular in what it returns (the hit is a token count,
capped at ``num_tokens − 1`` as SGLang keeps one token to compute logits) and
segment-granular in what it compares, which is exact for this content model: two
different segments differ from their first token. The replica calls ``after_prefill_step``
after every prefill chunk, the last one included, as SGLang checkpoints a running request's
computed tokens then (``mem_cache/common.py : checkpoint_kv_cache``, 0.5.23), so a request
admitted in a later step matches a prompt still decoding. One simplification: a segment
enters the tree only once it is wholly computed (SGLang also inserts a partly computed one
after a middle chunk; only a request arriving in between could tell the difference).
"""

from __future__ import annotations

import heapq

from kvledger.dynamics.engine.kv_interface import PrefixCacheStats, count_admission
from kvledger.dynamics.engine.radix_fresh import RadixFresh
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.stretch_radix import RadixStretches

__all__ = ["RadixKVManager", "RadixNode"]

_OWN = -1


class RadixNode:
    """One tree node: ``ntok`` tokens of one segment (or of one request's own tail)."""

    __slots__ = ("key", "ntok", "parent", "children", "lock_ref", "last_access", "alive")

    def __init__(self, key, ntok: int, parent: RadixNode | None) -> None:
        self.key = key
        self.ntok = ntok
        self.parent = parent
        self.children: dict = {}
        self.lock_ref = 0
        self.last_access = 0
        self.alive = True


class RadixKVManager(RadixStretches, RadixFresh):
    """SGLang's radix cache over a token pool, with the same interface as :class:`PagedKVManager`.

    Args:
        capacity_tokens: token slots in the pool, tokens.
        block_size: only used to report usage in blocks (``capacity_tokens / block_size``).
    """

    name = "sglang"
    enable_caching = True
    contiguous = False
    plain_block_table = False
    supports_stretches = True
    caches_prefills = True
    backs_up_on_evict = False  # True: each evicted node goes to ``back_up_evicted`` (a subclass's host tier)

    def __init__(self, capacity_tokens: int, block_size: int = 1) -> None:
        self.capacity_tokens = capacity_tokens
        self.block_size = block_size
        self.root = RadixNode(None, 0, None)
        self.root.lock_ref = 1
        self.tree_tokens = 0  # tokens held by tree nodes, tokens
        self.evictable_tokens = 0  # tree tokens with lock_ref 0, tokens
        self.private_tokens = 0  # tokens of running requests not (yet) in the tree, tokens
        self._heap: list = []
        self._tick = 0
        self._seq = 0
        self.num_evictions = 0
        self.prefix_stats = PrefixCacheStats()
        self._fill: dict[int, int] = {}  # uid → a resumed request's num_tokens at admission (its prefill's)
        self.held_slots = 0  # Σ over running requests of the token slots each uses (shared path per holder), tokens

    # ------------------------------------------------------------ accounting
    @property
    def num_free_tokens(self) -> int:
        return self.capacity_tokens - self.tree_tokens - self.private_tokens

    @property
    def capacity_blocks(self) -> int:
        return self.capacity_tokens // self.block_size

    @property
    def num_used_blocks(self) -> int:
        """Token slots in use by requests (locked tree tokens + private ones), in blocks of ``block_size``."""
        return (self.tree_tokens - self.evictable_tokens + self.private_tokens) / self.block_size

    @property
    def allocatable_tokens(self) -> int:
        """Token slots an allocation can get now: free ones plus unlocked tree tokens (evicted on demand), tokens."""
        return self.num_free_tokens + self.evictable_tokens

    def held_blocks(self, req: SimRequest) -> int:
        """0: a request holds token slots, not a block table (nothing for the sliding-window check to free)."""
        return 0

    @property
    def usage(self) -> float:
        return (self.tree_tokens - self.evictable_tokens + self.private_tokens) / self.capacity_tokens

    # ------------------------------------------------------------- the tree
    def _segments(self, req: SimRequest) -> tuple:
        """Whole prompt segments, then any output segments (SGLang's cache_finished_req inserts the output too)."""
        spec = req.spec
        return spec.stream_segments if spec.prefix_segments else ()

    def _match(self, req: SimRequest) -> tuple[RadixNode, int]:
        node, tokens = self.root, 0
        for seg in self._segments(req):
            child = node.children.get(seg)
            if child is None:
                break
            node, tokens = child, tokens + child.ntok
        own = node.children.get((_OWN, req.uid)) if req.num_preemptions else None
        if own is not None:
            node, tokens = own, tokens + own.ntok
        return node, tokens

    def match_tokens(self, req: SimRequest) -> int:
        """Tokens the request would get from the tree now, capped at ``num_tokens − 1``; does not mutate."""
        return min(self._match(req)[1], req.num_tokens - 1)

    def match(self, req: SimRequest) -> tuple[tuple[RadixNode, int], int]:
        """((deepest matched node, matched tokens), hit tokens capped at ``num_tokens − 1``); does not mutate."""
        handle = self._match(req)
        return handle, min(handle[1], req.num_tokens - 1)

    def admission_hold_tokens(self, handle: tuple) -> int:
        """Unlocked tree tokens on the matched path (locking it takes them out of ``allocatable_tokens``), plus the
        host tokens loaded back into the pool (a HiCache handle's third field: ``HiCacheRadixKVManager``)."""
        return self._path_evictable(handle[0]) + sum(handle[2:])

    def _push(self, node: RadixNode) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (node.last_access, self._seq, node))

    def _unlock_path(self, node: RadixNode) -> None:
        self._tick += 1
        while node is not self.root:
            node.lock_ref -= 1
            node.last_access = self._tick
            if node.lock_ref == 0:
                self.evictable_tokens += node.ntok
                if not node.children:
                    self._push(node)
            node = node.parent

    def _lock_path(self, node: RadixNode) -> None:
        self._tick += 1
        while node is not self.root:
            self._lock_one(node)
            node = node.parent

    def _lock_one(self, node: RadixNode) -> None:
        if node.lock_ref == 0:
            self.evictable_tokens -= node.ntok
        node.lock_ref += 1
        node.last_access = self._tick

    def _path_evictable(self, node: RadixNode) -> int:
        tokens = 0
        while node is not self.root:
            tokens += node.ntok if node.lock_ref == 0 else 0
            node = node.parent
        return tokens

    def _evict(self, need_tokens: int) -> None:
        heap = self._heap
        while self.num_free_tokens < need_tokens and heap:
            t, _, node = heapq.heappop(heap)
            if not node.alive or node.children or node.lock_ref or node.last_access != t:
                continue
            node.alive = False
            parent = node.parent
            del parent.children[node.key]
            self.tree_tokens -= node.ntok
            self.evictable_tokens -= node.ntok
            self.num_evictions += 1
            if self.backs_up_on_evict:  # HiCache write_back (hicache_write_back.py)
                self.back_up_evicted(node)
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                self._push(parent)

    def _take(self, req: SimRequest, n: int) -> bool:
        if n > self.num_free_tokens + self.evictable_tokens:
            return False
        if n > self.num_free_tokens:
            self._evict(n)
        self.private_tokens += n
        req.private_tokens += n
        return True

    def _child(self, node: RadixNode, key, ntok: int) -> RadixNode:
        """Move ``ntok`` of the request's private tokens into ``node``'s child ``key`` (reusing an existing one)."""
        child = node.children.get(key)
        if child is None:
            child = RadixNode(key, ntok, node)
            node.children[key] = child
            self.tree_tokens += ntok
            self.evictable_tokens += ntok  # born unlocked; the lock below takes it back
        elif child.ntok < ntok:  # a request's own tail, grown since it was cached
            self.tree_tokens += ntok - child.ntok
            if child.lock_ref == 0:
                self.evictable_tokens += ntok - child.ntok
            child.ntok = ntok
        self._lock_one(child)
        return child

    def _insert(self, req: SimRequest, upto_tokens: int) -> None:
        """Move the request's wholly computed segments beyond its locked path into the tree, locked by it."""
        segs = self._segments(req)
        S = req.spec.segment_tokens
        node = req.node
        self._tick += 1
        while not isinstance(node.key, tuple):
            i = req.tree_tokens // S
            if i >= len(segs) or (i + 1) * S > upto_tokens:
                break
            node = self._child(node, segs[i], S)
            req.tree_tokens += S
            req.private_tokens -= S
            self.private_tokens -= S
        req.node = node

    # ---------------------------------------------------------- allocation
    def admit(self, req: SimRequest, handle, num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool:
        """Lock the matched path and take ``num_new_tokens`` slots; False (nothing changed) if the full prompt would
        not fit."""
        node, matched = handle
        hit = min(matched, req.num_tokens - 1)
        avail = self.num_free_tokens + self.evictable_tokens - self._path_evictable(node)
        take = max(hit + num_new_tokens, reserve_tokens) - hit
        if max(must_fit_tokens - hit, take) > avail:
            return False
        self._lock_path(node)
        req.node, req.tree_tokens, req.private_tokens = node, matched, 0
        req.covered_tokens = hit + take
        self.held_slots += hit + take
        if not self._take(req, take):
            raise RuntimeError("radix cache: admission check passed but allocation failed")
        if req.num_preemptions:
            self._fill[req.uid] = req.num_tokens
        count_admission(self.prefix_stats, req, hit)
        return True

    def grow(self, req: SimRequest, num_new_tokens: int) -> bool:
        """Slots for ``num_new_tokens`` more tokens (evicting LRU leaves); False if they do not fit."""
        need = req.num_computed_tokens + num_new_tokens - req.covered_tokens
        if need <= 0:
            return True
        if not self._take(req, need):
            return False
        req.covered_tokens += need
        self.held_slots += need
        return True

    def after_prefill_step(self, req: SimRequest) -> None:
        """SGLang ``mem_cache/common.py : checkpoint_kv_cache`` (``RadixCache.checkpoint``; ``cache_unfinished_req``
        before 0.5.23), called after each prefill chunk, the last included: newly computed whole segments become
        matchable."""
        self._insert(req, req.num_computed_tokens)

    def kept_tokens(self, req: SimRequest, preempted: bool) -> int:
        """Tokens ``free`` puts in the tree: all computed at finish; on retraction only what the last prefill
        checkpointed (its fill at admission): SGLang 0.5.23 ``schedule_batch.py : release_req`` calls
        ``release_kv_cache(checkpoint=False)``, freeing the KV beyond ``cache_protected_len`` (decoded tokens)."""
        cap = self._fill.get(req.uid, req.num_prompt_tokens) if preempted else req.num_computed_tokens
        return min(req.num_computed_tokens, cap)

    def free(self, req: SimRequest, preempted: bool) -> None:
        """SGLang ``release_kv_cache``: ``kept_tokens`` join the tree, the rest is freed; the path unlocks."""
        computed = self.kept_tokens(req, preempted)
        self._fill.pop(req.uid, None)
        self._insert(req, computed)
        node, tail = req.node, computed - req.tree_tokens
        if tail > 0:
            if isinstance(node.key, tuple):
                grown = node.ntok + tail
                self.tree_tokens += tail
                node.ntok = grown
            else:
                self._tick += 1
                node = self._child(node, (_OWN, req.uid), tail)
            req.private_tokens -= tail
            self.private_tokens -= tail
        self.private_tokens -= req.private_tokens  # duplicates of tokens already in the tree
        self._unlock_path(node)
        self.held_slots -= req.covered_tokens
        req.node, req.tree_tokens, req.private_tokens, req.covered_tokens = None, 0, 0, 0
