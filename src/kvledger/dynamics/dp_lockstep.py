"""vLLM's data-parallel ranks of a MoE model (``--data-parallel-size N --enable-expert-parallel``): N replicas, each
its own scheduler and KV pool, fed by the front end's load balancer and stepping in lock-step. SGLang's DP attention
runs the same loop (``accounting/sglang_dp_cost.py``), its requests dispatched round robin (``RoundRobinBalancer``).

Routing (``v1/engine/core_client.py : DPLBAsyncMPClient.get_core_engine_for_request``, one API server: client_count 1,
client_index 0): the client keeps a view of every rank's (waiting, running[, KV usage]) counts, replaced by the DP
coordinator's publication (``v1/engine/coordinator.py``: ``min_stats_update_interval_ms`` = 100, while the counts
change), and adds 1 to the chosen rank's waiting count at each routing in between. It scans the ranks from
``eng_start_index`` and takes the lowest score, the first on ties:

* vLLM 0.19.0 (read; taken for every release before 0.26): score = 4 × waiting + running, the scan always from rank 0;
* 0.26.0 (read): the same score, the scan start rotated by one after each routing;
* 0.27.0 and 0.33.0 (read; taken from 0.27 on): score = max(the client's unfinished requests on the rank, waiting +
  running), + waiting × 6 × max(0, KV usage − 0.5) when requests wait; the scan start rotated.

Here the view is refreshed with the ranks' counts at the first routing of each 100 ms period (t // 0.1 s), and the
client's unfinished requests on a rank are the rank's waiting and running requests.

Lock-step (``v1/engine/core.py : DPEngineCoreProc.run_busy_loop``): while any rank has work every rank runs a forward
each step, an idle one a dummy batch; the ranks' MoE collectives make each step as long as the slowest rank's
(``accounting/dp_lockstep_cost.py`` prices it). So each step here schedules every busy rank (``Replica.begin_step``),
prices the ranks' shapes together, and ends every rank's step at the same time (``Replica.end_step``); an idle rank's
clock moves with them. When no rank has work no rank steps (the wave ends) until the next arrival. An arrival is
routed when the ranks' next step is scheduled at or after it (under async scheduling: the start of the step in
flight, as ``cluster.py`` delivers to one replica).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kvledger.dynamics.cluster import Arrivals
from kvledger.dynamics.engine.request_state import SimRequest, admit_due
from kvledger.dynamics.replica import Replica

__all__ = ["STATS_INTERVAL_S", "DpBalancer", "RoundRobinBalancer", "balancer_rule", "make_balancer", "run_lockstep"]

STATS_INTERVAL_S = 0.1
"""The DP coordinator's ``min_stats_update_interval_ms`` (100 ms, coordinator.py in 0.19.0 and 0.33.0), s."""


def balancer_rule(version: tuple[int, ...]) -> str:
    """Which release's balancing rule ``version`` runs (module docstring): "0.19.0", "0.26.0" or "0.33.0"."""
    return "0.33.0" if version >= (0, 27) else ("0.26.0" if version >= (0, 26) else "0.19.0")


class DpBalancer:
    """The front end's choice of DP rank for each request (module docstring), for ``rule`` "0.19.0", "0.26.0" or
    "0.33.0" (``balancer_rule``). ``routed``: requests sent to each rank, count."""

    def __init__(self, rule: str, ranks: int) -> None:
        self.rule, self.start, self.period = rule, 0, -1
        self.view: list[list[float]] = [[0, 0, 0.0] for _ in range(ranks)]
        self.routed = [0] * ranks

    def _refresh(self, ranks: list[Replica], t_s: float) -> None:
        k = math.floor(t_s / STATS_INTERVAL_S)
        if k > self.period:
            self.period = k
            self.view = [[len(r.sched.waiting), len(r.sched.running), r.kv.num_used_blocks / r.kv.capacity_blocks]
                         for r in ranks]

    def __call__(self, ranks: list[Replica], req: SimRequest) -> int:
        """The rank ``req`` goes to, routed at its arrival time."""
        self._refresh(ranks, req.arrival_s)
        n, best, pick = len(ranks), math.inf, 0
        for i in range(n):
            idx = (self.start + i) % n
            waiting, running, usage = self.view[idx]
            if self.rule == "0.33.0":
                score = max(ranks[idx].num_outstanding, waiting + running)
                if waiting:
                    score += waiting * 6.0 * max(0.0, usage - 0.5)
            else:
                score = waiting * 4 + running
            if score < best:
                best, pick = score, idx
        self.view[pick][0] += 1
        if self.rule != "0.19.0":
            self.start = (self.start + 1) % n
        self.routed[pick] += 1
        return pick


class RoundRobinBalancer:
    """SGLang 0.5.23's default DP dispatch (``--load-balance-method auto`` → ``round_robin`` outside PD
    disaggregation: ``arg_groups/serving_hook.py :: handle_load_balance_method``):
    ``managers/data_parallel_controller.py :: DataParallelController.round_robin_scheduler`` sends each request to
    the next rank in turn, whatever the ranks' load. ``routed``: requests sent to each rank, count."""

    def __init__(self, ranks: int) -> None:
        self.counter, self.routed = 0, [0] * ranks

    def __call__(self, ranks: list[Replica], req: SimRequest) -> int:
        """The rank ``req`` goes to."""
        pick = self.counter % len(ranks)
        self.counter, self.routed[pick] = self.counter + 1, self.routed[pick] + 1
        return pick


def make_balancer(rule: str, ranks: int):
    """The balancer of ``rule``: "sglang round_robin" (``RoundRobinBalancer``), else vLLM's (``DpBalancer``)."""
    return RoundRobinBalancer(ranks) if rule == "sglang round_robin" else DpBalancer(rule, ranks)


def run_lockstep(source, ranks: list[Replica], route: Callable, step_time_s: Callable,
                 progress: Callable[[int, int], None] | None = None, rank_of: dict[int, int] | None = None) -> list:
    """Serve ``source`` (an open-loop list or columns, or a closed loop) on DP ``ranks`` in lock-step; ``route``
    (``DpBalancer``) picks each request's rank, ``step_time_s`` prices a step from the ranks' StepShapes (None: idle).
    Returns the records in arrival order (one per uid, from 0); ``rank_of`` gets each routed request's rank by uid."""
    arr, out, users = Arrivals(source), [], {}
    think = arr.closed.think_time_s if arr.closed else 0.0
    cfg, clock, sched_s, uid, idle_rounds = ranks[0].cfg, 0.0, None, 0, 0
    tick = max(1, arr.total // 200)
    while True:
        if not any(r.has_work for r in ranks):
            t = arr.next_time()
            if t == math.inf:
                break
            clock, sched_s = max(clock, t), None  # the wave ended: no rank steps until this arrival
        bound = clock if sched_s is None else sched_s
        admitted, uid = admit_due(arr, bound, uid, cfg, think, out)
        for u, user, req in admitted:  # routed in arrival order, each seeing the ranks as the ones before left them
            users[u] = user
            k = route(ranks, req)
            ranks[k].add(req)
            if rank_of is not None:
                rank_of[u] = k
        for r in ranks:
            if not r.has_work:
                r.wake(clock)  # an idle rank: its last step's output processed
            r.now_s = clock  # one clock for all ranks
        pending = [r.begin_step() if r.has_work else None for r in ranks]
        if all(p is None for p in pending):
            idle_rounds += 1
            if idle_rounds > len(ranks) + 2 and any(r.has_work for r in ranks):
                raise RuntimeError(f"DP ranks stalled at t={clock:.6f} s: nothing schedulable on any rank")
            sched_s = None  # nothing in flight: the next schedule is at the clock
            continue
        idle_rounds, start = 0, clock
        dur = step_time_s([None if p is None else p[0] for p in pending])
        clock = start + dur
        for r, p in zip(ranks, pending):
            if p is None:
                r.now_s = clock  # a dummy batch, as long as the slowest rank's step
                continue
            for req, rec in r.end_step(p, dur):
                out.append((req.uid, rec))
                if (user := users.pop(req.uid, -1)) >= 0:
                    arr.send(rec.finish_s + think, user)
        sched_s = start if cfg.async_scheduling else None
        if progress is not None and len(out) % tick == 0:
            progress(len(out), arr.total)
    out.sort(key=lambda x: x[0])
    return [rec for _, rec in out]
