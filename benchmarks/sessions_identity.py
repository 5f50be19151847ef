"""Session runs as JSON, to compare two versions of the simulator byte for byte (a speed change must not move them).

    PYTHONPATH=src python benchmarks/sessions_identity.py [--sessions 100] > new.json
    PYTHONPATH=<main's checkout>/src python benchmarks/sessions_identity.py > main.json && cmp new.json main.json

Runs (Llama-3.1-8B on one H100, roofline step cost, 64-token segments): vLLM's and SGLang's rules; the full HBM pool
and a 5% one (so that HBM evicts and the host tier serves hits); CHAT (1 session/s) and AGENT (0.3 session/s)
presets; no tier, the plan's host tier (256 GiB for vLLM, HiCache's 2× for SGLang) and a small one (3,000 blocks /
500 segments); vLLM's LRU, ARC and LMCache 256-token chunks; SGLang's write_through and write_through_selective.
Prints one JSON object: each run's summary and tier figures, or the error it raised (as text, so that two versions'
errors compare too). Takes ~1 min CPU at 100 sessions.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

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
from kvledger.dynamics.workload.sessions import AGENT, CHAT, SessionLoop, synthesize_sessions
from kvledger.jsonable import to_jsonable


def _run(loop: SessionLoop, cfg: EngineConfig, cost, host: HostTier | None) -> dict:
    """One run's summary (and tier figures), or the error it raised."""
    try:
        if host is None:
            return {"summary": simulate(loop, cfg, cost, record_token_times=False).summary.to_dict()}
        run = simulate_offload(loop, cfg, cost, host, compare=False, record_token_times=False)
        return {"summary": run.with_offload.summary.to_dict(), "tiers": to_jsonable(run.tiers)}
    except Exception as e:  # noqa: BLE001 — a version's error is part of what is compared
        return {"error": repr(e)}


def _config(engine: str, plan, frac: float) -> EngineConfig:
    m, max_len = plan.memory, 32768 if frac == 1.0 else 16384
    if engine == "vllm":
        return EngineConfig(num_gpu_blocks=max(1100, int(m.num_gpu_blocks * frac)), max_model_len=max_len,
                            max_num_seqs=1024)
    return EngineConfig(num_gpu_blocks=max(20000, int(m.usable_blocks * frac)) + 1, block_size=1,
                        max_model_len=max_len, max_num_seqs=1024, prefix_caching_policy="sglang", batching="sglang")


def _hosts(engine: str, tier_plan) -> dict[str, HostTier]:
    t = tier_plan.tier("host_dram")
    args = (tier_plan.bytes_per_token, t.read_bytes_per_s, t.write_bytes_per_s)
    if engine == "vllm":
        return {f"{u}/{ev}{ch}": HostTier(u, *args, eviction=ev, chunk_tokens=ch)
                for u in (t.capacity_blocks, 3000) for ev, ch in (("lru", 0), ("arc", 0), ("lru", 256))}
    out = {f"{u}/lru0": HostTier(u, *args) for u in (t.capacity_tokens // 64, 500)}
    out["500/selective"] = HostTier(500, *args, write_policy="write_through_selective")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=100)
    a = ap.parse_args()
    out = {}
    for engine in ("vllm", "sglang"):
        plan = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine=engine),
                          with_advice=False)
        cost = plan.step_cost()
        tiers = TierSettings(kv_offloading_size_gib=256) if engine == "vllm" else TierSettings(
            enable_hierarchical_cache=True)
        hosts = _hosts(engine, build_tier_plan(plan, tiers))
        for frac in (1.0, 0.05):
            cfg = _config(engine, plan, frac)
            for name, preset, rate in (("chat", CHAT, 1.0), ("agent", AGENT, 0.3)):
                loop = SessionLoop(tuple(synthesize_sessions(preset, a.sessions, rate, np.random.default_rng(1))), 64)
                key = f"{engine}/{name}/hbm{frac:g}"
                out[f"{key}/none"] = _run(loop, cfg, cost, None)
                for hname, host in hosts.items():
                    out[f"{key}/{hname}"] = _run(loop, cfg, cost, host)
    json.dump(out, sys.stdout, sort_keys=True, indent=0)
    print()


if __name__ == "__main__":
    main()
