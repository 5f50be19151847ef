"""Simulator speed: the whole Azure 2023 conversation trace (19,366 requests) for Llama-3.1-8B on one H100.

Prints wall time (best of ``--repeat`` runs, one core, the trace already loaded) and
simulated requests per second, for FixedStepCost and for the roofline
(``kvledger.accounting.roofline.RooflineStepCost`` from the memory plan), with prefix
caching on and off (the 0 %-hit overhead ratio: vLLM's claim is < 1 % throughput loss,
seed-claims §11), plus peak Python memory of one run (tracemalloc).

Target (issue 3): ≤ 1 s wall. Published peers: BLIS (Go) 0.8 s median per experiment,
Vidur 9.1 s (peers.md §2.5); Vidur measured here: 62–65 s on this trace (peers.md §5).

Usage: python benchmarks/sim_speed.py [--repeat 3] [--num-requests N]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine import EngineConfig, simulate
from kvledger.dynamics.traces import load_trace


def h100_llama8b():
    """(EngineConfig kwargs, RooflineStepCost or None, where the numbers came from)."""
    try:
        from kvledger.accounting.plan import build_plan
        from kvledger.accounting.settings import make_settings
        from kvledger.catalog.gpus import get_gpu
        from kvledger.catalog.models import load_model

        plan = build_plan(load_model("meta-llama/Meta-Llama-3.1-8B"), get_gpu("H100-SXM"),
                          make_settings(max_model_len=16384), with_advice=False)
        m = plan.memory
        kw = dict(num_gpu_blocks=m.num_gpu_blocks, block_size=m.block_size, max_model_len=m.max_model_len,
                  max_num_batched_tokens=m.max_num_batched_tokens, max_num_seqs=m.max_num_seqs)
        return kw, plan.step_cost(), "kvledger plan (Llama-3.1-8B, H100-SXM, max_model_len 16384)"
    except Exception as err:  # noqa: BLE001 - the plan layer is optional for this script
        kw = dict(num_gpu_blocks=27_500, block_size=16, max_model_len=16384, max_num_batched_tokens=8192,
                  max_num_seqs=1024)
        return kw, None, f"fallback constants (plan unavailable: {err})"


def timed(reqs, cfg, cost, repeat: int):
    best, res = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        res = simulate(reqs, cfg, cost)
        best = min(best, time.perf_counter() - t0)
    return best, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--num-requests", type=int, default=None)
    args = ap.parse_args()
    reqs = load_trace("azure-conv")
    if args.num_requests:
        reqs = reqs[: args.num_requests]
    kw, roof, src = h100_llama8b()
    print(f"trace: azure-conv, {len(reqs):,} requests, "
          f"{sum(r.num_output_tokens for r in reqs):,} output tokens; engine from {src}")
    print(f"engine: {kw}")
    costs = [("fixed 6 ms/step", FixedStepCost(per_step_s=0.006))]
    if roof is not None:
        costs.append(("roofline", roof))
    results = {}
    print(f"{'cost model':<18}{'caching':>9}{'wall s':>9}{'sim req/s':>11}{'steps':>10}{'TTFT p50 s':>12}"
          f"{'TPOT p50 s':>12}{'preempt':>9}")
    for name, cost in costs:
        for caching in (True, False):
            cfg = EngineConfig(**kw, enable_prefix_caching=caching)
            wall, res = timed(reqs, cfg, cost, args.repeat)
            results[(name, caching)] = wall
            s = res.summary
            print(f"{name:<18}{'on' if caching else 'off':>9}{wall:>9.3f}{len(reqs) / wall:>11,.0f}{s.num_steps:>10,}"
                  f"{s.ttft_s.p50:>12.4f}{s.tpot_s.p50:>12.4f}{s.num_preemptions:>9}")
    for name, _ in costs:
        print(f"prefix caching at 0% hits, {name}: wall on/off = {results[(name, True)] / results[(name, False)]:.3f}")
    print("memory (tracemalloc peak of one run, roofline/last cost model) vs trace length:")
    for frac in (4, 2, 1):
        part = reqs[: len(reqs) // frac]
        gc.collect()
        tracemalloc.start()
        res = simulate(part, EngineConfig(**kw), costs[-1][1])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        tok = sum(r.num_output_tokens for r in res.records.records)
        print(f"  {len(part):>6,} requests: peak {peak / 2**20:6.1f} MiB, of which token times in the records "
              f"{tok * 8 / 2**20:5.1f} MiB (the rest: records, the summary's ITL arrays, the workload)")
    few = reqs[:1500]
    t0 = time.perf_counter()
    simulate(few, EngineConfig(**kw), costs[0][1], fast_forward=False)
    slow = time.perf_counter() - t0
    t0 = time.perf_counter()
    simulate(few, EngineConfig(**kw), costs[0][1])
    fast = time.perf_counter() - t0
    print(f"fast-forward vs step-by-step on the first {len(few):,} requests (fixed cost): {fast:.3f} s vs {slow:.3f} s "
          f"({slow / fast:.0f}x); same records bit for bit (tests/dynamics/test_engine.py)")
    print("target: ≤ 1 s wall (issue 3); BLIS 0.8 s, Vidur 9.1 s per experiment (peers.md)")


if __name__ == "__main__":
    main()
