"""Simulator speed under the engine rules: the whole Azure conversation trace, sync vs vLLM 0.33 async scheduling vs
SGLang's scheduler.

Llama-3.1-8B on one H100 (the memory plan's pool, max_model_len 16384), the roofline step cost. Prints wall time
(best of ``--repeat``), steps, and how many steps the general (one-step) path ran, for ``async_scheduling`` off and
on and for ``batching='sglang'`` (radix cache, FCFS: pages of 16 tokens, of 1 as the CLI's preset, a pool a tenth
the size (more admissions refused, more general steps), and shared prompt prefixes: each prompt's first 256
tokens one of 8 segments), and checks that each gives identical records and summary to step-by-step execution on the
first ``--check`` requests.

Usage: python benchmarks/engine_rules_speed.py [--repeat 3] [--check 2000]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import replace

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.traces import load_trace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--check", type=int, default=2000)
    a = ap.parse_args()
    plan = build_plan(load_model("meta-llama/Meta-Llama-3.1-8B"), get_gpu("H100-SXM"),
                      make_settings(max_model_len=16384), with_advice=False)
    m = plan.memory
    base = EngineConfig(num_gpu_blocks=m.num_gpu_blocks, block_size=m.block_size, max_model_len=m.max_model_len,
                        max_num_batched_tokens=m.max_num_batched_tokens, max_num_seqs=m.max_num_seqs)
    reqs = load_trace("azure-conv")
    general = [0]
    orig = Replica._step

    def counted(self):
        general[0] += 1
        return orig(self)

    shared = [RequestSpec(r.request_id, r.arrival_s, r.num_prompt_tokens, r.num_output_tokens, (i % 8,), 256)
              if r.num_prompt_tokens > 256 else r for i, r in enumerate(reqs)]
    sgl = replace(base, batching="sglang", prefix_caching_policy="sglang")

    print(f"azure-conv: {len(reqs):,} requests; Llama-3.1-8B, H100-SXM, {m.num_gpu_blocks:,} blocks; roofline")
    variants = [("async_scheduling=False", replace(base, async_scheduling=False), False, reqs),
                ("async_scheduling=True ", replace(base, async_scheduling=True), True, reqs),
                ("batching=sglang       ", sgl, False, reqs),
                ("sglang, page 1        ", replace(sgl, block_size=1, num_gpu_blocks=m.num_gpu_blocks * m.block_size),
                 False, reqs),
                ("sglang, pool / 10     ", replace(sgl, num_gpu_blocks=m.num_gpu_blocks // 10), False, reqs),
                ("sglang, shared prefix ", sgl, False, shared)]
    for label, cfg, on, work in variants:
        cost = plan.step_cost(overlap_cpu=on)
        best = best_cpu = float("inf")
        for _ in range(a.repeat):
            gc.collect()
            t0, c0 = time.perf_counter(), time.process_time()
            res = simulate(work, cfg, cost)
            best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
        Replica._step = counted
        general[0] = 0
        simulate(work, cfg, cost)
        Replica._step = orig
        s = res.summary
        print(f"{label}: {best:.2f} s wall, {best_cpu:.2f} s CPU (best of {a.repeat}); {s.num_steps:,} steps, "
              f"{general[0]:,} by the general step ({general[0] / s.num_steps:.1%}); "
              f"TTFT mean {s.ttft_s.mean * 1e3:.1f} ms, p90 {s.ttft_s.p90 * 1e3:.1f} ms; "
              f"ITL mean {s.itl_s.mean * 1e3:.2f} ms")
        sub = work[: a.check]
        fast, slow = simulate(sub, cfg, cost), simulate(sub, cfg, cost, fast_forward=False)
        same = fast.records.records == slow.records.records and (json.dumps(fast.summary.to_dict(), default=str)
                                                                 == json.dumps(slow.summary.to_dict(), default=str))
        print(f"   first {len(sub):,} requests: fast path == step by step (records, summary): {same}")


if __name__ == "__main__":
    main()
