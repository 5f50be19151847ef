"""The per-step scheduling rules: vLLM v1's (running requests first, then waiting ones, under a token budget) and vLLM
V0's prefill-first rule.

Source: ``vllm/v1/core/sched/scheduler.py::Scheduler.schedule`` (docs/engine-model.md §2.2). There are no
prefill and decode phases: each request's ``num_computed_tokens`` catches up with its ``num_tokens``::

    prompt (P tokens)                 generated (g tokens)
    |-------------------------------|----------|
    |<-- num_computed_tokens -->|<-- scheduled this step (≤ budget) -->|
                                   a step that reaches num_tokens samples token g+1

1. Budget = ``max_num_batched_tokens``. Each running request, in order, gets ``min(num_tokens − computed, budget,
   max_model_len − 1 − computed)`` tokens (0.9.2–0.34.0; 0.8.5–0.9.1 lack the − 1: moot, see the loop), cut first to
   ``long_prefill_token_threshold`` when set (waiting requests too; from vLLM 0.31 not while one request is running or
   waiting); with align-mode Mamba state groups a prefill chunk short of the prefill end is cut to a block boundary
   (vLLM 0.33 ``_mamba_block_aligned_split``, swa_step.py ``aligned_chunk``; waiting requests too, and a chunk cut to
   0 tokens skips the running request or stops admission).
2. If its blocks do not fit, the *last* running request is preempted (blocks freed,
   ``num_computed_tokens = 0``, front of the waiting queue), repeatedly, until they fit
   or the request preempted itself (then the loop stops).
3. Waiting requests are admitted only if nothing was preempted this step, while
   ``len(running) < max_num_seqs`` and budget is left, each with its prefix-cache hit;
   with ``scheduler_reserve_full_isl`` the whole prompt must fit in the free blocks. The
   first request that does not fit stops admission (a new request never preempts).
   Without chunked prefill, a prompt larger than the budget left also stops admission.

Policies are small functions in dicts: the order of the waiting queue (``fcfs``,
``lpm``) and batch formation (``continuous``, ``static``, ``vllm_v0``).

``vllm_v0`` is vLLM V0's default scheduler with chunked prefill off (``vllm/core/scheduler.py``:
``Scheduler._schedule`` in 0.2.x, ``_schedule_default`` / ``_schedule_prefills`` /
``_schedule_running`` in later releases; ``block_manager_v1.py``), the engine of DistServe's vLLM baseline
(v0.2.3). Each step is either prompt-only or decode-only::

    waiting:  [p5 p6 p7]   running: [r1 r2 r3 r4]
    step k:   p5 p6 (whole prompts; p7 did not fit)   -> r1..r4 wait, no token this step
    step k+1: p7 did not fit again                     -> r1 r2 r3 r4 p5 p6 decode one token each

1. Prompt phase (V0 skips it while requests are swapped out; recompute never swaps): waiting requests,
   FCFS, are admitted while ``len(running) < max_num_seqs``, the step's prompt tokens fit
   ``max_num_batched_tokens`` (with ``max_paddings`` set: batch × longest prompt fits it and
   the padding stays ≤ ``max_paddings``) and the whole prompt's blocks leave at least the
   watermark (``int(0.01 × num_gpu_blocks)`` blocks) free (``can_allocate``). The first
   request that fails stops admission. A preempted request is a prompt of all its tokens
   (prompt + generated). If any prompt was admitted, the step runs just those prompts.
2. Otherwise every running request, in arrival order, decodes one token. Before each one V0
   requires a free block (``can_append_slot``: one free block per sequence, needed or not);
   while none is free the newest running request is preempted by recompute (blocks freed,
   front of the waiting queue), or the request itself when it is the newest.
"""

from __future__ import annotations

from collections import deque

from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.kv_interface import KVManager, SchedulerOutput
from kvledger.dynamics.engine.request_state import PREEMPTED, RUNNING, SimRequest

__all__ = ["Scheduler", "LPM_MAX_WAITING"]

LPM_MAX_WAITING = 128  # SGLang managers/schedule_policy.py: prefix matching off above this queue length


def _order_fcfs(waiting: deque, kv) -> None:
    return None


def _order_lpm(waiting: deque, kv) -> None:
    """SGLang 'lpm': longest cached prefix first (stable), FCFS when more than 128 wait."""
    if 1 < len(waiting) <= LPM_MAX_WAITING:
        ordered = sorted(waiting, key=lambda r: -kv.match_tokens(r))
        waiting.clear()
        waiting.extend(ordered)


ORDER_POLICIES = {"fcfs": _order_fcfs, "lpm": _order_lpm}


class Scheduler:
    """The running list and waiting queue of one replica, and the per-step scheduling rule.

    Args:
        cfg: engine settings.
        kv: the KV manager (``PagedKVManager`` or ``RadixKVManager``).
    """

    def __init__(self, cfg: EngineConfig, kv: KVManager) -> None:
        self.cfg = cfg
        self.kv = kv
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        self.num_finishing = 0  # async scheduling: requests whose last token is in flight (still hold a seat)
        self._order = ORDER_POLICIES[cfg.scheduling_policy]
        self._start_load = getattr(kv, "start_load", None)  # a KV connector's load at admission (offload.py)
        self._step_starts = getattr(kv, "new_step_starts", None)  # vLLM's, at each schedule (mamba_prefix.py only)
        self._static, self._v0 = cfg.batching == "static", cfg.batching == "vllm_v0"
        self._watermark_blocks = cfg.v0_watermark_blocks
        # paged KV with ceil(n / block_size) blocks: lets the running loop skip kv.grow when no block is needed
        self._fast_block_size = kv.block_size if kv.plain_block_table else 0
        rule = cfg.step_blocks  # align-mode Mamba groups: prefill chunks end on block boundaries (``aligned_chunk``)
        self._align_chunk = rule.aligned_chunk if rule is not None and rule.state_boundary_page else None  # None: uncut
        thr = cfg.long_prefill_token_threshold  # the aligned split's longest chunk: min(budget, threshold) (vLLM 0.33)
        self._align_max = min(cfg.max_num_batched_tokens, thr) if thr else cfg.max_num_batched_tokens
        # the state when a running request first could not get its blocks: (running requests, blocks they held,
        # usable blocks), taken before the first victim is freed (the replica adds the time: Replica.batch_facts)
        self.first_preemption: tuple[int, float, int] | None = None

    def schedule(self) -> SchedulerOutput:
        """Plan one step: the scheduled (request, num_new_tokens) in order, the preempted, how many were admitted.

        Mutates the running list, the waiting queue and the KV manager (blocks are taken
        here, as vLLM's ``allocate_slots`` does at schedule time).
        """
        if self._v0:
            return self._schedule_v0()
        cfg, running = self.cfg, self.running
        if self._step_starts is not None:  # no call on other managers' hot path
            self._step_starts()
        admitted = self._form_static_batch() if self._static and not running else 0
        budget = cfg.max_num_batched_tokens
        max_len = cfg.max_model_len
        fast_b, align, align_max = self._fast_block_size, self._align_chunk, self._align_max
        cap = self.long_prefill_cap()
        scheduled: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            c = req.num_computed_tokens
            n = req.num_tokens - c
            if n == 1 and fast_b and c < max_len - 1 and c // fast_b < len(req.blocks) and not req.keys:
                scheduled.append((req, 1))  # a decode its blocks cover, below max_model_len − 1: no cut below applies
                budget, i = budget - 1, i + 1
                continue
            if 0 < cap < n:
                n = cap
            if n > budget:
                n = budget
            if n > max_len - 1 - c:  # scheduler.py::schedule's running loop; accepted requests end sooner (module doc)
                n = max_len - 1 - c
            if align is not None and n > 1:
                n = align(c, n, req.num_prompt_tokens, req.num_tokens, align_max, req.shared_prefix_boundary)
            if n <= 0:
                i += 1
                continue
            if fast_b and (c + n - 1) // fast_b < len(req.blocks) and not req.keys:
                scheduled.append((req, n))  # its blocks already cover these tokens (kv.grow would do nothing)
                budget, i = budget - n, i + 1
                continue
            if not self._grow_or_preempt(req, n, preempted, need_free_block=False):
                break
            scheduled.append((req, n))
            budget, i = budget - n, i + 1
        if not preempted and not self._static:
            admitted = self.admit_waiting(scheduled, budget)
        return SchedulerOutput(scheduled, preempted, admitted)

    def long_prefill_cap(self) -> int:
        """This step's cap on one request's chunk, tokens (0: none): the threshold, lifted (0.31 on) for one request
        running or waiting, floored (adaptive) at max_num_batched_tokens // them (v1/core/sched/scheduler.py)."""
        thr, n = self.cfg.long_prefill_token_threshold, len(self.running) + len(self.waiting)
        if not thr or (not self.cfg.long_prefill_cap_alone and n <= 1):
            return 0
        return max(thr, self.cfg.max_num_batched_tokens // max(n, 1)) if self.cfg.long_prefill_adaptive else thr

    def advance_decode(self, num_steps: int) -> None:
        """The fast path ran ``num_steps`` pure decode steps (nothing to update for vLLM's rules)."""

    def _grow_or_preempt(self, req: SimRequest, n: int, preempted: list[SimRequest], *, need_free_block: bool) -> bool:
        """Give ``req`` blocks for ``n`` more tokens, preempting the newest running request (recompute) until they fit.

        ``need_free_block``: V0's ``can_append_slot`` also wants one free block per decoding sequence.
        Returns False when ``req`` itself had to be preempted (the step's running loop then stops).
        """
        kv, running = self.kv, self.running
        while (need_free_block and kv.num_free_blocks < 1) or not kv.grow(req, n):
            if self.first_preemption is None:
                self.first_preemption = (len(running), kv.num_used_blocks, kv.capacity_blocks)
            victim = running.pop()
            self._preempt(victim)
            preempted.append(victim)
            if victim is req:
                return False
        return True

    def _preempt(self, req: SimRequest) -> None:
        self.kv.free(req, preempted=True)
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = PREEMPTED
        self.waiting.appendleft(req)

    def admit_waiting(self, scheduled: list[tuple[SimRequest, int]], budget: int) -> int:
        """Admit waiting requests under ``budget`` tokens (module doc, rule 3), appending them to ``scheduled``; returns
        how many (also the fast path's mixed step, fast_path.py)."""
        cfg, kv, waiting, running = self.cfg, self.kv, self.waiting, self.running
        if not waiting or budget <= 0:
            return 0
        if self._order is not _order_fcfs:
            self._order(waiting, kv)
        admitted = 0
        max_seqs = cfg.max_num_seqs - self.num_finishing
        start_load, cap = self._start_load, self.long_prefill_cap()
        while waiting and budget > 0 and len(running) < max_seqs:
            req = waiting[0]
            if start_load is not None:  # vLLM 0.33: a load starts when the scheduler reaches the request
                load_s = start_load(req)
                if load_s is None:  # its sequence does not fit beside the in-flight loads: it waits
                    break
                if load_s > 0:  # WAITING_FOR_REMOTE_KVS: out of the queue, the next request considered
                    waiting.popleft()
                    admitted += 1  # the step changed the queue (not steady), though nothing runs yet
                    continue
            handle, hit = kv.match(req)
            n = req.num_tokens - hit
            if 0 < cap < n:  # before the chunked-prefill-off check, as vLLM orders them
                n = cap
            if not cfg.enable_chunked_prefill and n > budget:
                break
            n = min(n, budget)
            if self._align_chunk is not None and n > 1:
                n = self._align_chunk(hit, n, req.num_prompt_tokens, req.num_tokens, self._align_max,
                                      req.shared_prefix_boundary)  # the junction kv.match found
                if n == 0:  # vLLM stops admission (the chunk would not reach a block boundary)
                    break
            must_fit = req.num_tokens if cfg.scheduler_reserve_full_isl else hit + n
            if not kv.admit(req, handle, n, must_fit):
                break
            waiting.popleft()
            req.status = RUNNING
            running.append(req)
            scheduled.append((req, n))
            budget -= n
            admitted += 1
        return admitted

    def _schedule_v0(self) -> SchedulerOutput:
        """vLLM V0: a prompt-only step if any waiting prompt is admitted, else a decode step for all (module doc)."""
        scheduled: list[tuple[SimRequest, int]] = []
        admitted = self._admit_prompts_v0(scheduled)
        if admitted:
            return SchedulerOutput(scheduled, [], admitted)
        kv, running, preempted = self.kv, self.running, []
        fast_b, free = self._fast_block_size, kv.num_free_blocks
        i = 0
        while i < len(running):
            req = running[i]
            if free and fast_b and req.num_computed_tokens // fast_b < len(req.blocks):
                scheduled.append((req, 1))  # a block is free and the new token fits the held blocks
                i += 1
                continue
            if not self._grow_or_preempt(req, 1, preempted, need_free_block=True):  # can_append_slot
                break
            scheduled.append((req, 1))
            free = kv.num_free_blocks
            i += 1
        return SchedulerOutput(scheduled, preempted, 0)

    def _admit_prompts_v0(self, scheduled: list[tuple[SimRequest, int]]) -> int:
        """V0's prompt phase: admit whole prompts FCFS under the limits of the module doc; returns how many."""
        cfg, kv, waiting, running = self.cfg, self.kv, self.waiting, self.running
        budget, max_pad, watermark = cfg.max_num_batched_tokens, cfg.max_paddings, self._watermark_blocks
        n = total = longest = 0
        while waiting and len(running) < cfg.max_num_seqs - self.num_finishing:  # async output: finishers' seats
            req = waiting[0]
            t = req.num_tokens  # a preempted request recomputes its prompt and generated tokens
            if kv.num_free_blocks - cfg.blocks_needed(t) < watermark:
                break
            if max_pad is None:
                if total + t > budget:
                    break
            else:
                padded = (n + 1) * max(longest, t)
                if padded > budget or padded - (total + t) > max_pad:
                    break
            if not kv.admit(req, [], t, t):
                break
            waiting.popleft()
            req.status = RUNNING
            running.append(req)
            scheduled.append((req, t))
            n, total, longest = n + 1, total + t, max(longest, t)
        return n

    def _form_static_batch(self) -> int:
        """Static batching: with nothing running, admit up to max_num_seqs waiting requests, each reserving its whole
        sequence."""
        cfg, kv, waiting, running = self.cfg, self.kv, self.waiting, self.running
        self._order(waiting, kv)
        while waiting and len(running) < cfg.max_num_seqs:
            req = waiting[0]
            handle, _ = kv.match(req)
            full = req.num_prompt_tokens + req.num_output_tokens
            if not kv.admit(req, handle, 0, full, reserve_tokens=full):
                break
            waiting.popleft()
            req.status = RUNNING
            running.append(req)
        return len(running)
