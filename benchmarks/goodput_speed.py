"""Speed check: goodput over one million request records (target ≤ 3 s on the development machine).

Builds a seeded, real-shaped run of N requests (Poisson arrivals at 200 req/s, lognormal
TTFT, 1–512 output tokens, per-token decode times) as ``RunRecords`` — the structure
every reader and the simulator produce — then times ``goodput`` under a TTFT+TPOT+E2E SLO
and under an ITL SLO (which also concatenates every request's chunk times). With
``--file`` it also writes the run as a kvledger records file and times reading it back.

    python benchmarks/goodput_speed.py [--n 1000000] [--chunks 16] [--file]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from kvledger.evidence import read_run, write_records
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def build(n: int, chunks: int, seed: int = 0) -> RunRecords:
    """A seeded run of n requests; each successful request carries ``chunks`` chunk times (0 = none)."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / 200.0, n))
    ttft = rng.lognormal(np.log(0.15), 0.6, n)
    n_out = rng.integers(1, 513, n)
    tpot = rng.lognormal(np.log(0.03), 0.3, n)
    finish = arrival + ttft + tpot * (n_out - 1)
    n_in = rng.integers(16, 4096, n)
    failed = rng.random(n) < 0.01
    recs = []
    for i in range(n):
        if failed[i]:
            recs.append(RequestRecord(str(i), float(arrival[i]), int(n_in[i]), 0, error="timeout"))
            continue
        ct = np.linspace(arrival[i] + ttft[i], finish[i], chunks) if chunks else None
        recs.append(RequestRecord(str(i), float(arrival[i]), int(n_in[i]), int(n_out[i]), float(arrival[i] + ttft[i]), float(finish[i]), ct))
    return RunRecords(recs, RunMetadata("benchmarks/goodput_speed.py", "synthetic"))


def timed(label: str, fn):
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    print(f"{label:<52s} {dt:7.3f} s")
    return out, dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--chunks", type=int, default=16, help="chunk times per successful request")
    ap.add_argument("--file", action="store_true", help="also write and read back a kvledger records file")
    args = ap.parse_args()
    run, _ = timed(f"build {args.n:,} RequestRecords (not part of goodput)", lambda: build(args.n, args.chunks))
    slo = parse_slo("ttft=300ms,tpot=40ms,e2e=20s")
    g, dt = timed(f"goodput, {slo.describe()}", lambda: goodput(run, slo))
    print(f"  → {g.num_good:,} good of {g.num_requests:,} ({g.attainment:.1%}); goodput {g.goodput_req_per_s:.2f} req/s; "
          f"multiplier {g.effective_cost_multiplier:.2f}×")
    g2, dt2 = timed("goodput, itl=100ms (every gap, all chunk times)", lambda: goodput(run, parse_slo("itl=100ms")))
    print(f"  → {g2.num_good:,} good")
    target = 3.0
    print(f"target ≤ {target:.1f} s per goodput call: {'met' if max(dt, dt2) <= target else 'MISSED'} "
          f"(worst {max(dt, dt2):.3f} s = {max(dt, dt2) / target:.0%} of the budget)")
    if args.file:
        with tempfile.TemporaryDirectory() as d:
            p, _ = timed("write records.json", lambda: write_records(run, Path(d) / "records.json"))
            print(f"  → {p.stat().st_size / 1e6:,.0f} MB")
            back, _ = timed("read records.json (JSON parse + validation)", lambda: read_run(p))
            timed("goodput on the records read back", lambda: goodput(back, slo))


if __name__ == "__main__":
    main()
