"""The host tier's opt-in rules on the coding-agent workload of offload_experiment.py (docs/offload.md): SGLang
HiCache write_through against write_back, and a 0.5× host tier with and without the file storage tier below it
(wait_complete); vLLM's host LRU against ARC and store_threshold 2; LMCache's CPU chunks with and without its local
disk below them.

    PYTHONPATH=src python benchmarks/tier_rules_experiment.py [--sessions 120] [--rate 0.15]
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
from kvledger.dynamics.workload.sessions import SessionLoop, synthesize_sessions
from offload_experiment import SHAPE

SEG = 256  # tokens per prompt segment (as offload_experiment.py)


def _row(name: str, run, cpu_s: float) -> None:
    t, a, b = run.tiers, run.with_offload.summary.ttft_s, run.without_offload.summary.ttft_s
    disk = t.disk.hit_rate if t.disk else 0.0
    extra = []
    if t.stores_skipped is not None:
        extra.append(f"skipped {t.stores_skipped:,}")
    if t.write_back_s is not None:
        extra.append(f"write-back {t.write_back_tokens:,} tok {t.write_back_s:.2f} s")
    if t.disk:
        extra.append(f"disk load {t.disk.load_s:.2f} s, {t.disk.stored_units:,} units")
    print(f"{name:<26} {t.hbm_hit_rate:7.3f} {t.host_hit_rate:8.3f} {disk:7.3f} {t.stored_units:>9,} "
          f"{a.mean:9.3f} {a.p50:8.3f}   ({b.mean:.3f}, {b.p50:.3f})  {cpu_s:5.1f}  {'; '.join(extra)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=120)
    ap.add_argument("--rate", type=float, default=0.15, help="session starts per second")
    a = ap.parse_args()
    loop = SessionLoop(tuple(synthesize_sessions(SHAPE, a.sessions, a.rate, np.random.default_rng(0))), SEG)
    print(f"{len(loop.sessions)} sessions, {loop.num_turns:,} turns; Llama-3.1-8B on one H100")
    print(f"{'run':<26} {'hit HBM':>7} {'hit host':>8} {'hit disk':>7} {'stored':>9} {'TTFT mean':>9} {'p50 s':>8}"
          f"   (no tier)        CPU s")
    model, gpu = load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100")
    for engine, runs in (("sglang", (("write_through", {}), ("write_back", {"write_policy": "write_back"}))),
                         ("sglang-0.5x", (("write_through", {}), ("+ storage 1TiB", {"disk": 1024}))),
                         ("vllm", (("lru", {}), ("arc", {"eviction": "arc"}),
                                   ("store_threshold 2", {"store_threshold": 2}))),
                         ("lmcache", (("cpu 0.5x", {}), ("cpu 0.5x + disk 1TiB", {"disk": 1024})))):
        plan = build_plan(model, gpu, make_settings(engine="sglang" if engine.startswith("sglang") else "vllm"),
                          with_advice=False)
        m = plan.memory
        hbm_tokens = m.usable_blocks * m.block_size
        if engine.startswith("sglang"):  # SGLang's default host pool: 2 × the device pool; or 0.5 ×
            cfg = EngineConfig(num_gpu_blocks=m.usable_blocks + 1, block_size=1, max_model_len=32768,
                               max_num_seqs=1024, prefix_caching_policy="sglang", batching="sglang")
            ratio = 0.5 if engine.endswith("0.5x") else 2.0
            ts, unit, chunk = TierSettings(enable_hierarchical_cache=True, hicache_ratio=ratio), SEG, 0
        else:
            cfg = EngineConfig(num_gpu_blocks=m.num_gpu_blocks, max_model_len=32768, max_num_seqs=1024)
            ratio, chunk = (2.0, 0) if engine == "vllm" else (0.5, 256)
            ts = TierSettings(kv_offloading_size_gib=ratio * hbm_tokens * 131072 / 2**30,
                              kv_offloading_backend="lmcache" if chunk else None)
            unit = chunk or m.block_size
        for name, opts in runs:
            opts = dict(opts)
            gib = opts.pop("disk", None)
            tp = build_tier_plan(plan, TierSettings(**{**ts.__dict__, "nvme_gib": gib}))
            host_t, disk_t = tp.tier("host_dram"), tp.tier("nvme")
            if disk_t is not None:
                opts.update(disk_capacity_units=disk_t.capacity_tokens // unit,
                            disk_read_bytes_per_s=disk_t.read_bytes_per_s)
            # the release's store rule (vLLM native from 0.23.0: prompt blocks only), as sim_host_tier takes it
            prompt_only = host_rules(plan.settings, ts, engine == "vllm")[2]
            host = HostTier(host_t.capacity_tokens // unit, tp.bytes_per_token, host_t.read_bytes_per_s,
                            host_t.write_bytes_per_s, chunk_tokens=chunk, prompt_only=prompt_only, **opts)
            t0 = time.process_time()
            run = simulate_offload(loop, cfg, plan.step_cost(), host, record_token_times=False)
            _row(f"{engine} {name}", run, time.process_time() - t0)


if __name__ == "__main__":
    main()
