"""Speed and determinism of a 10,000-turn session workload, with and without a host KV tier (issue 24's goal: under
5 s, identical across runs). Prints figures and ratios; not a test.

    PYTHONPATH=src python benchmarks/sessions_speed.py [--engine vllm|sglang] [--rate 1.0] [--sessions 2500]

Workload: CHAT sessions (sessions.py: ~4 turns, 30 s think time, 512-token system prompt), Poisson session starts,
Llama-3.1-8B on one H100 (roofline step cost, vLLM's plan), 64-token segments; host tier 256 GiB over PCIe Gen5.
Each run prints wall and CPU seconds (the CPU figure moves less on a shared machine) and the wall time in the
machine's empty-loop floor steps (floor.py), measured before and after the runs.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from floor import floor_line, in_floor_steps, step_floor_s
from kvledger.accounting.kv_tier_rules import TierSettings
from kvledger.accounting.kv_tiers import build_tier_plan
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.simulator import simulate
from kvledger.dynamics.workload.sessions import CHAT, SessionLoop, synthesize_sessions

GOAL_S = 5.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="vllm", choices=["vllm", "sglang"])
    ap.add_argument("--rate", type=float, default=1.0, help="session starts per second")
    ap.add_argument("--sessions", type=int, default=2500)
    a = ap.parse_args()
    plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine=a.engine),
                      with_advice=False)
    cost, m = plan.step_cost(), plan.memory
    tiers = TierSettings(kv_offloading_size_gib=256) if a.engine == "vllm" else TierSettings(
        enable_hierarchical_cache=True)
    tier_plan = build_tier_plan(plan, tiers)
    host_t = tier_plan.tier("host_dram")
    if a.engine == "vllm":
        cfg = EngineConfig(num_gpu_blocks=m.num_gpu_blocks, max_model_len=32768, max_num_seqs=1024)
        units = host_t.capacity_blocks
    else:
        cfg = EngineConfig(num_gpu_blocks=m.usable_blocks + 1, block_size=1, max_model_len=32768, max_num_seqs=1024,
                           prefix_caching_policy="sglang", batching="sglang")
        units = host_t.capacity_tokens // 64
    host = HostTier(units, tier_plan.bytes_per_token, host_t.read_bytes_per_s,
                    host_t.write_bytes_per_s)
    loop = SessionLoop(tuple(synthesize_sessions(CHAT, a.sessions, a.rate, np.random.default_rng(0))), 64)
    print(f"{a.engine}: {len(loop.sessions):,} sessions, {loop.num_turns:,} turns, {a.rate:g} sessions/s")
    floor = step_floor_s()
    walls, cpus, sums = [], [], []
    for _ in range(2):
        t, c = time.perf_counter(), time.process_time()
        r = simulate(loop, cfg, cost, record_token_times=False)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
        sums.append(r.summary.to_dict())
    print(f"  without offload: {walls[0]:.2f} s, {walls[1]:.2f} s wall ({cpus[0]:.2f}, {cpus[1]:.2f} s CPU; goal "
          f"{GOAL_S:g} s: ×{min(walls) / GOAL_S:.2f}; {in_floor_steps(min(walls), floor)}); identical across runs: "
          f"{sums[0] == sums[1]}; steps {sums[0]['num_steps']:,}")
    t, c = time.perf_counter(), time.process_time()
    run = simulate_offload(loop, cfg, cost, host, compare=False, record_token_times=False)
    w, wc = time.perf_counter() - t, time.process_time() - c
    run2 = simulate_offload(loop, cfg, cost, host, compare=False, record_token_times=False)
    same = run.with_offload.summary.to_dict() == run2.with_offload.summary.to_dict() and run.tiers == run2.tiers
    print(f"  with a host tier: {w:.2f} s wall ({wc:.2f} s CPU; ×{w / GOAL_S:.2f} of the goal; "
          f"{in_floor_steps(w, floor)}); identical across runs: {same}")
    floor = min(floor, step_floor_s())
    print(f"  {floor_line(floor)}; the goal is {in_floor_steps(GOAL_S, floor)} here")
    ts = run.tiers
    print(f"  hit rate HBM {ts.hbm_hit_rate:.3f}, host {ts.host_hit_rate:.3f}; TTFT p50 "
          f"{run.with_offload.summary.ttft_s.p50 * 1e3:.1f} ms with, {r.summary.ttft_s.p50 * 1e3:.1f} ms without")


if __name__ == "__main__":
    main()
