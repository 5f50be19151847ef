"""SLO-boundary search time with and without early stop (kvledger.dynamics.early_stop), and that the boundary is the
same.

Runs ``search_sim_boundary`` (what ``kvledger goodput --simulate … --target`` and ``cost --simulate``
run) on the request-rate axis for Llama-3.1-8B on one H100, the Azure conversation trace, SLO
TTFT ≤ 500 ms and TPOT ≤ 50 ms, target 90 %, at ``--sizes`` requests per probe; once with every
probe run to the end and once with early stop. Prints best-of-``--repeat`` wall time of each, the
probes stopped early, and whether the boundary and every probe's verdict agree. The machine may
be shared: quote the figures with the load printed.

    python benchmarks/slo_search_speed.py [--sizes 2000,10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import time

from kvledger.analyses.serving.sim_boundary import search_sim_boundary
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.ledgers.slo import SLO

SLO_USED = SLO(ttft_s=0.5, tpot_s=0.05)


def timed(n: int, early: bool, repeat: int):
    """(best wall s, best CPU s, the search): CPU time is the steadier figure on a shared machine."""
    best, best_cpu, sb = float("inf"), float("inf"), None
    for _ in range(repeat):
        args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=n)
        t0, c0 = time.perf_counter(), time.process_time()
        sb = search_sim_boundary(args, SLO_USED, 0.9, "request_rate", early_stop=early)
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return best, best_cpu, sb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,10000")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start (shared machine: noisy)")
    print("Llama-3.1-8B, H100, azure-conv, ttft ≤ 500 ms and tpot ≤ 50 ms, target 90 %, search on request_rate; "
          f"best of {a.repeat}")
    print(f"   "
          f"{'requests/probe':>14}{'probes':>8}{'full s':>9}{'early stop s':>14}{'CPU full s':>12}{'CPU early s':>13}"
          f"{'CPU speed-up':>14}{'stopped':>9}{'boundary':>10}  same verdicts")
    timed(200, True, 1)  # warm the plan cache and imports
    for n in (int(x) for x in a.sizes.split(",") if x):
        t_full, c_full, full = timed(n, False, a.repeat)
        t_fast, c_fast, fast = timed(n, True, a.repeat)
        same = ([(p.value, p.meets_target) for p in fast.probes] == [(p.value, p.meets_target) for p in full.probes]
                and fast.boundary.boundary_value == full.boundary.boundary_value)
        stopped = sum(p.stopped_early is not None for p in fast.probes)
        print(f"   {n:>14,}{len(fast.probes):>8}{t_full:>9.2f}{t_fast:>14.2f}{c_full:>12.2f}{c_fast:>13.2f}"
              f"{c_full / c_fast:>13.2f}×{stopped:>9}{fast.boundary.boundary_value:>10g}  {'yes' if same else 'NO'}")
        stops = [f"{p.value:g}: {p.stopped_early['stopped_at_s']:.0f} of {g.duration_s:.0f}"
                 for p, g in zip(fast.probes, full.goodputs) if p.stopped_early]
        print("      stopped probes (rate: simulated s when stopped, of the full run's s): " + ", ".join(stops))
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
