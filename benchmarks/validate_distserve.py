"""Replay DistServe's measured vLLM runs (OPT-13B, one A100-SXM-80GB, TP1) through the simulator and print the error.

    python benchmarks/validate_distserve.py [--policy v0,v1] [--cost distserve-vllm|distserve|roofline] [--json]

The measured engine. DistServe's vLLM baseline (LLMServe/DistServe,
``evaluation/2-benchmark-serving/2-start-api-server.py``, backend "vllm") was started as
``python -m vllm.entrypoints.api_server --engine-use-ray --worker-use-ray --model facebook/opt-13b
--dtype half -tp 1 --block-size 16 --seed 0 --swap-space 16 --gpu-memory-utilization 0.95
--max-num-batched-tokens 16384 --max-num-seqs 1024`` (``DISTSERVE_VLLM_SETTINGS``), on vLLM "v0.2.3,
with some minor changes" (DistServe's reproduction notes: branch ``distserve-baseline-vllm`` of
interestingLSY/vllm). That is vLLM's V0 engine: ``vllm/core/scheduler.py::Scheduler._schedule``
runs prompt-only steps first (decodes pause while a prompt batch runs), no chunked prefill,
recompute preemption of the newest request, the block manager's 1% watermark at admission, and
prompt batches padded to [batch, longest prompt] with at most ``--max-paddings`` (default 256;
DistServe did not set it) padding tokens. ``max_model_len`` is OPT's 2048; no prefix caching.

Policies (``--policy``, comma-separated; default ``v0,v1``):

* ``v0``: ``batching="vllm_v0"`` with ``max_paddings=256``, the rule of the measured engine;
* ``v0-unpadded``: the same rule without padding (later V0 releases, ``_schedule_default``);
* ``v1``: vLLM v1's mixed steps (the simulator's default rule), for comparison.

For each bundled run (vllm-<N>-<rate>, kvledger/dynamics/workload/data/distserve/) the same requests (issue
time, prompt and output length) are simulated with a KV pool from ``build_plan`` under vLLM 0.5
rules (the oldest this tool models; DistServe's own estimate is 66,144 tokens = 4,134 blocks) and
DistServe's vLLM step-cost fit (``--cost``). Printed: mean and p90 TTFT and TPOT, measured vs
simulated, with the relative error ``sim/measured − 1``; then a rate sweep of the 400-request
workload (its arrival times rescaled) to find the simulated knee, the rate where mean TTFT crosses
5 × the mean TTFT measured at 1 req/s (0.81 s), linearly interpolated. Measured: the knee lies
between 3 req/s (0.46 s) and 4 req/s (10.7 s).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.outputs.metrics import latency_stats
from kvledger.dynamics.workload.distserve_runs import DISTSERVE_VLLM_SETTINGS, list_distserve_runs, load_distserve_run

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


#: name → (EngineConfig overrides, description)
POLICIES = {
    "v0": ({"batching": "vllm_v0", "max_paddings": DISTSERVE_VLLM_SETTINGS["max_paddings"]},
           "vLLM V0 prefill-first, padded prompt batches (max_paddings 256): the measured engine's rule"),
    "v0-unpadded": ({"batching": "vllm_v0"}, "vLLM V0 prefill-first, unpadded prompt batches (later V0 releases)"),
    "v1": ({}, "vLLM v1 mixed steps (the simulator's default rule)"),
}


def engine_config(num_gpu_blocks: int, policy: str = "v0"):
    from kvledger.dynamics.simulator import EngineConfig

    s = DISTSERVE_VLLM_SETTINGS
    return EngineConfig(num_gpu_blocks=num_gpu_blocks, max_model_len=2048, block_size=s["block_size"],
                        max_num_batched_tokens=s["max_num_batched_tokens"], max_num_seqs=s["max_num_seqs"],
                        enable_chunked_prefill=False, enable_prefix_caching=False, **POLICIES[policy][0])


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
    from kvledger.dynamics.simulator import simulate

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


def validate(policy: str, blocks: int, cost) -> dict:
    """Every bundled run and the rate sweep under one policy: errors and the simulated knee."""
    cfg = engine_config(blocks, policy)
    runs = []
    for name in list_distserve_runs():
        run = load_distserve_run(name)
        rec = run.measured.records
        measured = stats(np.array([r.ttft_s for r in rec]),
                         np.array([r.tpot_s for r in rec if r.num_output_tokens > 1]))
        sim = simulate_run(run.requests, cfg, cost)
        runs.append({"run": name, "rate_per_s": run.rate_per_s, "measured": measured, "simulated": sim,
                     "rel_error": {k: sim[k] / measured[k] - 1 for k in measured}})
    base = load_distserve_run("vllm-400-4")
    threshold = KNEE_FACTOR * runs[0]["measured"]["ttft_mean_s"]
    sweep = [{"rate_per_s": r, **simulate_run(rescaled(base.requests, r, base.rate_per_s), cfg, cost)}
             for r in SWEEP_RATES]
    sim_knee = knee([s["rate_per_s"] for s in sweep], [s["ttft_mean_s"] for s in sweep], threshold)
    return {"policy": policy, "description": POLICIES[policy][1], "engine": cfg.to_dict(), "runs": runs,
            "sweep": sweep, "knee_threshold_ttft_s": threshold, "simulated_knee_req_per_s": sim_knee}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--policy", default="v0,v1", help=f"comma-separated, from {', '.join(POLICIES)} (default v0,v1)")
    ap.add_argument("--cost", default="distserve-vllm", choices=["distserve-vllm", "distserve", "roofline"])
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    args = ap.parse_args()
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    bad = [p for p in policies if p not in POLICIES]
    if bad or not policies:
        ap.error(f"unknown policy {', '.join(bad) or '(none)'}; known: {', '.join(POLICIES)}")
    blocks, blocks_src = engine_blocks()
    cost = cost_model(args.cost)
    t0 = time.perf_counter()
    results = [validate(p, blocks, cost) for p in policies]
    out = {"cost_model": getattr(cost, "name", args.cost), "num_gpu_blocks": blocks,
           "num_gpu_blocks_source": blocks_src,
           "distserve_estimate_tokens": 66144, "measured_knee_req_per_s": [3.0, 4.0], "policies": results,
           "wall_s": time.perf_counter() - t0}
    if args.json:
        json.dump(out, sys.stdout, indent=2)
        print()
        return
    _print(out)


_METRICS = (("ttft_mean_s", "TTFT mean"), ("ttft_p90_s", "TTFT p90"), ("tpot_mean_s", "TPOT mean"),
            ("tpot_p90_s", "TPOT p90"))


def _print(out: dict) -> None:
    print(f"cost model: {out['cost_model']}; KV pool {out['num_gpu_blocks']} blocks × 16 tokens "
          f"({out['num_gpu_blocks_source']}; DistServe's own estimate: {out['distserve_estimate_tokens']:,} tokens)")
    for res in out["policies"]:
        print(f"\npolicy {res['policy']}: {res['description']}")
        print(f"{'run':<12}{'metric':<12}{'measured':>11}{'simulated':>11}{'error':>9}")
        for r in res["runs"]:
            for k, label in _METRICS:
                print(f"{r['run']:<12}{label:<12}{r['measured'][k] * 1000:>9.1f}ms{r['simulated'][k] * 1000:>9.1f}ms"
                      f"{r['rel_error'][k] * 100:>+8.1f}%")
        print(f"rate sweep of the vllm-400-4 workload (knee: mean TTFT > {res['knee_threshold_ttft_s']:.3f} s = "
              f"{KNEE_FACTOR:g} × measured mean TTFT at 1 req/s)")
        for s in res["sweep"]:
            print(f"  {s['rate_per_s']:>5.2f} req/s: TTFT mean {s['ttft_mean_s']:8.3f} s, p90 {s['ttft_p90_s']:8.3f} "
                  f"s; "
                  f"TPOT mean {s['tpot_mean_s'] * 1000:6.1f} ms; preemptions {s['num_preemptions']}")
    print("\nsummary: mean error (TTFT / TPOT) per run, and the knee (measured: between 3 and 4 req/s)")
    for res in out["policies"]:
        errs = "  ".join(f"{r['run']} {e['ttft_mean_s'] * 100:+.0f}%/{e['tpot_mean_s'] * 100:+.0f}%"
                         for r in res["runs"] for e in [r["rel_error"]])
        k = res["simulated_knee_req_per_s"]
        print(f"  {res['policy']:<12} {errs}  knee {'none below 4.5' if k is None else f'{k:.2f} req/s'}")
    print(f"wall time {out['wall_s']:.2f} s")


if __name__ == "__main__":
    main()
