"""vLLM's engine loop under pipeline parallelism on its V2 model runner with async scheduling (default for every model
from 0.29, for some from 0.22):
up to P + 1 scheduler outputs in flight, each request's decodes P scheduler steps apart, the sampled tokens passed
back to the stages before the last on a ring P steps deep.

Read in vLLM 0.23.0, 0.24.0, 0.25.0, 0.29.0, 0.31.0 and 0.33.0 (the same rule in each; the releases between them
assumed the same; 0.22.0's V2 runner broadcasts each batch's tokens in ``sample_tokens``, ``pp_utils.pp_receive``,
with no stagger: not this loop, refused in ``sim_pp``):

* ``config/vllm.py : VllmConfig.max_concurrent_batches``: with async scheduling on the V2 runner the batch queue holds
  ``pipeline_parallel_size + 1`` outputs.
* ``v1/engine/core.py : EngineCore.step_with_batch_queue``: while the scheduler has requests each call schedules (an
  empty schedule too: its placeholder enters the queue) and returns at once while the queue is not full; when it is,
  it blocks on the oldest output and ``update_from_output`` processes it. Outputs come back in order, so an empty
  schedule's is ready with the one before it.
* ``v1/core/sched/scheduler.py : Scheduler.schedule`` advances ``current_step`` on every call, empty ones included;
  ``v1/core/sched/async_scheduler.py : AsyncScheduler._update_after_schedule`` sets a request whose batch samples a
  token (a decode, or a prompt's last chunk; not a middle chunk, whose next chunk may follow at once) eligible again at
  ``current_step + decode_stagger`` (``decode_stagger`` = ``pipeline_parallel_size`` on CUDA and ROCm), and
  ``schedule`` skips it before then ("V2+PP+async: enforce pp_size steps between same-req decodes"). It is scheduled
  again with its token as a placeholder (``num_output_placeholders``) before that token's output returns; the
  "reached max_tokens" check keeps a request whose last token is in flight out of the schedule.
* ``v1/worker/gpu/pp_utils.py : PPHandler`` (and ``model_runner.py : execute_model`` → ``update_pp_decode_requests``,
  ``sample_tokens``): the last stage broadcasts each batch's sampled tokens; every stage before it, at each
  ``execute_model`` call (empty ones included), takes the entry of the call P before from its ring (``deque`` of
  ``world_size`` slots) and its main stream waits for that broadcast (``wait_event``) before its next work. So stage
  j < P − 1 starts call m's work no earlier than the last stage's end of call m − P (when that batch had rows whose
  tokens a later decode needs: ``compute_need_sampled_mask``, which leaves out a 1-token request's prompt).

Here: each call (``try_schedule``) first releases the requests due at it, lets the stages before the last wait for
call m − P's end, then schedules as ``PipelineReplica`` does (stages in order, sends between them, the binding stage's
pool); a scheduled token is held back from the scheduler until its request is due. Not modelled: the broadcast's own
time (a few bytes a request), the ring entry dropped for requests freed in between (``gen_at_receive``), and 0.33's
delivery of a preempted request's in-flight tokens (``_preempt_request``: ``num_stale_output_tokens``): as in the V1
loop, they are dropped and recomputed. Deterministic: time moves by step costs only.
"""

from __future__ import annotations

from collections import deque

from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.pipeline import InFlightBatch, PipelineReplica

__all__ = ["StaggeredReplica"]


class StaggeredReplica(PipelineReplica):
    """One vLLM engine of ``cost.pp`` stages on the V2 model runner with async scheduling (module doc)."""

    def __init__(self, cfg, cost, index: int = 0, **kw) -> None:
        super().__init__(cfg, cost, index, **kw)
        self.queue_size = cost.pp + 1  # max_concurrent_batches: pipeline_parallel_size + 1
        self.queue: deque[InFlightBatch | None] = deque()  # the batch queue, oldest first; None: an empty schedule
        self.call = 0  # the scheduler's current_step (every schedule() call)
        self.num_empty_calls = 0
        self._due: deque[tuple[int, SimRequest, int]] = deque()  # (call it may decode again, request, preemptions)
        self._fly: dict[int, int] = {}  # id(request) → its tokens in batches not yet output
        self._ring: dict[int, float] = {}  # call → its last stage's end, s (a batch whose tokens a decode needs)

    @property
    def busy(self) -> bool:
        return bool(self.queue)

    def try_schedule(self, t_s: float) -> bool:
        """One ``schedule()`` call at ``t_s`` (empty or not) queued; True while the queue has room (the engine schedules
        again at once), False when it must block on the oldest output (or has no requests).

        Raises:
            RuntimeError: a full queue of empty schedules (nothing in flight, nothing schedulable).
        """
        if not (self.sched.running or self.sched.waiting):
            return False
        self.call = m = self.call + 1
        self._release(m)
        ring = self._ring.pop(m - self.pp, 0.0)
        free = self.stage_free_s
        for j in range(self.pp - 1):  # get_prev_sampled_outputs: wait for call m − P's sampled tokens
            free[j] = max(free[j], ring)
        b = self.schedule_batch(t_s)
        if b is None:
            self.num_empty_calls += 1
        elif any(r.num_output_tokens > 1 for r in b.held):
            self._ring[m] = b.end_s
        self.queue.append(b)
        if len(self.queue) < self.queue_size:
            return True
        if all(x is None for x in self.queue):
            raise RuntimeError(f"simulator stalled at t={t_s:.6f} s: nothing schedulable "
                               f"({len(self.sched.waiting)} waiting, {len(self.sched.running)} running)")
        return False

    def pop_output(self) -> tuple[float, list]:
        """Block on the oldest output: (when it is ready, s; the records of the requests it finished). An empty
        schedule's output is ready with the one before it."""
        b = self.queue.popleft()
        return (self.now_s, []) if b is None else (b.end_s, self.complete(b))

    def _release(self, m: int) -> None:
        """Requests due at call ``m`` (``next_decode_eligible_step``) are schedulable again: their token in flight
        counts as a placeholder."""
        due = self._due
        while due and due[0][0] <= m:
            _, r, stamp = due.popleft()
            if r.num_preemptions == stamp and self._held.pop(id(r), None) is not None:
                r.num_tokens += 1

    def _hold(self, held: list[SimRequest], step: int) -> None:
        """The requests that sampled a token in batch ``step`` wait ``decode_stagger`` = P calls; one whose last token
        this is waits for the batch's output (the max_tokens check), then finishes."""
        due, fly, m = self._due, self._fly, self.call + self.pp
        for r in held:
            r.num_tokens -= 1
            self._held[id(r)] = step
            fly[id(r)] = fly.get(id(r), 0) + 1
            if r.num_generated < r.num_output_tokens:
                due.append((m, r, r.num_preemptions))

    def _on_output(self, b: InFlightBatch) -> None:
        """Batch ``b``'s output returned: its tokens leave the flight; a request's last token is appended."""
        fly, held = self._fly, self._held
        for r, stamp in zip(b.held, b.stamps):
            if r.num_preemptions != stamp:
                continue
            n = fly.pop(id(r), 1) - 1
            if n:
                fly[id(r)] = n
            if r.num_generated == r.num_output_tokens and held.get(id(r)) == b.step:
                del held[id(r)]
                r.num_tokens += 1

    def _discard(self, req: SimRequest) -> None:
        """``req`` was preempted: its tokens in flight (up to two: a batch output pending and the one P calls later)
        are dropped and recomputed, and the runs of steps that emitted them trimmed."""
        k = self._fly.pop(id(req), 0)
        self._held.pop(id(req), None)
        if not k:
            return
        req.num_generated -= k
        req.num_tokens = req.num_prompt_tokens + req.num_generated
        runs = req.runs
        while k and runs:
            a, e = runs[-1]
            take = min(k, e - a)
            k -= take
            runs[-1:] = [] if take == e - a else [(a, e - take)]
