"""The contract between a scheduler and its KV manager (``KVManager``), what a schedule returns, and prefix-cache stats.

Four managers implement ``KVManager``: ``PagedKVManager`` (kv_manager.py, vLLM's block tables),
``HybridKVManager`` (hybrid_kv.py, one block table per KV cache group), ``MambaPrefixKVManager`` (mamba_prefix.py,
full-attention blocks and Mamba state pages) and ``RadixKVManager`` (radix_cache.py, SGLang's token pool and radix
tree). Both schedulers (scheduler.py, sglang_scheduler.py)
return a ``SchedulerOutput``, as vLLM's ``Scheduler.schedule`` does (``vllm/v1/core/sched/output.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["KVManager", "PrefixCacheStats", "SchedulerOutput", "count_admission"]


@dataclass(slots=True)
class PrefixCacheStats:
    """Prefix-cache lookups at admission, in vLLM's names (``vllm/v1/metrics/stats.py : PrefixCacheStats``).

    Attributes:
        requests: requests looked up at their first admission, count.
        queries: their prompt tokens, tokens.
        hits: of which served from the cache, tokens.
        preempted_requests: re-admissions of preempted requests, count.
        preempted_queries: the tokens (prompt + generated) they looked up, tokens.
        preempted_hits: of which served from the cache, tokens.
    """

    requests: int = 0
    queries: int = 0
    hits: int = 0
    preempted_requests: int = 0
    preempted_queries: int = 0
    preempted_hits: int = 0

    def record(self, num_tokens: int, num_hits: int, preempted: bool) -> None:
        """One lookup of ``num_tokens`` tokens of which ``num_hits`` hit (vLLM ``PrefixCacheStats.record``)."""
        if preempted:
            self.preempted_requests += 1
            self.preempted_queries += num_tokens
            self.preempted_hits += num_hits
        else:
            self.requests += 1
            self.queries += num_tokens
            self.hits += num_hits


def count_admission(stats: PrefixCacheStats, req: SimRequest, hit_tokens: int) -> None:
    """A request admitted with ``hit_tokens`` from the cache: record the lookup, start its computed tokens at the hit
    (and, at its first admission, remember the hit as its ``num_cached_tokens``). Every KV manager calls this."""
    if req.num_preemptions == 0:
        stats.record(req.num_prompt_tokens, hit_tokens, False)
        req.num_cached_tokens = hit_tokens
    else:
        stats.record(req.num_tokens, hit_tokens, True)
    req.num_computed_tokens = hit_tokens


@dataclass(slots=True)
class SchedulerOutput:
    """One scheduled step (vLLM ``SchedulerOutput``, reduced to what the simulator prices and applies).

    Attributes:
        scheduled: (request, num_new_tokens) in the order the step runs them.
        preempted: requests preempted (vLLM) or retracted (SGLang) while scheduling, in order.
        num_admitted: waiting requests admitted this step, count.
    """

    scheduled: list[tuple[SimRequest, int]]
    preempted: list[SimRequest]
    num_admitted: int


class KVManager(Protocol):
    """What a scheduler and a replica ask of a KV manager. "Check first, then commit": ``admit`` and ``grow`` return
    False and change nothing when the blocks (or token slots) do not fit.

    Capabilities are attributes: ``enable_caching`` (prefix caching on), ``contiguous`` (whole-sequence reservation),
    ``plain_block_table`` (a request holds ``ceil(tokens / block_size)`` blocks in ``req.blocks``, so a step whose
    tokens fit its blocks needs no ``grow``), ``supports_stretches`` (``stretch_limit``/``stretch_commit`` run many
    decode steps at once: the replica's fast path), ``caches_prefills`` (``after_prefill_step``, called after every
    prefill chunk including the last, makes newly computed prompt segments matchable, SGLang's
    ``checkpoint_kv_cache``).
    """

    name: str
    block_size: int
    enable_caching: bool
    contiguous: bool
    plain_block_table: bool
    supports_stretches: bool
    caches_prefills: bool
    prefix_stats: PrefixCacheStats

    @property
    def capacity_blocks(self) -> int: ...

    @property
    def num_used_blocks(self) -> float: ...

    @property
    def usage(self) -> float: ...

    @property
    def held_slots(self) -> int: ...

    @property
    def allocatable_tokens(self) -> int: ...

    def match(self, req: SimRequest) -> tuple[Any, int]:
        """(a handle for ``admit``, hit tokens) of a waiting request; does not mutate."""

    def match_tokens(self, req: SimRequest) -> int: ...

    def admission_hold_tokens(self, handle: Any) -> int:
        """Tokens of ``allocatable_tokens`` that admitting with ``handle`` takes beyond its new tokens (SGLang's
        admission check locks the matched prefix first and counts host tokens loaded back); does not mutate."""

    def admit(self, req: SimRequest, handle: Any, num_new_tokens: int, must_fit_tokens: int,
              reserve_tokens: int = 0) -> bool: ...

    def grow(self, req: SimRequest, num_new_tokens: int) -> bool: ...

    def free(self, req: SimRequest, preempted: bool) -> None: ...

    def after_prefill_step(self, req: SimRequest) -> None: ...

    def held_blocks(self, req: SimRequest) -> int: ...

    def decode_step(self, running: list[SimRequest], comp: list[int], rems: list[int]) -> bool: ...

    def stretch_limit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                      reserve: int = 0) -> int: ...

    def stretch_commit(self, running: list[SimRequest], comp: list[int], rems: list[int], k: int,
                       free_finished: bool = True, lag: int = 0) -> Any: ...
