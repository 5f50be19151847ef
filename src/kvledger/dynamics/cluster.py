"""The event loop over replicas: delivers arrivals in time order, routes them, and advances the replica whose clock is
behind.

Time discipline (conservative discrete-event simulation): an arrival at time ``t`` is delivered once every busy
replica's clock has reached ``t``, so the router sees each replica's state as of ``t`` and a replica admits it at its
first step starting at or after ``t`` (a request that arrives during a step waits for the next one, as in vLLM's engine
loop; with async scheduling, for the one after: a replica's scheduling clock is ``Replica.sched_s``). A replica is
advanced only with steps that start before the next known arrival. In closed-loop mode with several replicas, a finish
on one replica can create an arrival for another, and the next unsent request goes to whichever user's request finished
first in processing order, so a replica runs no step scheduled after another busy replica's next one (exactly the
step-by-step order). Input validation (request_state.py ``accept``) rejects or caps requests above ``max_model_len``.
"""

from __future__ import annotations

import heapq
import math
import sys
from array import array
from collections.abc import Callable, Iterable
from dataclasses import replace

from kvledger.dynamics.early_stop import MissRule
from kvledger.dynamics.engine.request import ARRIVAL_RULE, MAX_ARRIVAL_S, RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest, accept
from kvledger.dynamics.fast import fast_path, open_stretch
from kvledger.dynamics.outputs.record_sink import RecordSink
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.errors import InputError
from kvledger.record_columns import RecordColumns
from kvledger.records import RequestRecord

__all__ = ["run_cluster", "Arrivals"]

_INF = math.inf


def _check(spec: RequestSpec) -> None:
    bad = None
    if not (isinstance(spec.num_prompt_tokens, int) and spec.num_prompt_tokens >= 1):
        bad = f"num_prompt_tokens must be an integer ≥ 1, got {spec.num_prompt_tokens!r}"
    elif not (isinstance(spec.num_output_tokens, int) and spec.num_output_tokens >= 1):
        bad = f"num_output_tokens must be an integer ≥ 1, got {spec.num_output_tokens!r}"
    elif not (0.0 <= spec.arrival_s <= MAX_ARRIVAL_S):
        bad = f"{ARRIVAL_RULE}, got {spec.arrival_s!r}"
    elif spec.prefix_segments and spec.segment_tokens < 1:
        bad = f"segment_tokens must be ≥ 1, got {spec.segment_tokens!r}"
    if bad:
        raise InputError(f"request {spec.request_id!r}: {bad}")


def _session_loop(source) -> bool:
    """Whether ``source`` is a ``workload.sessions.SessionLoop``, without importing that module for a run that has none
    (one exists only once its module is loaded; its import is about 2 % of a plain simulate's start-up)."""
    sessions = sys.modules.get("kvledger.dynamics.workload.sessions")
    return sessions is not None and isinstance(source, sessions.SessionLoop)


def _sglang_stretches(rep):
    """SGLang's arrival stretches (fast/sglang_stretch.py) if they apply to ``rep``, else None: only to a radix cache,
    which exists once its module is loaded (``--policy sglang``); other runs import neither (~1.5 % of a simulate)."""
    if "kvledger.dynamics.engine.radix_cache" not in sys.modules:
        return None
    from kvledger.dynamics.fast import sglang_stretch

    return sglang_stretch if sglang_stretch.eligible(rep) else None


class _Arrivals:
    """Known future arrivals: a time-sorted open trace, plus (closed loop) a heap of follow-up requests."""

    def __init__(self, source: Iterable[RequestSpec] | ClosedLoop) -> None:
        self.heap: list[tuple[float, int, RequestSpec, int]] = []
        self.seq = 0
        sessions = _session_loop(source)
        self.closed = source if sessions or isinstance(source, ClosedLoop) else None
        self.sessions = source.driver() if sessions else None
        if self.sessions is not None:  # one closed loop per session (sessions.py)
            self.total, self._open = source.num_turns, []
            for t, user in self.sessions.starts:
                self.send(t, user)
        elif self.closed is not None:
            self.pool, self.next_index = list(self.closed.requests), 0
            self.total = len(self.pool)
            for user in range(min(self.closed.num_users, self.total)):
                self.send(self.closed.start_s, user)
            self._open: list[RequestSpec] = []
        elif isinstance(source, WorkloadColumns):
            source.check()
            self._open = source.sorted_by_arrival()
            self.total = len(source)
        else:
            specs = list(source)
            for s in specs:
                _check(s)
            self._open = sorted(specs, key=lambda s: s.arrival_s) if any(
                specs[i].arrival_s > specs[i + 1].arrival_s for i in range(len(specs) - 1)) else specs
            self.total = len(specs)
        self._i = 0

    def send(self, t: float, user: int) -> None:
        """Closed loop: ``user`` sends the next unsent request at ``t`` (nothing if the list is used up); a session
        sends its own next turn after its think time."""
        if self.sessions is not None:
            spec = self.sessions.take(user, t)
            if spec is not None:
                _check(spec)
                heapq.heappush(self.heap, (spec.arrival_s, self.seq, spec, user))
                self.seq += 1
            return
        if self.next_index < len(self.pool):
            spec = self.pool[self.next_index]
            self.next_index += 1
            paced = self.closed.paced  # a paced client sends no request before its own arrival time
            _check(spec if paced else replace(spec, arrival_s=0.0))
            t = max(t, spec.arrival_s) if paced else t
            heapq.heappush(self.heap, (t, self.seq, replace(spec, arrival_s=t), user))
            self.seq += 1

    def open_spec(self, i: int) -> RequestSpec:
        """The open trace's ``i``-th request in arrival order (uid ``i``)."""
        return self._open[i]

    def next_time(self) -> float:
        t = self._open[self._i].arrival_s if self._i < len(self._open) else _INF
        return min(t, self.heap[0][0]) if self.heap else t

    def pop(self) -> tuple[RequestSpec, int]:
        if self.heap and (self._i >= len(self._open) or self.heap[0][0] < self._open[self._i].arrival_s):
            _, _, spec, user = heapq.heappop(self.heap)
            return spec, user
        self._i += 1
        return self._open[self._i - 1], -1


Arrivals = _Arrivals  # the data-parallel lock-step loop's arrivals too (dp_lockstep.py)


def run_cluster(source: Iterable[RequestSpec] | ClosedLoop, replicas: list[Replica], route: Callable,
                progress: Callable[[int, int], None] | None = None,
                as_columns: bool = True, stop: MissRule | None = None) -> list[RequestRecord] | RecordColumns:
    """Simulate until every request has finished or been rejected; returns the records in arrival order.

    An open-loop run without token times (``record_token_times=False``) with ``as_columns`` returns them as
    ``RecordColumns``, written as requests finish (record_sink.py); otherwise a list of RequestRecords.
    ``stop`` (open loop only): end the run once the rule decides it misses its target (early_stop.py); the
    requests not finished by then get an error record each (``stop.record``).
    """
    arr = _Arrivals(source)
    if arr.closed is not None:
        stop = None
    if stop is not None:
        stop.num_requests = arr.total if stop.num_requests is None else stop.num_requests
        stop.check_every = max(1, arr.total // 100) if stop.check_every is None else stop.check_every
    sink = RecordSink(arr.total) if as_columns and stop is None and _columnar(arr, replicas) else None
    out = [] if sink is None else sink
    if arr.closed is None and len(replicas) == 1 and not hasattr(replicas[0].kv, "begin_load"):
        _run_single_open(arr, replicas[0], progress, out, stop)
    else:
        _run_general(arr, replicas, route, progress, out, stop)
    if progress is not None:
        progress(len(out), arr.total)
    if sink is not None:
        return sink.columns(arr._open)
    if stop is not None and stop.stopped_at_s is not None:
        done = {uid for uid, _ in out}
        out.extend((i, stop.record(arr._open[i])) for i in range(arr.total) if i not in done)
    out.sort(key=lambda x: x[0])
    return [rec for _, rec in out]


def _columnar(arr: _Arrivals, replicas: list[Replica]) -> bool:
    """Records can be kept as columns: open loop, no token times, and (a list workload) plain float times and int
    token counts, so each record rebuilt from the columns is the replica's record value for value and type for type."""
    if arr.closed is not None or replicas[0].record_token_times:
        return False
    if isinstance(arr._open, WorkloadColumns):
        return True
    return all(s.arrival_s.__class__ is float and s.num_prompt_tokens.__class__ is int for s in arr._open)


def _run_single_open(arr: _Arrivals, rep: Replica, progress, out, stop: MissRule | None) -> None:
    """The common case, one replica and a known trace: the same rules as ``_run_general``, fewer checks.

    ``out``: a list or a RecordSink, receiving ``(uid, record)`` pairs."""
    rep.sink = out if isinstance(out, RecordSink) else None  # finished records go straight into its columns
    try:
        _single_open_loop(arr, rep, progress, out, stop)
    finally:
        rep.sink = None


def _single_open_loop(arr: _Arrivals, rep: Replica, progress, out, stop: MissRule | None) -> None:
    specs, max_len = arr._open, rep.cfg.max_model_len
    arrivals = _arrival_times(specs)
    lean = open_stretch.eligible(rep)  # arrival stretches
    sgl = None if stop is not None else _sglang_stretches(rep)  # SGLang's (early stops are checked after each step)
    tick, done = max(1, arr.total // 200), 0
    i, total = 0, len(specs)
    sched = rep.sched
    while True:
        if (rep.steady and rep.ready and sched.running and not sched.waiting and rep.fast_forward
                and not rep.rules.static):
            progressed = False
            if lean and not rep.has_deferred:
                i, progressed = open_stretch.run_arrivals(rep, specs, arrivals, i, out)
                if progressed and stop is not None and stop.due(len(out)) and stop.decided([rep], out):
                    return  # an early stop is checked between arrival stretches and after general steps
            elif sgl:
                i, progressed = sgl.run_arrivals(rep, specs, arrivals, i, out)
            if not progressed:
                i, progressed = fast_path.run_open(rep, specs, arrivals, i, out)
            if progressed:
                if progress is not None and len(out) - done >= tick:
                    done = len(out)
                    progress(done, arr.total)
                continue
        t_arr = arrivals[i] if i < total else _INF
        if rep.sched_s < t_arr and rep.has_work:
            for req, rec in rep.run_unit(t_arr, True):
                if rec is not None:
                    out.append((req.uid, rec))
            if progress is not None and len(out) - done >= tick:
                done = len(out)
                progress(done, arr.total)
            if stop is not None and stop.due(len(out)) and stop.decided([rep], out):
                return
            continue
        if i == total:
            return
        req = accept(i, specs[i], max_len, rep.cfg.caps_output, rep.cfg.sglang_max_req_len)
        if req.__class__ is SimRequest:
            rep.add(req)
        else:
            out.append((i, req))
        i += 1


def _arrival_times(specs) -> array:
    """Every request's arrival time, s, as an array of C doubles (8 bytes a request; indexing gives a Python float)."""
    if isinstance(specs, WorkloadColumns):
        out = array("d")
        out.frombytes(specs.arrival_s.tobytes())
        return out
    return array("d", [s.arrival_s for s in specs])


def _run_general(arr: _Arrivals, replicas: list[Replica], route: Callable, progress, out,
                 stop: MissRule | None) -> None:
    think = arr.closed.think_time_s if arr.closed else 0.0
    max_len = replicas[0].cfg.max_model_len
    users: dict[int, int] = {}
    uid, done = 0, 0
    offload = hasattr(replicas[0].kv, "begin_load")
    tick = max(1, arr.total // 200)
    while True:
        t_arr = arr.next_time()
        busy_reps = [r for r in replicas if r.has_work]
        rep = min(busy_reps, key=lambda r: (r.next_event_s, r.index)) if busy_reps else None
        if rep is not None and rep.next_event_s < t_arr:
            bound = t_arr
            if arr.closed is not None:
                # a finish's follow-up request goes to the next user in finish-processing order, so no step may be
                # scheduled past another busy replica's next one (ties: the lower index first), as step by step
                others = [(r.next_event_s, r.index) for r in busy_reps if r is not rep]
                if others:
                    t, i = min(others)
                    bound = min(bound, math.nextafter(t, _INF) if rep.index < i else t)
            for req, rec in rep.run_unit(bound, arr.closed is None):
                out.append((req.uid, rec))
                if arr.closed is not None:
                    arr.send(rec.finish_s + think, users.pop(req.uid))
            if progress is not None and len(out) - done >= tick:
                done = len(out)
                progress(done, arr.total)
            if stop is not None and stop.due(len(out)) and stop.decided(replicas, out):
                return
            continue
        if t_arr == _INF:
            return
        spec, user = arr.pop()
        req = accept(uid, spec, max_len, replicas[0].cfg.caps_output, replicas[0].cfg.sglang_max_req_len)
        if req.__class__ is not SimRequest:
            out.append((uid, req))
            if user >= 0:
                arr.send(spec.arrival_s + think, user)
        else:
            if user >= 0:
                users[uid] = user
            i = 0 if len(replicas) == 1 else route(replicas, req)
            load_s = replicas[i].kv.begin_load(req, bool(replicas[i].sched.waiting)) if offload else 0.0
            if load_s > 0:  # vLLM's connector: the request waits for its load, then goes first (loads_in_flight.py)
                replicas[i].hold_load(req, spec.arrival_s + load_s)
            else:
                replicas[i].add(req)
        uid += 1
