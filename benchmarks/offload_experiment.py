"""Hit rate and TTFT against host-memory size on a multi-turn coding-agent-like workload (docs/offload.md, issue 24).

    PYTHONPATH=src python benchmarks/offload_experiment.py [--engine sglang|vllm] [--sessions 200]

The published effect it is set against (LMSYS SGLang HiCache blog, 2025-09-10, quoting Novita AI): a coding agent on
Qwen3-Coder-480B whose dialogues "stretched past 25K tokens around 8 turns per session"; with HiCache the cache hit
rate "jumped from 40% to 80%" and the average TTFT dropped 56%. Their hardware, storage tier (3FS) and traffic are
not published; here: Llama-3.1-8B on one H100 (roofline), SGLang HiCache write_through host tier over PCIe Gen5,
sessions of exactly 8 turns (8K-token first input, 2K-token tool results, 300-token outputs: ~25K tokens at turn 8),
60 s between turns, session starts Poisson at a rate chosen so that HBM alone holds ~40% of the reuse.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from kvledger.accounting.kv_tier_rules import TierSettings
from kvledger.accounting.kv_tiers import build_tier_plan
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.judgments.offload_host_rules import host_rules
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.sessions import SessionLoop, SessionShape, synthesize_sessions

SHAPE = SessionShape(mean_turns=1e9, max_turns=8, first_input_median_tokens=8192, input_median_tokens=2048,
                     output_median_tokens=300, length_sigma=0.3, think_mean_s=60.0, system_tokens=2048,
                     max_context_tokens=32768)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="sglang", choices=["sglang", "vllm"])
    ap.add_argument("--sessions", type=int, default=120)
    ap.add_argument("--rate", type=float, default=0.15, help="session starts per second")
    a = ap.parse_args()
    plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine=a.engine),
                      with_advice=False)
    cost, m = plan.step_cost(), plan.memory
    seg = 256
    loop = SessionLoop(tuple(synthesize_sessions(SHAPE, a.sessions, a.rate, np.random.default_rng(0))), seg)
    if a.engine == "sglang":
        cfg = EngineConfig(num_gpu_blocks=m.usable_blocks + 1, block_size=1, max_model_len=32768, max_num_seqs=1024,
                           prefix_caching_policy="sglang", batching="sglang")
        unit_tokens = seg
    else:
        cfg = EngineConfig(num_gpu_blocks=m.num_gpu_blocks, max_model_len=32768, max_num_seqs=1024)
        unit_tokens = m.block_size
    hbm_tokens = m.usable_blocks * m.block_size
    print(f"{a.engine}: {len(loop.sessions)} sessions, {loop.num_turns:,} turns; HBM {hbm_tokens:,} tokens")
    print("host/HBM  host GiB  hit HBM  hit host  hit total  TTFT mean s  TTFT p50 s  (no tier: mean, p50)  wall s")
    for ratio in (0.0, 0.5, 1.0, 2.0, 4.0):
        ts = TierSettings(enable_hierarchical_cache=True, hicache_ratio=ratio) if a.engine == "sglang" and ratio \
            else TierSettings(kv_offloading_size_gib=max(ratio, 1e-9) * hbm_tokens * 131072 / 2**30)
        t_host = build_tier_plan(plan, ts).tier("host_dram") if ratio else None
        units = t_host.capacity_tokens // unit_tokens if t_host else 0
        # vLLM's native connector stores prompt blocks only from 0.23.0 (offload_prompt_only): the release's rule, as
        # sim_host_tier takes it from host_rules
        prompt_only = host_rules(plan.settings, ts, a.engine == "vllm")[2]
        host = HostTier(units, 131072, t_host.read_bytes_per_s if t_host else 51.2e9, 51.2e9, prompt_only=prompt_only)
        t = time.perf_counter()
        run = simulate_offload(loop, cfg, cost, host, compare=ratio == 0.0, record_token_times=False)
        w = time.perf_counter() - t
        s, ti = run.with_offload.summary, run.tiers
        base = f"({run.without_offload.summary.ttft_s.mean:.3f}, {run.without_offload.summary.ttft_s.p50:.3f})" \
            if run.without_offload else ""
        gib = units * unit_tokens * 131072 / 2**30
        print(f"{ratio:8.1f}  {gib:8.1f}  {ti.hbm_hit_rate:7.3f}  {ti.host_hit_rate:8.3f}  "
              f"{ti.hbm_hit_rate + ti.host_hit_rate:9.3f}  {s.ttft_s.mean:11.3f}  {s.ttft_s.p50:10.3f}  {base:>20}  "
              f"{w:6.1f}")


if __name__ == "__main__":
    main()
