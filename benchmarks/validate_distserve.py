"""Replay DistServe's measured vLLM runs (OPT-13B, one A100-SXM-80GB, TP1) through the simulator and print the error.

    python benchmarks/validate_distserve.py [--cost distserve-vllm|distserve|roofline] [--json]

For each bundled run (vllm-<N>-<rate>, kvledger/dynamics/data/distserve/) the same requests (issue
time, prompt and output length) are simulated with the engine settings DistServe used
(``DISTSERVE_VLLM_SETTINGS``: block 16, gpu_memory_utilization 0.95, max_num_batched_tokens 16384,
max_num_seqs 1024, no chunked prefill, no prefix caching) and a KV pool from ``build_plan`` under
vLLM 0.5 rules (the oldest this tool models; the runs used an early-2024 vLLM). Printed: mean and
p90 TTFT and TPOT, measured vs simulated, with the relative error ``sim/measured − 1``; then a rate
sweep of the 400-request workload (its arrival times rescaled) to find the simulated knee, the
lowest rate whose mean TTFT exceeds 5 × the mean TTFT measured at 1 req/s (0.81 s). Measured: the
knee lies between 3 req/s (0.46 s) and 4 req/s (10.7 s).

Known modelling gap: the simulator follows vLLM v1's rule (a step may hold new prompts and decodes
together), while the measured engine (vLLM V0) ran prompt-only steps first and paused decodes
meanwhile, so simulated TPOT under load is expected to be lower than measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from kvledger.dynamics.distserve_runs import DISTSERVE_VLLM_SETTINGS, list_distserve_runs, load_distserve_run
from kvledger.dynamics.metrics import latency_stats
from kvledger.dynamics.workload import RequestSpec

KNEE_FACTOR = 5.0
SWEEP_RATES = (2.0, 2.5, 3.0, 3.25, 3.5, 3.75, 4.0, 4.5)


def engine_blocks() -> tuple[int, str]:
    """KV blocks for OPT-13B on A100-80GB under DistServe's vLLM settings, with where the number came from."""
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    s = DISTSERVE_VLLM_SETTINGS
    settings = make_settings(engine_version="0.5.0", gpu_memory_utilization=s["gpu_memory_utilization"],
                             max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"],
                             block_size=s["block_size"], max_model_len=2048)
    plan = build_plan(load_model("facebook/opt-13b"), get_gpu("A100-80GB"), settings, with_roofline=False,
                      with_advice=False)
    return plan.memory.num_gpu_blocks, "build_plan(facebook/opt-13b, A100-80GB, vLLM 0.5 rules)"


def engine_config(num_gpu_blocks: int):
    from kvledger.dynamics.engine import EngineConfig

    s = DISTSERVE_VLLM_SETTINGS
    return EngineConfig(num_gpu_blocks=num_gpu_blocks, max_model_len=2048, block_size=s["block_size"],
                        max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"],
                        enable_chunked_prefill=False, enable_prefix_caching=False)


def cost_model(name: str):
    if name == "roofline":
        from kvledger.accounting.plan import build_plan
        from kvledger.accounting.settings import make_settings
        from kvledger.catalog.gpus import get_gpu
        from kvledger.catalog.models import load_model

        plan = build_plan(load_model("facebook/opt-13b"), get_gpu("A100-80GB"), make_settings(max_model_len=2048),
                          with_advice=False)
        return plan.step_cost()
    from kvledger.accounting.calibrated import get_calibrated_cost

    return get_calibrated_cost(f"{name}:facebook/opt-13b", "A100-80GB", 1)


def stats(ttft: np.ndarray, tpot: np.ndarray) -> dict[str, float]:
    a, b = latency_stats(ttft), latency_stats(tpot)
    return {"ttft_mean_s": a.mean, "ttft_p90_s": a.p90, "tpot_mean_s": b.mean, "tpot_p90_s": b.p90}


def simulate_run(requests: list[RequestSpec], cfg, cost) -> dict[str, float]:
    from kvledger.dynamics.engine import simulate

    res = simulate(requests, cfg, cost, model="facebook/opt-13b", hardware="A100-SXM-80GB")
    recs = [r for r in res.records.records if r.ok]
    out = stats(np.array([r.ttft_s for r in recs]), np.array([r.tpot_s for r in recs if r.num_output_tokens > 1]))
    out["num_finished"] = len(recs)
    out["num_preemptions"] = res.summary.num_preemptions
    return out


def rescaled(requests: list[RequestSpec], rate: float, native_rate: float) -> list[RequestSpec]:
    k = native_rate / rate
    return [RequestSpec(r.request_id, r.arrival_s * k, r.num_prompt_tokens, r.num_output_tokens) for r in requests]


def knee(rates: list[float], ttft_means: list[float], threshold_s: float) -> float | None:
    """Rate where mean TTFT crosses the threshold, linearly interpolated between sweep points (None if never)."""
    for i, (r, t) in enumerate(zip(rates, ttft_means)):
        if t > threshold_s:
            if i == 0:
                return r
            r0, t0 = rates[i - 1], ttft_means[i - 1]
            return r0 + (threshold_s - t0) / (t - t0) * (r - r0)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cost", default="distserve-vllm", choices=["distserve-vllm", "distserve", "roofline"])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args()
    blocks, blocks_src = engine_blocks()
    cfg, cost = engine_config(blocks), cost_model(args.cost)
    t0 = time.perf_counter()
    runs = []
    for name in list_distserve_runs():
        run = load_distserve_run(name)
        rec = run.measured.records
        measured = stats(np.array([r.ttft_s for r in rec]), np.array([r.tpot_s for r in rec if r.num_output_tokens > 1]))
        sim = simulate_run(run.requests, cfg, cost)
        runs.append({"run": name, "rate_per_s": run.rate_per_s, "measured": measured, "simulated": sim,
                     "rel_error": {k: sim[k] / measured[k] - 1 for k in measured}})
    base = load_distserve_run("vllm-400-4")
    threshold = KNEE_FACTOR * runs[0]["measured"]["ttft_mean_s"]
    sweep = [{"rate_per_s": r, **simulate_run(rescaled(base.requests, r, base.rate_per_s), cfg, cost)}
             for r in SWEEP_RATES]
    sim_knee = knee([s["rate_per_s"] for s in sweep], [s["ttft_mean_s"] for s in sweep], threshold)
    out = {"cost_model": getattr(cost, "name", args.cost), "num_gpu_blocks": blocks, "num_gpu_blocks_source": blocks_src,
           "distserve_estimate_tokens": 66144, "runs": runs, "sweep": sweep, "knee_threshold_ttft_s": threshold,
           "simulated_knee_req_per_s": sim_knee, "measured_knee_req_per_s": [3.0, 4.0],
           "wall_s": time.perf_counter() - t0}
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return
    _print(out)


def _print(out: dict) -> None:
    print(f"cost model: {out['cost_model']}; KV pool {out['num_gpu_blocks']} blocks × 16 tokens "
          f"({out['num_gpu_blocks_source']}; DistServe's own estimate: {out['distserve_estimate_tokens']:,} tokens)")
    print(f"{'run':<12}{'metric':<12}{'measured':>11}{'simulated':>11}{'error':>9}")
    for r in out["runs"]:
        for k, label in (("ttft_mean_s", "TTFT mean"), ("ttft_p90_s", "TTFT p90"), ("tpot_mean_s", "TPOT mean"),
                         ("tpot_p90_s", "TPOT p90")):
            print(f"{r['run']:<12}{label:<12}{r['measured'][k] * 1000:>9.1f}ms{r['simulated'][k] * 1000:>9.1f}ms"
                  f"{r['rel_error'][k] * 100:>+8.1f}%")
    print(f"\nrate sweep of the vllm-400-4 workload (knee: mean TTFT > {out['knee_threshold_ttft_s']:.3f} s = "
          f"{KNEE_FACTOR:g} × measured mean TTFT at 1 req/s)")
    for s in out["sweep"]:
        print(f"  {s['rate_per_s']:>5.2f} req/s: TTFT mean {s['ttft_mean_s']:8.3f} s, p90 {s['ttft_p90_s']:8.3f} s; "
              f"TPOT mean {s['tpot_mean_s'] * 1000:6.1f} ms; preemptions {s['num_preemptions']}")
    k = out["simulated_knee_req_per_s"]
    print(f"simulated knee: {'none below 4.5' if k is None else f'{k:.2f} req/s'}; measured: between 3 and 4 req/s")
    print(f"wall time {out['wall_s']:.2f} s")


if __name__ == "__main__":
    main()
