"""A replica's requests whose KV the scheduler started loading from a lower tier (vLLM 0.33 WAITING_FOR_REMOTE_KVS).

vLLM (``v1/core/sched/scheduler.py : schedule``, 0.33.0) starts a connector's asynchronous load when it reaches the
request at the head of its waiting queue; the request leaves the queue, and once the load is done it is scheduled
before the waiting queue (``kv_holding_waiting``). Here: the KV manager's ``take_started_loads`` gives each load
started by a schedule with its time; the request re-enters the waiting queue's front at that schedule's time + the
load time. A load ``begin_load`` starts when the request reaches its replica with nothing waiting ahead joins the
same queue (``hold_load``), so one queue holds every load in flight: a replica with nothing to schedule but loads in
flight waits for the first of them (or the next arrival), and a least-loaded router counts them.

The loads share the replica's host link: each load's time is its bytes at the link's full bandwidth
(``HostTier.load_s``), so two loads in flight at once cannot both take it; a load starts when the one before it on the
link ends (first come, first served), and its request is ready that much later. (Each GPU of a TP group loads its own
shard over its own link, at the same time as the others: the per-GPU bytes already price that.)
"""

from __future__ import annotations

import heapq

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["LoadsInFlight"]


class LoadsInFlight:
    """Loads in flight for a ``Replica`` (mixed in; needs its ``kv``, ``sched``, ``now_s``, ``add`` and ``wake``)."""

    def init_loads(self) -> None:
        self._loads: list[tuple[float, int, SimRequest]] = []  # (ready s, uid, request), a heap
        self._take_loads = getattr(self.kv, "take_started_loads", None)  # None: no lower tier loads here
        self.waits_for_load = False  # the last step scheduled nothing: only loads in flight can move it
        self.blocked = False  # since then: nothing but a load's end or an arrival moves the replica
        self._link_free_s = 0.0  # when the host link finishes the loads already on it, s (module doc)

    @property
    def loads_in_flight(self) -> int:
        """Requests whose load is in flight, count."""
        return len(self._loads)

    @property
    def next_event_s(self) -> float:
        """When the replica next acts, s: its next schedule, or, with nothing running or waiting or its last step
        blocked on the loads' reservations, the first load's ready time (until then only an arrival moves it; the
        cluster orders replicas by this, so two such replicas do not wait in turns of one ulp each)."""
        if self._loads and (self.blocked or not (self.sched.running or self.sched.waiting)):
            return max(self.sched_s, self._loads[0][0])
        return self.sched_s

    def readmit_loaded(self, bound_s: float) -> float:
        """Put the requests whose load is done by the next schedule at the waiting queue's front, the earliest first;
        returns the earlier of ``bound_s`` and the next load's ready time (a stretch stops there), s."""
        done = []
        while self._loads and self._loads[0][0] <= self.sched_s:
            done.append(heapq.heappop(self._loads)[2])
        for req in reversed(done):
            self.add(req, front=True)
        return self.next_load_s(bound_s)

    def after_unit(self, sched_s: float, bound_s: float) -> None:
        """After a step scheduled at ``sched_s``: note the loads it started; when it scheduled nothing and only loads
        in flight can move the replica, its clock moves to the first one's ready time, or ``bound_s`` if earlier."""
        self.note_started_loads(sched_s)
        self.blocked = self.waits_for_load
        if self.waits_for_load:
            self.now_s, self.waits_for_load, self.last_start_s = max(self.now_s, self.next_load_s(bound_s)), False, None

    def hold_load(self, req: SimRequest, ready_s: float) -> None:
        """A load the KV manager's ``begin_load`` started when ``req`` reached the replica (nothing waiting ahead):
        ``req`` joins the loads in flight, and re-enters the waiting queue's front once ready at ``ready_s``."""
        self.wake(req.arrival_s)
        req.arrival_s = ready_s = self._on_link(req.arrival_s, ready_s)
        heapq.heappush(self._loads, (ready_s, req.uid, req))
        self.steady = False

    def note_started_loads(self, sched_s: float) -> None:
        """The loads the schedule at ``sched_s`` started, each ready at ``sched_s`` + its load time."""
        if self._take_loads is not None:
            for req, load_s in self._take_loads():
                # reaches the scheduler again then (as an arrival-time load does)
                req.arrival_s = self._on_link(sched_s, sched_s + load_s)
                heapq.heappush(self._loads, (req.arrival_s, req.uid, req))

    def _on_link(self, start_s: float, ready_s: float) -> float:
        """When a load asked for at ``start_s``, ready at ``ready_s`` on an idle link, is ready behind the loads
        already on the replica's host link (module doc), s."""
        if self._link_free_s > start_s:
            ready_s = self._link_free_s + (ready_s - start_s)
        self._link_free_s = ready_s
        return ready_s

    def next_load_s(self, bound_s: float) -> float:
        """The earlier of ``bound_s`` and the first load's ready time, s."""
        return min(bound_s, self._loads[0][0]) if self._loads else bound_s
