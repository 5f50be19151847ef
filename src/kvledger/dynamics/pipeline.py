"""vLLM's engine loop under pipeline parallelism (``--pp P`` without async scheduling): up to P batches in flight, one
per stage, each request in at most one of them.

Read in vLLM 0.19.0 and 0.33.0:

* ``v1/engine/core.py : EngineCore.step_with_batch_queue``: the batch queue holds ``max_concurrent_batches`` batches
  (``executor/multiproc_executor.py : max_concurrent_batches`` in 0.19, ``config/vllm.py :
  VllmConfig.max_concurrent_batches`` in 0.33: ``pipeline_parallel_size``). Each call schedules a batch first; when it
  scheduled tokens and the queue is not full, it returns and schedules again at once; otherwise it blocks on the
  oldest batch's output, then ``Scheduler.update_from_output`` appends the sampled tokens and frees the finished.
  Requests that arrive while it blocks are scheduled after that output (the busy loop reads its input queue between
  steps). An empty schedule's placeholder in the queue is popped at once after the batch ahead of it: not modelled.
* ``v1/core/sched/scheduler.py : Scheduler.schedule``: ``_update_after_schedule`` advances ``num_computed_tokens`` when
  a batch is scheduled, so a request whose token is in flight has ``num_new_tokens == 0`` and is skipped ("PP>1 and we
  have already scheduled all prompt tokens but they are not finished yet") until its output appends the token; a
  prompt's next chunk can be scheduled while the chunk before is in flight (pipelined chunked prefill). Here a sampled
  token is held back (``num_tokens`` one short) from the schedule to the batch's output.
* Stages in order (``v1/worker/gpu_worker.py : execute_model``: ``irecv_tensor_dict`` from the stage before, a
  non-blocking send to the next): batch b starts stage j when stage j is free and b's tensors arrived from stage
  j − 1, a flow shop (``PipelineStepCost.stage_times_s`` and ``send_s`` price it); its output is ready when the last
  stage ends.

A request preempted while its token is in flight loses that token (as the async replica's ``discard_inflight_token``).
Deterministic: time moves by step costs only. The fast paths (fast/, the C core) step one batch at a time and are not
used: every batch is a general schedule.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from kvledger.accounting.stepcost import StepShape
from kvledger.dynamics.cluster import Arrivals
from kvledger.dynamics.engine.request_state import FINISHED, SimRequest, admit_due
from kvledger.dynamics.replica import Replica

__all__ = ["PipelineReplica", "InFlightBatch", "run_pipeline", "pipeline_facts"]


class InFlightBatch:
    """A batch in flight: when it entered stage 0 and leaves the last stage, s; what ``complete`` needs."""

    __slots__ = ("step", "start_s", "end_s", "shape", "finished", "held", "stamps", "stored", "compute_s")

    def __init__(self, step, start_s, end_s, shape, finished, held, stored, compute_s) -> None:
        self.step, self.start_s, self.end_s, self.shape = step, start_s, end_s, shape
        self.finished, self.held, self.stored, self.compute_s = finished, held, stored, compute_s
        self.stamps = [r.num_preemptions for r in held]


class PipelineReplica(Replica):
    """One vLLM engine of ``cost.pp`` stages (a ``PipelineStepCost``) with its batch queue (module doc)."""

    def __init__(self, cfg, cost, index: int = 0, **kw) -> None:
        super().__init__(cfg, cost, index, fast_forward=False, **kw)
        self.chunks = False  # no chunk-continuation shortcut: every batch is a general schedule
        self.pp = self.queue_size = cost.pp  # the batch queue: max_concurrent_batches = pipeline_parallel_size
        self.stage_free_s = [0.0] * cost.pp  # when each stage finishes the batches it holds, s
        self.flight: deque[InFlightBatch] = deque()  # oldest first
        self._held: dict[int, int] = {}  # id(request) → the step whose token it waits for
        self._mark_s = 0.0  # the busy time counted so far ends here, s
        self.stage_busy_s = 0.0  # Σ over batches and stages of compute, s

    @property
    def busy(self) -> bool:
        """A batch is in flight (the engine can block on its output)."""
        return bool(self.flight)

    def try_schedule(self, t_s: float) -> bool:
        """One pass of ``step_with_batch_queue``'s scheduling half at ``t_s``: True when it queued a batch (the engine
        then schedules again at once), False when it must block on the oldest output (queue full, nothing to do)."""
        if len(self.flight) < self.pp and (self.sched.running or self.sched.waiting):
            b = self.schedule_batch(t_s)
            if b is not None:
                self.flight.append(b)
                return True
        return False

    def pop_output(self) -> tuple[float, list]:
        """Block on the oldest batch: (when its output is ready, s; the records of the requests it finished)."""
        b = self.flight.popleft()
        return b.end_s, self.complete(b)

    def schedule_batch(self, t_s: float) -> InFlightBatch | None:
        """Schedule one batch at ``t_s`` and price it through the stages; None when it scheduled no token."""
        sched, step = self.sched, self.num_steps
        so = sched.schedule()
        plan, preempted = so.scheduled, so.preempted
        for v in preempted:
            self._close_run(v, step)
            self._discard(v)
        self.num_preemptions += len(preempted)
        self.note_batch(len(sched.running), preempted, t_s)
        if not plan:
            return None
        before = [r.num_generated for r, _ in plan]
        finished: list = []
        fields, stored, _ = self.apply_plan(plan, step, finished)
        if len(plan) != len(sched.running):
            stored += self._skipped(plan, step)
        held = [r for (r, _), g in zip(plan, before) if r.num_generated > g]
        self._hold(held, step)
        shape = StepShape(*fields)
        start, end, compute = self._through_stages(t_s, shape)
        self.push_times(end)
        if self.steplog is not None:
            self.steplog.add(step, start, end - start, shape, self.kv.num_used_blocks / self.kv.capacity_blocks,
                             len(sched.running), len(sched.waiting), [(r.spec.request_id, n) for r, n in plan])
        self.steady = self.ready = False
        return InFlightBatch(step, start, end, shape, finished, held, stored, compute)

    def _hold(self, held: list[SimRequest], step: int) -> None:
        """The requests that sampled a token in batch ``step``: the token is appended when the batch's output returns
        (module doc), so the scheduler skips them until then."""
        for r in held:
            r.num_tokens -= 1
            self._held[id(r)] = step

    def _through_stages(self, t_s: float, shape: StepShape) -> tuple[float, float, float]:
        """(when the batch enters stage 0, when it leaves the last stage, its compute over all stages), s."""
        cost, free = self.cost, self.stage_free_s
        times = cost.stage_times_s(shape)
        start = end = max(t_s, free[0])
        for j, t in enumerate(times):
            if j:
                end = max(end + cost.send_s(shape.num_tokens, j - 1), free[j])
            end = free[j] = end + t
        self.stage_busy_s += sum(times)
        return start, end, sum(times)

    def _discard(self, req: SimRequest) -> None:
        """``req`` was preempted: the token it waits for, if any, is dropped (its run's last step with it)."""
        step = self._held.pop(id(req), None)
        if step is None:
            return
        req.num_generated -= 1
        if req.runs and req.runs[-1][1] == step + 1:
            a, _ = req.runs[-1]
            req.runs[-1:] = [] if a == step else [(a, step)]

    def _on_output(self, b: InFlightBatch) -> None:
        """Batch ``b``'s output returned: the tokens it sampled are appended (those of requests not preempted since)."""
        for r, stamp in zip(b.held, b.stamps):
            if r.num_preemptions == stamp:
                r.num_tokens += 1
                self._held.pop(id(r), None)

    def complete(self, b: InFlightBatch) -> list:
        """Batch ``b``'s output (the oldest in flight): its tokens appended, its finished requests' records (blocks
        freed)."""
        self._on_output(b)
        done = [(r, s) for r, s in b.finished if r.status != FINISHED and id(r) not in self._held
                and r.num_generated == r.num_output_tokens]
        start = max(self._mark_s, b.start_s)
        dur, self._mark_s = b.end_s - start, b.end_s
        sh = b.shape
        if sh.num_prefill_seqs:
            self.prefill_time.add(sh.num_prefill_tokens, sh.num_prefill_seqs, sh.prefill_kv_tokens,
                                  sh.prefill_attn_pairs, sh.num_decode_seqs, sh.decode_kv_tokens, dur)
        self.usage.add(start, dur, self.kv.num_used_blocks, self.kv.capacity_blocks, b.stored, self.kv.held_slots)
        out = self.finish(done) if done else []
        if done:
            self.sched.running = [r for r in self.sched.running if r.status != FINISHED]
        self.now_s = max(self.now_s, b.end_s)
        return out


def run_pipeline(source, rep: PipelineReplica, progress: Callable[[int, int], None] | None = None,
                 stop: Any = None) -> list:
    """Serve ``source`` (an open-loop list or columns, or a closed loop) on one pipelined engine (module doc); the
    records in arrival order, one per uid from 0. ``stop`` (an open loop's ``early_stop.MissRule``): end once it
    decides the run misses its target, as ``cluster.run_cluster`` does (checked after each batch's output)."""
    arr, out, users, uid, clock = Arrivals(source), [], {}, 0, 0.0
    stop = None if arr.closed is not None else stop
    if stop is not None:
        stop.num_requests = arr.total if stop.num_requests is None else stop.num_requests
        stop.check_every = max(1, arr.total // 100) if stop.check_every is None else stop.check_every
    think = arr.closed.think_time_s if arr.closed else 0.0
    cfg, tick = rep.cfg, max(1, arr.total // 200)
    while True:
        if not rep.has_work and not rep.busy:
            t = arr.next_time()
            if t == math.inf:
                break
            clock = max(clock, t)
        admitted, uid = admit_due(arr, clock, uid, cfg, think, out)
        for u, user, req in admitted:
            users[u] = user
            rep.add(req)
        rep.now_s = clock
        if rep.try_schedule(clock):
            continue  # a batch queued and the queue not full: schedule again at once
        if not rep.busy:
            if rep.has_work:
                raise RuntimeError(f"simulator stalled at t={clock:.6f} s: nothing schedulable "
                                   f"({len(rep.sched.waiting)} waiting, {len(rep.sched.running)} running)")
            continue
        end_s, finished = rep.pop_output()
        clock = max(clock, end_s)
        for req, rec in finished:
            out.append((req.uid, rec))
            if (user := users.pop(req.uid, -1)) >= 0:
                arr.send(rec.finish_s + think, user)
        if progress is not None and len(out) % tick == 0:
            progress(len(out), arr.total)
        if stop is not None and stop.due(len(out)) and stop.decided([rep], out):
            done = {i for i, _ in out}
            out.extend((i, stop.record(arr.open_spec(i))) for i in range(arr.total) if i not in done)
            break
    out.sort(key=lambda x: x[0])
    return [rec for _, rec in out]


def pipeline_facts(rep: Replica) -> dict:
    """``{"pipeline": the run's figures}`` for a pipelined engine ({} for another): stages, and how full they were
    (Σ stage compute / (stages × busy time))."""
    if not isinstance(rep, PipelineReplica):
        return {}
    busy = rep.usage.busy_s
    return {"pipeline": {"pipeline_parallel_size": rep.pp, "batches_in_flight_max": rep.queue_size,
                         "stage_busy_share": rep.stage_busy_s / (rep.pp * busy) if busy > 0 else 0.0}}
