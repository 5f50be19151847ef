"""Configuration-search speed: 4 GPUs × 4 TP × 2 KV dtypes for Llama-3.1-70B on the Azure conversation trace, with 1
and 2 workers.

Runs the same search (``kvledger.analyses.search.run_search``) in process (1 worker), in a
process pool of 2 and on a local Ray cluster of 2 CPUs; prints wall time, candidates per minute
per worker (all candidates, and the simulated ones, which take the time), the speed-up of 2
workers over 1, and checks that the three ledgers are byte-identical. The machine may be shared
with other work: quote the figures with the load they ran under, best of ``--repeat``.

Usage: python benchmarks/search_speed.py [--num-requests 2000] [--repeat 1] [--out DIR] [--no-ray]
(``--out DIR`` also writes DIR/search_ledger.jsonl, DIR/search_frontier.png and DIR/search_table.txt).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from floor import floor_line, in_floor_steps, step_floor_s
from kvledger.analyses.search import Axes, SearchSpec, ray_available, run_search

SPEC = dict(model="meta-llama/Llama-3.1-70B", slo="ttft=1s,tpot=50ms", trace="azure-conv", utilization=0.5,
            rate_req_per_s=20.0, api="OpenAI:gpt-4.1")
AXES = Axes(gpus=("H100", "H200", "A100-80GB", "L40S"), tps=(1, 2, 4, 8), kv_cache_dtypes=("auto", "fp8"))


def timed(spec: SearchSpec, ledger: Path, workers: int, backend: str, repeat: int) -> tuple[float, object]:
    best, res = float("inf"), None
    for _ in range(repeat):
        ledger.unlink(missing_ok=True)
        t = time.perf_counter()
        res = run_search(spec, AXES, workers=workers, backend=backend, ledger=ledger)
        best = min(best, time.perf_counter() - t)
    return best, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-requests", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--backends", default="serial,pool,ray", help="which of serial (1 worker), pool and ray (2 "
                                                                  "workers) to run")
    a = ap.parse_args()
    spec = SearchSpec(**SPEC, num_requests=a.num_requests)
    tmp = Path(tempfile.mkdtemp(prefix="kvledger-search-"))
    wanted = a.backends.split(",")
    runs = [(b, 1 if b == "serial" else 2) for b in ("serial", "pool", "ray") if b in wanted
            and not (b == "ray" and (a.no_ray or not ray_available()))]
    floor = step_floor_s()
    print(floor_line(floor))
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start (shared machine: figures "
          f"are noisy)")
    base_t, base_bytes, res = None, None, None
    for backend, workers in runs:
        t, r = timed(spec, tmp / f"{backend}.jsonl", workers, backend, a.repeat)
        res = res or r
        n = len(r.entries)
        sim = sum(e["status"] != "rejected" or e.get("reason") == "SLO not met at any rate" for e in r.entries)
        data = (tmp / f"{backend}.jsonl").read_bytes()
        base_t, base_bytes = (t, data) if base_t is None else (base_t, base_bytes)
        print(f"{backend:>6} × {workers}: {t:7.1f} s for {n} candidates ({sim} simulated): "
              f"{n / (t / 60) / workers:6.1f} "
              f"candidates/min/worker, {sim / (t / 60) / workers:6.1f} simulated/min/worker; speed-up "
              f"{base_t / t:4.2f}×; "
              f"ledger {'identical to' if data == base_bytes else 'DIFFERS from'} the 1-worker run; "
              f"{in_floor_steps(t, floor)}; {n - sim} decided without simulation (plan, price), {sim} simulated")
        for e in r.entries:
            if e["status"] == "error":
                print(f"    {e['id']}: {e['reason']}: {e['detail']}")
    print(f"load average at end {os.getloadavg()[0]:.2f}; counts {res.counts()}")
    if a.out is not None:
        from kvledger.report.search_figures import frontier_figure, save_figure

        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "search_ledger.jsonl").write_bytes(base_bytes)
        save_figure(frontier_figure(res), a.out / "search_frontier.png")
        print(f"wrote {a.out}/search_ledger.jsonl and search_frontier.png")


if __name__ == "__main__":
    main()
