"""vLLM v1's scheduling rule for one step: running requests first, then waiting ones, under a token budget, with recompute preemption.

Source: ``vllm/v1/core/sched/scheduler.py::Scheduler.schedule`` (engines.md §2, "One
scheduling step"). There are no prefill and decode phases: each request's
``num_computed_tokens`` catches up with its ``num_tokens``::

    prompt (P tokens)                 generated (g tokens)
    |-------------------------------|----------|
    |<-- num_computed_tokens -->|<-- scheduled this step (≤ budget) -->|
                                   a step that reaches num_tokens samples token g+1

1. Budget = ``max_num_batched_tokens``. Each running request, in order, gets
   ``min(num_tokens − computed, budget, max_model_len − computed)`` tokens.
2. If its blocks do not fit, the *last* running request is preempted (blocks freed,
   ``num_computed_tokens = 0``, front of the waiting queue), repeatedly, until they fit
   or the request preempted itself (then the loop stops).
3. Waiting requests are admitted only if nothing was preempted this step, while
   ``len(running) < max_num_seqs`` and budget is left, each with its prefix-cache hit;
   with ``scheduler_reserve_full_isl`` the whole prompt must fit in the free blocks. The
   first request that does not fit stops admission (a new request never preempts).
   Without chunked prefill, a prompt larger than the budget left also stops admission.

Policies are small functions in dicts: the order of the waiting queue (``fcfs``,
``lpm``) and batch formation (``continuous``, ``static``).
"""

from __future__ import annotations

from collections import deque

from kvledger.dynamics.engine_config import EngineConfig
from kvledger.dynamics.request_state import PREEMPTED, RUNNING, SimRequest

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

    def __init__(self, cfg: EngineConfig, kv) -> None:
        self.cfg = cfg
        self.kv = kv
        self.running: list[SimRequest] = []
        self.waiting: deque[SimRequest] = deque()
        self._order = ORDER_POLICIES[cfg.scheduling_policy]
        self._static = cfg.batching == "static"
        # paged KV with ceil(n / block_size) blocks: lets the running loop skip kv.grow when no block is needed
        self._fast_block_size = kv.block_size if getattr(kv, "pool", None) is not None and not kv.custom_bft else 0

    def schedule(self) -> tuple[list[tuple[SimRequest, int]], list[SimRequest], int]:
        """Plan one step; returns ``(scheduled (request, num_new_tokens) in order, preempted, num_admitted)``.

        Mutates the running list, the waiting queue and the KV manager (blocks are taken
        here, as vLLM's ``allocate_slots`` does at schedule time).
        """
        cfg, kv, running = self.cfg, self.kv, self.running
        admitted = self._form_static_batch() if self._static and not running else 0
        budget = cfg.max_num_batched_tokens
        max_len = cfg.max_model_len
        fast_b = self._fast_block_size
        scheduled: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []
        i = 0
        while i < len(running) and budget > 0:
            req = running[i]
            c = req.num_computed_tokens
            n = req.num_tokens - c
            if n > budget:
                n = budget
            if n > max_len - c:
                n = max_len - c
            if n <= 0:
                i += 1
                continue
            if fast_b and (c + n - 1) // fast_b < len(req.blocks) and not req.keys:
                scheduled.append((req, n))  # its blocks already cover these tokens (kv.grow would do nothing)
                budget -= n
                i += 1
                continue
            while not kv.grow(req, n):
                victim = running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is req:
                    break
            else:
                scheduled.append((req, n))
                budget -= n
                i += 1
                continue
            break
        if not preempted and not self._static:
            admitted = self._admit(scheduled, budget)
        return scheduled, preempted, admitted

    def _preempt(self, req: SimRequest) -> None:
        self.kv.free(req, preempted=True)
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        req.status = PREEMPTED
        self.waiting.appendleft(req)

    def _admit(self, scheduled: list[tuple[SimRequest, int]], budget: int) -> int:
        cfg, kv, waiting, running = self.cfg, self.kv, self.waiting, self.running
        if not waiting or budget <= 0:
            return 0
        if self._order is not _order_fcfs:
            self._order(waiting, kv)
        admitted = 0
        while waiting and budget > 0 and len(running) < cfg.max_num_seqs:
            req = waiting[0]
            handle, hit = kv.match(req)
            n = req.num_tokens - hit
            if not cfg.enable_chunked_prefill and n > budget:
                break
            n = min(n, budget)
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

    def _form_static_batch(self) -> int:
        """Static batching: with nothing running, admit up to max_num_seqs waiting requests, each reserving its whole sequence."""
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
