"""SGLang's own scheduling rule (0.5.x, mixed chunks off; overlap scheduling's one-step lag not modelled, its
max(GPU, CPU) step timing is, in the step cost): prefill-first steps, admission that reserves future decode tokens,
one chunked request, decode retraction.

Source: ``python/sglang/srt/managers/scheduler.py : Scheduler.get_next_batch_to_run``,
``_get_new_batch_prefill_raw``, ``update_running_batch``; ``managers/schedule_policy.py :
PrefillAdder`` (``add_chunked_req``, ``add_one_req``, ``_select_prefill_admission``);
``mem_cache/prefill_budget.py : PrefillBudget``; ``managers/schedule_batch.py :
ScheduleBatch.retract_decode``; ``scheduler_components/new_token_ratio_tracker.py`` (read in the
0.5.23 wheel). Each step is either a prefill batch or a decode batch::

    waiting: [w1 w2 w3]  running: [r1 r2]  chunked: c
    step k:   PREFILL  [c rest-of-chunk, w1 …]   r1 r2 paused (no token this step)
    step k+1: PREFILL  if anything is admissible, else DECODE [r1 r2 c w1 …] one token each

1. Prefill. The request being chunked continues first, up to the chunk budget
   (``chunked_prefill_size``, here ``max_num_batched_tokens``). Then waiting requests, in
   policy order (``fcfs`` queue order; ``lpm`` longest cached prefix first, FCFS above 128
   waiting, requests sharing an uncached prefix with one before them moved back), each
   admitted only if ``extend + min(max_new − out, 4096) + page < free + evictable − offset``
   (checked with its matched prefix locked, so that prefix is not evictable, and host tokens it loads back
   counted in ``extend``; the lock and the loaded slots stay),
   where ``offset`` starts at Σ over running requests of ``min(max_new − out, 4096) × ratio``
   and grows by each admission's ``extend + page +
   max_new`` (``max_new`` 0 for a request cut into chunks). The first refusal stops
   admission; a request larger than the budget left is cut (it becomes the one chunked
   request), which uses the budget up. A refusal, or an admission that leaves no room (free + evictable − offset
   ≤ 0), marks the batch full (``running_batch.batch_is_full``) when requests were running before the pass: no
   request is admitted again (a chunk still continues) until one leaves the running batch (finishes or is
   retracted) or it empties. ``ratio`` is 1 for requests sent with ``ignore_eos``
   (``EngineConfig.ignore_eos``, how benchmarks replay fixed lengths), else ``new_token_ratio``:
   0.7 when idle, minus (0.7 − 0.098)/600 after each decode step, down to 0.098.
2. Decode. Every running request needs one token slot; while they do not all fit,
   requests are retracted — fewest outputs first, then longest prompt — back to the end
   of the waiting queue, and ``new_token_ratio`` is reset to
   ``(Σ outputs + 20 × n) / (Σ max_new + 1)`` over the n that stay (at most 1).
"""

from __future__ import annotations

from collections import deque

from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_interface import KVManager, SchedulerOutput
from kvledger.dynamics.engine.request_state import PREEMPTED, RUNNING, SimRequest
from kvledger.dynamics.engine.scheduler import LPM_MAX_WAITING

__all__ = ["SGLangScheduler", "CLIP_MAX_NEW_TOKENS", "INIT_NEW_TOKEN_RATIO", "MIN_NEW_TOKEN_RATIO",
           "NEW_TOKEN_RATIO_DECAY"]

CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (environ.py)
INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO × schedule_conservativeness 1.0
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14  # × SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
IN_BATCH_CHECK_TOKENS = 32  # IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD (schedule_policy.py)
IN_BATCH_DEPRIORITIZE_TOKENS = 32  # IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD


def order_lpm(waiting: deque, kv) -> None:
    """SGLang's ``lpm`` (``SchedulePolicy._compute_prefix_matches``, ``_sort_by_longest_prefix``): longest cached prefix
    first; a request whose cached prefix is ≤ 32 tokens but that shares ≥ 32 tokens with a request before it in the
    queue goes to the back (it will hit once that one is cached); FCFS above 128 waiting."""
    if not 1 < len(waiting) <= LPM_MAX_WAITING:
        return
    seen: set[tuple] = set()  # the pass's temporary tree: shared-segment paths of requests kept in place
    keys = []
    for r in waiting:
        m = kv.match_tokens(r)
        spec = r.spec
        depth = spec.num_shareable_tokens // spec.segment_tokens if spec.prefix_segments else 0
        paths = [spec.prefix_segments[:d] for d in range(1, depth + 1)]
        if m <= IN_BATCH_CHECK_TOKENS:
            shared = sum(1 for p in paths if p in seen) * spec.segment_tokens
            if shared >= IN_BATCH_DEPRIORITIZE_TOKENS:
                keys.append((1, 0))
                continue
            seen.update(paths)
        keys.append((0, -m))
    order = sorted(range(len(waiting)), key=keys.__getitem__)
    ordered = [waiting[i] for i in order]
    waiting.clear()
    waiting.extend(ordered)


class SGLangScheduler:
    """The running list, waiting queue and chunked request of one SGLang replica, and its step rule (module doc).

    Same interface as ``scheduler.Scheduler``: ``schedule()`` returns a ``SchedulerOutput`` (retracted requests as
    its ``preempted``); a chunked request sits in ``running`` and is never decoded before its
    prompt is done (a prefill step always continues it first).
    """

    def __init__(self, cfg: EngineConfig, kv: KVManager) -> None:
        self.cfg, self.kv = cfg, kv
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        self.num_finishing = 0
        self.chunked: SimRequest | None = None
        self._lpm = cfg.scheduling_policy == "lpm"
        self._page = kv.block_size
        self._ratio_base = INIT_NEW_TOKEN_RATIO  # new_token_ratio = max(base − decay × steps, min)
        self._decode_steps = 0
        self.full_at: int | None = None  # batch_is_full: set with the running count then, else None
        self._before = 0  # running requests (the chunk aside) when the current prefill pass began
        self.first_preemption: tuple[int, float, int] | None = None  # as Scheduler's, before the first retraction

    @property
    def batch_is_full(self) -> bool:
        """SGLang's ``running_batch.batch_is_full``: admission is shut until a running request leaves (fewer running
        than when it was set: ``get_next_batch_to_run``'s ``filter_batch``) or only the chunk is left."""
        full = self.full_at
        return full is not None and len(self.running) >= full and any(r is not self.chunked for r in self.running)

    # ------------------------------------------------------------ ratio
    @property
    def new_token_ratio(self) -> float:
        """SGLang's ``new_token_ratio``: the share of a running request's remaining output that admission reserves."""
        return max(self._ratio_base - NEW_TOKEN_RATIO_DECAY * self._decode_steps, MIN_NEW_TOKEN_RATIO)

    def advance_decode(self, num_steps: int) -> None:
        """``num_steps`` decode steps ran without retraction (the fast path's stretches): the ratio decays."""
        self._decode_steps += num_steps

    # ------------------------------------------------------------ step
    def schedule(self) -> SchedulerOutput:
        """Plan one step: a prefill batch if anything can be prefilled, else a decode batch (module doc)."""
        if not self.running:  # the engine was idle: SGLang resets the ratio (self_check_during_idle)
            self._ratio_base, self._decode_steps = INIT_NEW_TOKEN_RATIO, 0
        if not self.batch_is_full:
            self.full_at = None
        plan: list[tuple[SimRequest, int]] = []
        admitted = self._prefill(plan)
        if plan:
            return SchedulerOutput(plan, [], admitted)
        return self._decode()

    def _max_new(self, req: SimRequest) -> int:
        return min(req.num_output_tokens - req.num_generated, CLIP_MAX_NEW_TOKENS)

    def _prefill(self, plan: list[tuple[SimRequest, int]]) -> int:
        cfg, kv, page = self.cfg, self.kv, self._page
        c = self.chunked
        if cfg.ignore_eos:  # ratio 1: whole numbers, so the float sum is the integer sum, exactly
            offset = float(sum([min(r.num_output_tokens - r.num_generated, CLIP_MAX_NEW_TOKENS) for r in self.running
                                if r is not c]))
        else:
            ratio = self.new_token_ratio
            offset = sum(self._max_new(r) * ratio for r in self.running if r is not c)
        avail = self.kv.allocatable_tokens
        budget = cfg.max_num_batched_tokens
        self._before = len(self.running) - (c is not None)  # the running batch the pass starts from (chunk not in it)
        if c is not None:
            budget, offset = self._continue_chunk(c, plan, avail, offset, budget)
        if not self.waiting or self.full_at is not None:
            return 0
        if not avail - offset > 0:  # budget_state() NO_TOKEN: the first candidate is refused
            self._mark_full()
            return 0
        if self.chunked is not None or budget <= 0:  # budget_state() OTHER
            return 0
        if self._lpm:
            order_lpm(self.waiting, kv)
        admitted = 0
        while self.waiting and budget > 0 and len(self.running) < cfg.max_num_seqs - self.num_finishing:
            req = self.waiting[0]
            handle, hit = kv.match(req)
            extend = req.num_tokens - hit
            total = extend + self._max_new(req) + page
            held = kv.admission_hold_tokens(handle)  # add_one_req: prefix locked (_lock_node), host load counted
            if not total < avail - held - offset:
                self._mark_full()  # AddReqResult.NO_TOKEN
                break
            if not cfg.enable_chunked_prefill and extend > budget:
                break
            n = min(extend, budget)
            if not kv.admit(req, handle, n, hit + n):
                break
            avail -= held  # _commit_prefill_admission keeps the lock; init_load_back took the loaded slots
            self.waiting.popleft()
            req.status = RUNNING
            self.running.append(req)
            plan.append((req, n))
            budget -= n
            admitted += 1
            chunked = n < extend
            offset += n + page + (0 if chunked else min(req.num_output_tokens, CLIP_MAX_NEW_TOKENS))
            if not avail - offset > 0:  # add_one_req returns budget_state(): NO_TOKEN before OTHER
                self._mark_full()
            if chunked:
                self.chunked = req
            if chunked or self.full_at is not None:
                break
        return admitted

    def _continue_chunk(self, c: SimRequest, plan: list, avail: int, offset: float, budget: int) -> tuple[int, float]:
        """``add_chunked_req``: the continuing chunk first; returns the budget and offset left."""
        left = c.num_tokens - c.num_computed_tokens
        room = min(budget, int(avail - offset)) if avail - offset > 0 else budget
        n = min(left, room)
        if not self.kv.grow(c, n):  # admission reserved the whole prompt and nothing decodes in between
            raise RuntimeError(f"sglang scheduler: request {c.spec.request_id}'s next chunk ({n} tokens) does "
                               "not fit the pool (SGLang: 'Prefill out of memory')")
        plan.append((c, n))
        offset += n + self._page + (0 if n < left else min(c.num_output_tokens, CLIP_MAX_NEW_TOKENS))
        self.chunked = c if n < left else None
        return budget - n, offset

    def _mark_full(self) -> None:
        """scheduler.py ``_get_new_batch_prefill_raw`` on NO_TOKEN: ``batch_is_full`` is set; it lasts only where the
        pass started with requests running (an empty running batch is replaced by the prefill batch next step)."""
        if self._before > 0:
            self.full_at = len(self.running)

    def _decode(self) -> SchedulerOutput:
        running, kv = self.running, self.kv
        if not running:
            return SchedulerOutput([], [], 0)
        retracted: list[SimRequest] = []
        if not self._fits(running):
            if self.first_preemption is None:  # as Scheduler's: the state before the first retraction
                self.first_preemption = (len(running), kv.num_used_blocks, kv.capacity_blocks)
            order = sorted(running, key=lambda r: (r.num_generated, -r.num_prompt_tokens), reverse=True)
            while len(order) > 1:
                victim = order.pop()
                self._retract(victim)
                retracted.append(victim)
                if self._fits(order):
                    break
            self.running = running = [r for r in running if r.status == RUNNING]
            outs = sum(r.num_generated for r in running)
            max_new = sum(r.num_output_tokens for r in running)
            self._ratio_base = min(1.0, (outs + RETRACT_DECODE_STEPS * len(running)) / (max_new + 1))
            self._decode_steps = 0
            self.full_at = None  # update_running_batch: the batch shrank
        else:
            self._decode_steps += 1
        plan = []
        for r in running:
            if not kv.grow(r, 1):
                raise RuntimeError("sglang scheduler: the decode step's slots were checked but did not fit")
            plan.append((r, 1))
        return SchedulerOutput(plan, retracted, 0)

    def _fits(self, reqs: list[SimRequest]) -> bool:
        """``check_decode_mem``: one more token for each request fits (eviction included)."""
        comp = [r.num_computed_tokens for r in reqs]
        return self.kv.stretch_limit(reqs, comp, [2] * len(reqs), 1) >= 1

    def _retract(self, req: SimRequest) -> None:
        self.kv.free(req, preempted=True)
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = PREEMPTED
        self.waiting.append(req)  # _add_request_to_queue: the end of the waiting queue
