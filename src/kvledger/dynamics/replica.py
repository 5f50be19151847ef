"""One simulated engine replica: executes steps (or whole pure-decode stretches at once) and turns finished requests into records.

The loop is discrete-event and deterministic: time only moves by step durations from the
step-cost model. A step is priced from its aggregate shape (``StepShape``). When the
batch is in a *steady decode* state (every running request decoded one token last step,
nobody was admitted or preempted, and nobody can be admitted until something finishes),
the following steps differ only in KV lengths, so the replica prices ``k`` of them with
one vectorised ``decode_steps_s`` call and applies them at once. ``k`` stops at the first
completion, the next arrival (the caller's ``bound_s``) and the last step whose blocks
fit; the result is identical to stepping one at a time (tests check this), including
block ids, because blocks are handed out in the same (step, running order) order.
"""

from __future__ import annotations

import numpy as np

from kvledger.accounting.stepcost import StepCostModel, StepShape
from kvledger.dynamics.engine_config import EngineConfig, make_kv_manager
from kvledger.dynamics.request_state import FINISHED, SimRequest
from kvledger.dynamics.scheduler import Scheduler
from kvledger.dynamics.steplog import KvUsageTracker, StepLog
from kvledger.records import RequestRecord

__all__ = ["Replica", "MAX_STRETCH_STEPS"]

MAX_STRETCH_STEPS = 2048  # longest stretch priced in one call, steps (bounds temporary arrays)


class Replica:
    """One engine: a scheduler, a KV manager, a clock and compact token-time storage.

    Args:
        cfg: engine settings.
        cost: step-cost model.
        index: replica number (for step logs and traces).
        record_steps: keep a per-step log (slower; off for speed runs).
        fast_forward: use pure-decode stretches (turn off only to cross-check them).
    """

    def __init__(self, cfg: EngineConfig, cost: StepCostModel, index: int = 0, *, record_steps: bool = False,
                 fast_forward: bool = True) -> None:
        self.cfg, self.cost, self.index = cfg, cost, index
        self.kv = make_kv_manager(cfg)
        self.sched = Scheduler(cfg, self.kv)
        self.now_s = 0.0
        self.fast_forward = fast_forward
        self._t = np.empty(4096, dtype=np.float64)  # end time of step (base + i), s
        self._scratch = np.empty(MAX_STRETCH_STEPS + 1, dtype=np.float64)
        self._base = 0  # global index of self._t[0]
        self.num_steps = 0
        self.num_preemptions = 0
        self.steady = False
        self.usage = KvUsageTracker(cfg.block_size)
        self.steplog = StepLog(index) if record_steps else None
        self._inserts = hasattr(self.kv, "after_prefill_step")
        self._static = cfg.batching == "static"

    @property
    def has_work(self) -> bool:
        return bool(self.sched.running or self.sched.waiting)

    @property
    def num_outstanding(self) -> int:
        """Requests waiting or running, count (what a least-loaded router compares)."""
        return len(self.sched.running) + len(self.sched.waiting)

    def add(self, req: SimRequest) -> None:
        """A request arrives (its ``arrival_s`` ≤ the next step's start)."""
        if not self.has_work and self.now_s < req.arrival_s:
            self.now_s = req.arrival_s
        self.sched.waiting.append(req)
        self.steady = False

    def run_unit(self, bound_s: float, through_finishes: bool = True) -> list[tuple[SimRequest, RequestRecord]]:
        """Run one step, or a steady-decode stretch whose steps all start before ``bound_s``; returns what finished.

        With ``through_finishes`` a stretch goes on past requests that finish, as long as
        the batch stays steady (nothing waits); otherwise it returns at the first finish
        (closed-loop clients react to it).
        """
        if self.steady and self.fast_forward and self.sched.running:
            out = self._stretch(bound_s, through_finishes)
            if out is not None:
                return out
        return self._step()

    # ------------------------------------------------------------ one step
    def _step(self) -> list[tuple[SimRequest, RequestRecord]]:
        sched, step = self.sched, self.num_steps
        plan, preempted, admitted = sched.schedule()
        if not plan:
            raise RuntimeError(f"simulator stalled at t={self.now_s:.6f} s: nothing schedulable "
                               f"({len(sched.waiting)} waiting, {len(sched.running)} running)")
        for v in preempted:
            self._close_run(v, step)
        self.num_preemptions += len(preempted)
        pf_tok = pf_seqs = pf_kv = dec = dec_kv = 0
        pairs = 0.0
        for req, n in plan:
            c = req.num_computed_tokens
            if n == 1 and req.num_generated and c == req.num_tokens - 1:
                dec += 1
                dec_kv += c + 1
            else:
                pf_tok += n
                pf_seqs += 1
                pf_kv += c + n
                pairs += n * c + n * (n + 1) / 2
        shape = StepShape(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)
        dur = self.cost.step_time_s(shape)
        start, end = self.now_s, self.now_s + dur
        self._push_times(end)
        used = self.kv.num_used_blocks
        stored = 0
        finished = []
        for req, n in plan:
            c = req.num_computed_tokens + n
            req.num_computed_tokens = c
            stored += c
            if c == req.num_tokens:
                if req.run_start < 0:
                    req.run_start = step
                req.num_generated += 1
                req.num_tokens = c + 1
                if req.num_generated == req.num_output_tokens:
                    finished.append(req)
            elif self._inserts and req.spec.prefix_segments:
                self.kv.after_prefill_step(req)
        running = sched.running
        if len(plan) < len(running):
            scheduled = {id(r) for r, _ in plan}
            for r in running:
                if id(r) not in scheduled:
                    stored += r.num_computed_tokens
                    if r.run_start >= 0:
                        self._close_run(r, step)
        self.usage.add(start, dur, used, self.kv.capacity_blocks, stored)
        if self.steplog is not None:
            self.steplog.add(step, start, dur, shape, used / self.kv.capacity_blocks, len(running),
                             len(sched.waiting), [(r.spec.request_id, n) for r, n in plan])
        self.now_s = end
        out = self._finish(finished, step) if finished else []
        self.steady = self._next_is_steady(preempted, admitted, finished, dec == len(plan) == len(running))
        return out

    def _next_is_steady(self, preempted: list, admitted: int, finished: list, pure_decode: bool) -> bool:
        """True when the next steps are pure decode steps of the same batch until something finishes or arrives.

        That needs every running request to be one token behind (``computed = num_tokens − 1``),
        all of them to fit the budget, and nobody admissible: the waiting queue is empty, or
        static batching holds it, or this very step was a pure decode step whose admission
        attempt failed and freed nothing (free blocks only shrink while decoding, so it keeps
        failing; with 'lpm' the queue order may change, so not then).
        """
        sched = self.sched
        running = sched.running
        if preempted or not running or len(running) > self.cfg.max_num_batched_tokens:
            return False
        for r in running:
            if r.num_computed_tokens != r.num_tokens - 1:
                return False
        if not sched.waiting or self._static:
            return True
        return pure_decode and not admitted and not finished and self.cfg.scheduling_policy != "lpm"

    # -------------------------------------------------- a pure-decode stretch
    def _stretch(self, bound_s: float, through: bool) -> list[tuple[SimRequest, RequestRecord]] | None:
        """Steady decode steps until ``bound_s``, the first finish (going through: past finishes), or the blocks run out.

        Segment by segment: each runs to the next finish with its own batch, priced by one
        ``decode_steps_s`` call; end times are sequential sums, the same floats step-by-step
        execution produces.
        """
        sched, kv, cost = self.sched, self.kv, self.cost
        out: list[tuple[SimRequest, RequestRecord]] = []
        ran = False
        while True:
            running = sched.running
            n = len(running)
            k = min([r.num_output_tokens - r.num_generated for r in running])
            if k > MAX_STRETCH_STEPS:
                k = MAX_STRETCH_STEPS
            durs = cost.decode_steps_s(n, sum([r.num_computed_tokens for r in running]) + n, k)
            ends = self._scratch[: k + 1]
            ends[0] = self.now_s
            ends[1:] = durs
            ends.cumsum(out=ends)
            if k > 1 and ends[k - 1] >= bound_s:
                k = int(ends[1:k].searchsorted(bound_s)) + 1
            k = kv.stretch_limit(running, k)
            if k == 0:
                return out if ran else None
            ran = True
            self._apply_segment(running, k, ends, durs)
            finished = [r for r in running if r.num_generated == r.num_output_tokens]
            if not finished:
                return out
            out.extend(self._finish(finished, self.num_steps - 1))
            if sched.waiting and not self._static:
                self.steady = False
                return out
            if not through or not sched.running or self.now_s >= bound_s:
                return out

    def _apply_segment(self, running: list[SimRequest], k: int, ends: np.ndarray, durs: np.ndarray) -> None:
        """Apply ``k`` steady decode steps: blocks, token counts, times, usage and the step log."""
        kv = self.kv
        n = len(running)
        stored0 = sum([r.num_computed_tokens for r in running])
        used0 = kv.num_used_blocks
        kv.stretch_commit(running, k)
        step0 = self.num_steps
        self._push_times(ends[1: k + 1])
        for r in running:
            r.num_computed_tokens += k
            r.num_generated += k
            r.num_tokens += k
        start = float(ends[0])
        self.now_s = end = float(ends[k])
        used1 = kv.num_used_blocks
        self.usage.add_stretch(start, end - start, k, used0, used1, kv.capacity_blocks, stored0, n)
        if self.steplog is not None:
            self.steplog.add_stretch(step0, start, durs[:k], n, used1 / kv.capacity_blocks, n,
                                     len(self.sched.waiting), [(r.spec.request_id, 1) for r in running])

    # ---------------------------------------------------- token-time storage
    def _push_times(self, t) -> None:
        """Append step end times (a float or an array), s."""
        if isinstance(t, float):
            i = self.num_steps - self._base
            if i >= len(self._t):
                self._compact(1)
                i = self.num_steps - self._base
            self._t[i] = t
            self.num_steps += 1
            return
        m = len(t)
        i = self.num_steps - self._base
        if i + m > len(self._t):
            self._compact(m)
            i = self.num_steps - self._base
        self._t[i: i + m] = t
        self.num_steps += m

    def _compact(self, m: int) -> None:
        """Drop step times no active request still needs; grow the buffer if that is not enough."""
        active = list(self.sched.running) + list(self.sched.waiting)
        starts = [r.runs[0][0] if r.runs else r.run_start for r in active if r.runs or r.run_start >= 0]
        keep_from = min(starts, default=self.num_steps)
        drop = keep_from - self._base
        live = self.num_steps - keep_from
        size = len(self._t)
        if live + m > size // 2:
            size = max(2 * size, 2 * (live + m))
        buf = np.empty(size, dtype=np.float64)
        buf[:live] = self._t[drop: drop + live]
        self._t, self._base = buf, keep_from

    def _close_run(self, req: SimRequest, step: int) -> None:
        if req.run_start >= 0:
            req.runs.append((req.run_start, step))
            req.run_start = -1

    def _finish(self, finished: list[SimRequest], step: int) -> list[tuple[SimRequest, RequestRecord]]:
        base, out = self._base, []
        for req in finished:
            self._close_run(req, step + 1)
            if len(req.runs) == 1:
                a, b = req.runs[0]
                times = self._t[a - base: b - base].copy()
            else:
                times = np.concatenate([self._t[a - base: b - base] for a, b in req.runs])
            times.setflags(write=False)
            req.status = FINISHED
            self.kv.free(req, preempted=False)
            spec = req.spec
            rec = RequestRecord(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, spec.num_output_tokens,
                                first_token_s=float(times[0]), finish_s=float(times[-1]), chunk_times_s=times,
                                num_cached_tokens=req.num_cached_tokens, num_preemptions=req.num_preemptions)
            out.append((req, rec))
        self.sched.running = [r for r in self.sched.running if r.status != FINISHED]
        return out
