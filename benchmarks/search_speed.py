"""Configuration-search speed: the two searches of issue 25, pruned by analytic bounds against exhaustive.

1. ``kvledger search meta-llama/Llama-3.1-8B --slo ttft=500ms,tpot=50ms --monthly-tokens 300e6`` (default GPUs and TPs);
2. ``kvledger search meta-llama/Llama-3.1-70B --slo ttft=1s,tpot=80ms --rate 10``.

Each runs through ``kvledger.analyses.search.run_search`` in process (one worker), then as the CLI does by default
(``default_workers``: a pool of one process per usable core; ``--workers N`` sets N), whose ledger must be
byte-identical, then with ``exhaustive=True`` (every planned candidate
simulated). Printed per search: wall and CPU time against the 30 s target, the same in empty-loop floor steps
(``benchmarks/floor.py``), candidates screened (memory plan and price), decided by bound, simulated, and simulations
run (probes + lighter operating points), and whether the winner, runner-up, ranking of the simulated candidates and both
frontiers equal the exhaustive search's. The machine may be shared: quote figures with the load they ran under.
The simulation store (``~/.cache/kvledger/sims``) is off unless ``--with-store``: with it, each run after the first
takes the earlier runs' simulations from disk (the pool and exhaustive runs then time almost nothing).

Usage: python benchmarks/search_speed.py [--only 8b|70b] [--workers 2] [--no-exhaustive] [--num-requests 2000]
       [--with-store]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from floor import floor_line, in_floor_steps, step_floor_s
from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.analyses.search.prune import screening
from kvledger.analyses.search.runner import default_workers

TARGET_S = 30.0
SEARCHES = {
    "8b": dict(model="meta-llama/Llama-3.1-8B", slo="ttft=500ms,tpot=50ms", monthly_tokens=300e6),
    "70b": dict(model="meta-llama/Llama-3.1-70B", slo="ttft=1s,tpot=80ms", rate_req_per_s=10.0),
}


def timed(spec: SearchSpec, **kw) -> tuple[float, float, object]:
    t, c = time.perf_counter(), time.process_time()
    res = run_search(spec, Axes(), **kw)
    return time.perf_counter() - t, time.process_time() - c, res


def simulations(res) -> int:
    """Simulations the search ran: every probe of every capacity search plus the lighter operating points."""
    n = 0
    for e in res.entries:
        cap = e.get("capacity") or {}
        n += len(cap.get("probes") or [])
        n += max(0, len(cap.get("operating_points") or []) - 1)  # the point at capacity is a probe's run
    return n


def same_answer(pruned, full) -> list[str]:
    """What differs between the pruned and the exhaustive result (empty when nothing does)."""
    sim = set(pruned.ranking)
    checks = {"winner and runner-up": pruned.ranking[:2] == full.ranking[:2],
              "ranking of the simulated candidates": pruned.ranking == [c for c in full.ranking if c in sim],
              "frontier": pruned.frontier == full.frontier, "cost frontier": pruned.cost_frontier == full.cost_frontier,
              "margin": pruned.margin() == full.margin()}
    return [k for k, ok in checks.items() if not ok]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=sorted(SEARCHES), default=None)
    ap.add_argument("--workers", type=int, default=None, help="also run with this many workers in a process pool "
                    "(default: what `kvledger search` uses without --workers, one per usable core)")
    ap.add_argument("--no-exhaustive", action="store_true", help="skip the exhaustive comparison (minutes)")
    ap.add_argument("--num-requests", type=int, default=2000)
    ap.add_argument("--with-store", action="store_true", help="let the runs read and write the simulation store "
                    "(kvledger.analyses.serving.sim_cache); by default it is off, or every run after the first would "
                    "reuse the simulations of the one before and time nothing")
    a = ap.parse_args()
    if not a.with_store:
        os.environ["KVLEDGER_NO_CACHE"] = "1"  # read at each simulation, and inherited by the pool's processes
    floor = step_floor_s()
    print(floor_line(floor))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start (shared machine: wall times "
          f"are noisy; CPU time is this process's)")
    tmp = Path(tempfile.mkdtemp(prefix="kvledger-search-"))
    for name, kw in SEARCHES.items():
        if a.only not in (None, name):
            continue
        spec = SearchSpec(**kw, num_requests=a.num_requests)
        wall, cpu, res = timed(spec, ledger=tmp / f"{name}.jsonl", backend="serial")
        s = screening(res.entries)
        print(f"\n{name}: {spec.model}, SLO {spec.slo}, {len(res.entries)} candidates")
        print(f"  pruned, 1 worker: {wall:.1f} s wall, {cpu:.1f} s CPU ({'meets' if wall < TARGET_S else 'MISSES'} "
              f"the {TARGET_S:g} s target; {in_floor_steps(wall, floor)} wall, {cpu / floor / 1e6:,.1f} M CPU)")
        print(f"  screened by memory plan and price: {len(res.entries) - s.planned} rejected, {s.planned} "
              f"planned; decided by bound: {s.decided_by_bound} unsimulated, {s.slo_rejected_by_bound} "
              f"rejected by TTFT/TPOT bound, {s.lighter_loads_decided_by_bound} lighter loads unsimulated; "
              f"simulated: {s.simulated} candidates, {simulations(res)} simulations")
        print(f"  winner {res.ranking[0] if res.ranking else None}; counts {res.counts()}")
        workers = a.workers or default_workers(s.simulated)
        if workers > 1:
            kids = resource.getrusage(resource.RUSAGE_CHILDREN)
            w2, c2, r2 = timed(spec, ledger=tmp / f"{name}-pool.jsonl", workers=workers, backend="pool")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the pool's processes, reaped at its shutdown
            c2 += (after.ru_utime + after.ru_stime) - (kids.ru_utime + kids.ru_stime)
            same = (tmp / f"{name}-pool.jsonl").read_bytes() == (tmp / f"{name}.jsonl").read_bytes()
            print(f"  pruned, {workers} workers (pool{', the default' if a.workers is None else ''}): {w2:.1f} s "
                  f"wall ({wall / w2:.2f}×; {c2:.1f} s CPU, parent and workers), ledger "
                  f"{'identical to' if same else 'DIFFERS from'} the 1-worker run")
        if not a.no_exhaustive:
            wf, cf, full = timed(spec, backend="serial", exhaustive=True)
            diff = same_answer(res, full)
            print(f"  exhaustive, 1 worker: {wf:.1f} s wall, {cf:.1f} s CPU, {simulations(full)} simulations; pruned "
                  f"is {cf / cpu:.2f}× faster in CPU; "
                  + ("same winner, runner-up, margin, ranking and frontiers" if not diff
                     else f"DIFFERENT: {', '.join(diff)}"))
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
