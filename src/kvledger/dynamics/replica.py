"""One simulated engine replica: runs engine steps by vLLM's rule and turns finished requests into records.

The loop is discrete-event and deterministic: time only moves by step durations from the step-cost model; a step is
priced from its aggregate shape (``StepShape``). ``_step`` is the general step (scheduler.py); the steady-decode
shortcuts live in fast_path.py and give bit-identical results (tests compare them with ``fast_forward=False``). Token
times are stored compactly (token_times.py): one end time per engine step, and per request the runs of steps in which
it emitted a token.

With ``async_scheduling`` (vLLM v1's batch queue of two) step k+1 is scheduled when step k starts, from the state with
step k's tokens as placeholders: arrivals are visible up to ``sched_s`` (the start of the step in flight), and
requests that finish in step k keep their blocks and seats until step k+1 is scheduled (``_deferred``)::

    t:     S_k ─────── step k ─────── E_k = S_k+1 ─── step k+1 ───
    sync:              schedule k+1 at E_k (after step k's output)
    async: schedule k+1 at S_k (step k in flight); free step k's finishers after it
"""

from __future__ import annotations

import numpy as np

from kvledger.accounting.step_split import PrefillTime
from kvledger.accounting.stepcost import StepCostModel, StepShape, step_prices
from kvledger.dynamics.async_steps import AsyncSteps
from kvledger.dynamics.batch_rules import BatchRules
from kvledger.dynamics.engine.config import EngineConfig, make_kv_manager
from kvledger.dynamics.engine.kv_interface import KVManager
from kvledger.dynamics.engine.padded_prompts import padded_prompt_shape
from kvledger.dynamics.engine.request_state import FINISHED, SimRequest
from kvledger.dynamics.engine.scheduler import Scheduler
from kvledger.dynamics.fast import chunk_step, fast_path
from kvledger.dynamics.loads_in_flight import LoadsInFlight
from kvledger.dynamics.outputs.batch_peak import BatchPeak
from kvledger.dynamics.outputs.itl_gaps import GapHistogram
from kvledger.dynamics.outputs.steplog import KvUsageTracker, StepLog
from kvledger.dynamics.outputs.token_times import TokenTimes
from kvledger.records import RequestRecord

__all__ = ["Replica"]


class Replica(TokenTimes, BatchPeak, LoadsInFlight, AsyncSteps):
    """One engine: a scheduler, a KV manager, a clock and compact token-time storage.

    Args:
        cfg: engine settings.
        cost: step-cost model.
        index: replica number (for step logs and traces).
        record_steps: keep a per-step log (slower; off for speed runs).
        fast_forward: use pure-decode stretches (turn off only to cross-check them).
        kv_manager: a KV manager to use instead of the one ``cfg`` selects (a disaggregated decode pool's
            ``ReceivedKVManager``, kv_transfer.py); None → ``make_kv_manager(cfg)``.
        record_token_times: give each record its token times (``chunk_times_s``). Without them a record keeps its
            first-token and finish times, and the ITL distribution is kept exactly in ``gaps`` (itl_gaps.py): memory
            then follows the active requests.
    """

    def __init__(self, cfg: EngineConfig, cost: StepCostModel, index: int = 0, *, record_steps: bool = False,
                 fast_forward: bool = True, kv_manager: KVManager | None = None,
                 record_token_times: bool = True) -> None:
        self.cfg, self.cost, self.index = cfg, cost, index
        self.kv = make_kv_manager(cfg) if kv_manager is None else kv_manager
        if cfg.batching == "sglang":  # SGLang's scheduler (and its radix cache): imported for its policy only
            from kvledger.dynamics.engine.sglang_scheduler import SGLangScheduler
        self.sched = SGLangScheduler(cfg, self.kv) if cfg.batching == "sglang" else Scheduler(cfg, self.kv)
        self.fast_forward = fast_forward and self.kv.supports_stretches
        self.prices = step_prices(cost)  # the fast paths' pricing calls (accounting/stepcost.py)
        self.prefill_time = PrefillTime(cost)  # Σ prefill-attributed step time (accounting/step_split.py)
        self._t, self._base = np.empty(4096, dtype=np.float64), 0  # end time of step (base + i), s; _t[0]'s index
        self.record_token_times = record_token_times
        self.gaps = None if record_token_times else GapHistogram()
        self._cnt = None if record_token_times else np.zeros(4096, dtype=np.int32)  # requests with a gap ending at step
        self._gap_runs: list[int] = []  # finished requests' runs of gaps not yet in _cnt: (first step, end step) pairs
        self._prev_t = 0.0  # end time of step (base − 1), s (0.0 before the first step: its gap is never counted)
        self.now_s, self.num_steps, self.num_preemptions = 0.0, 0, 0  # the clock, s; steps run; preemptions
        self.paused_request_s = 0.0  # SGLang: Σ prefill step × running requests past their first token, request-s
        self.decode_step_hint_s = 0.0  # a recent pure-decode step's price, s (sizes the fast path's pricing chunks)
        self.steady = False  # the next steps are pure decode steps of the same batch
        self.ready = False  # every running request is one token behind (decode-ready)
        self.usage = KvUsageTracker(cfg.block_size)
        self.steplog = StepLog(index) if record_steps else None
        self._inserts = self.kv.caches_prefills
        self.rules = BatchRules.of(cfg)
        self._async = cfg.async_scheduling  # the hot loop's copy of rules.async_scheduling
        self._lag = cfg.async_output_proc  # V0's async output processor (async_steps.py): finishers free a step late
        self.fast_forward = self.fast_forward and not self._lag  # the stretches free finishers at once
        self.chunks = chunk_step.eligible(self)  # chunk-continuation steps without the general scheduling loop
        self._deferred: list[SimRequest] = []  # async: finished in the step in flight, blocks not yet freed
        self.init_loads()  # requests loading KV from a lower tier (loads_in_flight.py)
        self.last_start_s: float | None = None  # async: start of the step in flight (None: the queue is empty)
        # a RecordSink that takes finished requests' records field by field (cluster.py, one replica on a known trace,
        # no token times): ``finish`` then returns ``(request, None)`` pairs
        self.sink = None

    @property
    def sched_s(self) -> float:
        """When the next step is scheduled, s: the in-flight step's start (async), else the clock."""
        t = self.last_start_s
        return self.now_s if t is None else t

    def overheld(self) -> bool:
        """A request still holds a prefill chunk's out-of-window blocks (swa_step.py): the next step frees them, so it
        must be a general step (the fast path only ever adds blocks)."""
        rule = self.cfg.step_blocks
        if rule is None:
            return False
        steady, held = rule.steady, self.kv.held_blocks
        return any(held(r) > steady(r.num_computed_tokens + 1) for r in self.sched.running)

    @property
    def has_work(self) -> bool:
        return bool(self.sched.running or self.sched.waiting or self._loads or (self._lag and self._deferred))

    @property
    def num_outstanding(self) -> int:
        """Requests waiting, running or loading KV from a lower tier (their GPU blocks are held), count (what a
        least-loaded router compares)."""
        return len(self.sched.running) + len(self.sched.waiting) + len(self._loads)

    def add(self, req: SimRequest, front: bool = False) -> None:
        """A request arrives (its ``arrival_s`` ≤ the next step's start); ``front``: its KV load is done (vLLM
        schedules those first, ``kv_holding_waiting``)."""
        self.wake(req.arrival_s)
        (self.sched.waiting.appendleft if front else self.sched.waiting.append)(req)
        self.steady = False

    def wake(self, t_s: float) -> None:
        """A request reaches the replica at ``t_s``: an idle one (nothing running or waiting) has processed its last
        step's output (async); one with nothing running or in flight has its clock moved up to ``t_s``."""
        if not (self.sched.running or self.sched.waiting):
            if self._async:
                self.drain()
                self.last_start_s = None
        if not self.sched.running and self.last_start_s is None and self.now_s < t_s:
            self.now_s = t_s  # also one whose queue waits on the loads' reservations (loads_in_flight.py)
        self.blocked = False

    def run_unit(self, bound_s: float, through_finishes: bool = True) -> list[tuple[SimRequest, RequestRecord]]:
        """Run one step, or a steady-decode stretch whose steps all start before ``bound_s``; returns what finished.

        With ``through_finishes`` a stretch goes on past requests that finish, as long as the batch stays steady
        (nothing waits); otherwise it returns at the first finish (closed-loop clients react to it)."""
        bound_s = self.readmit_loaded(bound_s) if self._loads else bound_s  # KV loads in flight: loads_in_flight.py
        sched_s, out = self.sched_s, None
        if self.ready and self.fast_forward and self.sched.running:
            if self.steady and not self._deferred:
                out = fast_path.stretch(self, bound_s, through_finishes)
            elif self.sched.waiting and self.rules.mixed:
                out = fast_path.admit_step(self)
        elif self.chunks and self.sched.running:  # a chunked prefill goes on (fast/chunk_step.py)
            out = chunk_step.chunk_step(self)
        if out is None:
            out = self._step()
        self.after_unit(sched_s, bound_s)
        return out

    def _step(self) -> list[tuple[SimRequest, RequestRecord]]:
        pending = self.begin_step()
        return [] if pending is None else self.end_step(pending, self.cost.step_time_s(pending[0]))

    def begin_step(self) -> tuple | None:
        """Schedule the next step and apply it: (its StepShape, what ``end_step`` needs), or None where it schedules
        nothing (only KV loads in flight; async with nothing to queue). Data-parallel ranks in lock-step
        (dp_lockstep.py) price the ranks' shapes together before each ``end_step``."""
        sched, step = self.sched, self.num_steps
        so = sched.schedule()
        plan, preempted, admitted = so.scheduled, so.preempted, so.num_admitted
        held = self._deferred if self._lag else None  # V0: last step's finishers, decoded once more (async_steps.py)
        freed = self.drain() if self._async or self._lag else False  # async: step k's output is processed after k+1
        if not plan and not held:
            if admitted or self._loads:  # only loads started or in flight (WAITING_FOR_REMOTE_KVS): wait for them
                self.steady, self.waits_for_load = False, not admitted
                return None
            if self._async and (freed or self.last_start_s is not None):
                self.last_start_s = None  # nothing to queue behind the step in flight: wait for it, then schedule
                self.steady = False
                return None
            raise RuntimeError(f"simulator stalled at t={self.now_s:.6f} s: nothing schedulable "
                               f"({len(sched.waiting)} waiting, {len(sched.running)} running)")
        for v in preempted:
            if self._async and v.run_start >= 0:
                self.discard_inflight_token(v, step)
            self._close_run(v, step)
        self.num_preemptions += len(preempted)
        self.note_batch(len(sched.running), preempted, self.now_s)
        finished: list = []
        (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv), stored, all_emitted = self.apply_plan(plan, step, finished)
        if self.rules.padded and pf_seqs:
            pf_tok, pf_kv, pairs = padded_prompt_shape(plan)
        if held and not pf_seqs:
            extra, extra_kv = self.held_decodes(held)
            dec, dec_kv = dec + extra, dec_kv + extra_kv
        shape = StepShape(pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv)
        return shape, step, plan, preempted, admitted, finished, stored, all_emitted, freed

    def end_step(self, pending: tuple, dur: float) -> list[tuple[SimRequest, RequestRecord]]:
        """Finish the step ``begin_step`` scheduled, ``dur`` s long: the clock, token times, KV usage, step log and the
        requests it finished (their records)."""
        shape, step, plan, preempted, admitted, finished, stored, all_emitted, freed = pending
        sched, dec = self.sched, shape.num_decode_seqs
        if shape.num_prefill_seqs:
            self.prefill_time.add(shape.num_prefill_tokens, shape.num_prefill_seqs, shape.prefill_kv_tokens,
                                  shape.prefill_attn_pairs, dec, shape.decode_kv_tokens, dur)
        start = self.now_s
        self.now_s = end = start + dur
        self.push_times(end)
        used = self.kv.num_used_blocks
        running = sched.running
        everyone = len(plan) == len(running)
        if not everyone:  # an SGLang prefill step (no decode) pauses the running requests it left out
            stored += self._skipped(plan, step, dur if dec == 0 and self.rules.pauses_decodes else 0.0)
        self.usage.add(start, dur, used, self.kv.capacity_blocks, stored, self.kv.held_slots)
        if self.steplog is not None:
            self.steplog.add(step, start, dur, shape, used / self.kv.capacity_blocks, len(running),
                             len(sched.waiting), [(r.spec.request_id, n) for r, n in plan])
        out = self.settle_finished(finished, start)
        if finished:
            sched.running = [r for r in sched.running if r.status != FINISHED]
        self.ready = (everyone or self._paused_ready()) and all_emitted and not preempted and not self.overheld()
        self.steady = self.next_is_steady(preempted, admitted, finished or freed, self.ready, dec == len(plan))
        return out

    def _paused_ready(self) -> bool:
        """SGLang's prefill step left running requests out (``rules.pauses_decodes``): all are decode-ready when each
        is one token behind (none mid-prompt). Their token runs broke there; a stretch restarts them."""
        return self.rules.pauses_decodes and all(r.num_computed_tokens == r.num_tokens - 1 for r in self.sched.running)

    def apply_plan(self, plan: list, step: int, finished: list) -> tuple[tuple, int, bool]:
        """Price each scheduled (request, tokens) from its state before the step, then apply it. A 1-token run of a
        request whose output has started is a decode, anything else a prefill chunk. After every prefill chunk, the
        last included, a radix cache inserts what the request computed (SGLang 0.5.23 ``checkpoint_kv_cache``: from
        ``batch_result_processor.py : process_batch_result_prefill`` once the prompt is done, from ``scheduler.py :
        get_next_batch_to_run``'s ``stash_chunked_request`` after a middle chunk), so a request admitted next step
        matches it while this one still runs. Appends finishing requests to ``finished``; returns (StepShape fields,
        computed tokens stored, whether every scheduled request emitted a token)."""
        pf_tok = pf_seqs = pf_kv = dec = dec_kv = stored = 0
        pairs, all_emitted = 0.0, True
        for req, n in plan:
            c = req.num_computed_tokens
            if n == 1 and req.num_generated and c == req.num_tokens - 1:  # a decode: its token samples the next
                dec, dec_kv, c = dec + 1, dec_kv + c + 1, c + 1
                req.num_computed_tokens, req.num_tokens = c, c + 1
                stored += c
                if req.run_start < 0:
                    req.run_start = step
                req.num_generated = g = req.num_generated + 1
                if g == req.num_output_tokens:
                    finished.append((req, step))
                continue
            pf_tok, pf_seqs, pf_kv = pf_tok + n, pf_seqs + 1, pf_kv + c + n  # a prefill chunk
            pairs += n * c + n * (n + 1) / 2
            c += n
            req.num_computed_tokens = c
            stored += c
            if c == req.num_tokens:
                if req.run_start < 0:
                    req.run_start = step
                req.num_generated += 1
                req.num_tokens = c + 1
                if req.num_generated == req.num_output_tokens:
                    finished.append((req, step))
                    continue  # its free (SGLang release_kv_cache) inserts what it computed
            else:
                all_emitted = False
            if self._inserts and req.spec.prefix_segments:  # each prefill chunk, the last one too
                self.kv.after_prefill_step(req)
        return (pf_tok, pf_seqs, pf_kv, pairs, dec, dec_kv), stored, all_emitted

    def _skipped(self, plan: list, step: int, pause_s: float = 0.0) -> int:
        """Running requests the budget left out of this step: their token runs break; those past their first token
        wait out ``pause_s`` (an SGLang prefill step's duration, else 0) each, in ``paused_request_s``. Returns their
        computed tokens."""
        scheduled = {id(r) for r, _ in plan}
        stored = waited = 0
        for r in self.sched.running:
            if id(r) not in scheduled:
                stored += r.num_computed_tokens
                waited += r.num_generated > 0
                if r.run_start >= 0:
                    self._close_run(r, step)
        self.paused_request_s += pause_s * waited  # 0 but under SGLang's rule
        return stored

    def next_is_steady(self, preempted: list, admitted: int, finished, all_ready: bool, pure_decode: bool) -> bool:
        """True when the next steps are pure decode steps of the same batch until something finishes or arrives.

        That needs every running request to be one token behind (``computed = num_tokens − 1``, true when all were
        scheduled and all sampled a token), all of them to fit the budget, and nobody admissible: the waiting queue is
        empty, or static batching holds it, or this very step was a pure decode step whose admission attempt failed
        and freed nothing (free blocks only shrink while decoding, so it keeps failing; with 'lpm' the queue order may
        change, so not then). ``finished``: truthy when the step freed or will free blocks (async: also the previous
        step's finishers, freed after this schedule)."""
        sched = self.sched
        if preempted or not all_ready or not sched.running or len(sched.running) > self.cfg.max_num_batched_tokens:
            return False
        if not sched.waiting or self.rules.static:
            return True
        if self.cfg.batching == "sglang":  # its admission budget moves every decode step (new_token_ratio)
            return False
        return pure_decode and not admitted and not finished and self.cfg.scheduling_policy != "lpm"
