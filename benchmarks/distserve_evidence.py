"""What DistServe's measured vLLM runs say about the engine that served them (calibration/run_evidence.py), and
what the KV pool the replay assumes does to their peak KV use.

    python benchmarks/distserve_evidence.py [--extra DIR] [--json]
    python benchmarks/distserve_evidence.py --loo-pool 3370 [--extra DIR --capped-only]

For each bundled run (and each ``vllm-*.exp`` in ``--extra``, e.g. the 1.5, 2.5 and 3.5 req/s runs of the same
DistServe commit): its prompt steps read off the first-token times, how many batched several prompts, the largest
padding of one (vLLM ≥ 0.2.2 caps it at ``max_paddings`` = 256) and how many exceed 256; the KV blocks its requests
held at their peak (``run_evidence.kv_blocks_held``, p99 and max over 50 ms points), and the same reading of the
replay under DistServe's bundled step cost with the planned pool (4,029 blocks; 3,999 before OPT's plain-MLP forward
rule, 2026-12-04) — and, for runs whose replay
reaches the pool, the pool whose replay peaks where the measurement does (bisection, same estimator on both sides).
Deterministic; a few seconds per run.

``--loo-pool N`` instead replays every run with an N-block pool and prints leave-one-out errors of mean TTFT and TPOT
(each run predicted by ``calibrate --regime-start``'s fit on the others: the projection's and the regime start's fits,
the lower objective kept); ``--capped-only`` keeps only the runs whose prompt batches obey ``max_paddings`` 256.
Minutes per fold on a busy core.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np


def _setup():
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    return SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0",
                          gpu_memory_utilization=0.95, max_num_batched_tokens=16384, max_num_seqs=1024,
                          max_model_len=2048, block_size=16,
                          batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False,
                          step_cost="calibrated")


def _peak(records) -> tuple[float, float]:
    from kvledger.calibration.run_evidence import kv_blocks_held

    held = kv_blocks_held([r for r in records if r.ok], 16)
    return float(np.percentile(held, 99)), float(held.max())


def _replay_peak(run, cfg, cost, pool: int) -> float:
    from kvledger.calibration.replay import replay

    return _peak(replay(run, replace(cfg, num_gpu_blocks=pool), cost).records.records)[1]


def _pool_for(run, cfg, cost, measured_max: float) -> int | None:
    """The pool whose replay's peak matches the measured one (None when the planned pool's replay peaks below the
    measurement: then the run never filled the pool and says nothing of its size)."""
    hi = cfg.num_gpu_blocks
    if _replay_peak(run, cfg, cost, hi) <= measured_max:
        return None
    lo = hi // 2
    while hi - lo > 10:
        mid = (lo + hi) // 2
        if _replay_peak(run, cfg, cost, mid) > measured_max:
            hi = mid
        else:
            lo = mid
    return (lo + hi) // 2


def evidence(extra: Path | None) -> list[dict]:
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.replay import load_measured
    from kvledger.calibration.run_evidence import prompt_steps
    from kvledger.dynamics.workload.distserve_runs import list_distserve_runs

    a = _setup()
    sources = ["distserve:" + n for n in list_distserve_runs()]
    if extra is not None:
        bundled = set(list_distserve_runs())
        sources += [str(p) for p in sorted(extra.glob("vllm-*.exp")) if p.stem not in bundled]
    out = []
    for src in sources:
        run = load_measured(src)
        setup = engine_for(a, run, max_paddings=256)
        recs = run.measured.records
        batched = [s for s in prompt_steps(recs) if len(s.prompt_tokens) > 1]
        p99, mx = _peak(recs)
        sim_max = _replay_peak(run, setup.config, setup.cost, setup.config.num_gpu_blocks)
        out.append({"run": run.label, "prompt_steps": len(prompt_steps(recs)), "batched_steps": len(batched),
                    "largest_padding_tokens": max((s.padding_tokens for s in batched), default=0),
                    "steps_over_256_padding": sum(s.padding_tokens > 256 for s in batched),
                    "measured_peak_blocks_p99": p99, "measured_peak_blocks_max": mx,
                    "planned_pool_blocks": setup.config.num_gpu_blocks, "replay_peak_blocks_max": sim_max,
                    "pool_matching_measured_peak_blocks": _pool_for(run, setup.config, setup.cost, mx)})
    return out


def loo(pool: int, extra: Path | None, capped_only: bool) -> list[dict]:
    from kvledger.calibration.api import calibrate_runs, engine_for, padding_notes
    from kvledger.calibration.replay import load_measured
    from kvledger.dynamics.workload.distserve_runs import list_distserve_runs

    a = _setup()
    names = list_distserve_runs()
    sources = ["distserve:" + n for n in names]
    if extra is not None:
        sources += [str(p) for p in sorted(extra.glob("vllm-*.exp")) if p.stem not in set(names)]
    runs = [load_measured(s) for s in sources]
    if capped_only:
        runs = [r for r in runs if not padding_notes(r, 256)]
    runs.sort(key=lambda r: float(r.label.rsplit("-", 1)[1]))
    setups = [engine_for(a, r, max_paddings=256) for r in runs]
    pairs = [(r, replace(s.config, num_gpu_blocks=pool)) for r, s in zip(runs, setups)]
    out = calibrate_runs(pairs, setups[0].cost, leave_one_out=True, two_starts=True)
    keys = ("run", "ttft_mean_rel_error", "tpot_mean_rel_error", "step_cost")
    return [{k: x[k] for k in keys} for x in out["leave_one_out"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", type=Path, help="a folder of more DistServe vllm-*.exp runs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--loo-pool", type=int, help="leave-one-out fits with every run replayed on this many KV blocks")
    ap.add_argument("--capped-only", action="store_true", help="--loo-pool: only runs that obey max_paddings 256")
    ns = ap.parse_args(argv)
    if ns.loo_pool is not None:
        rows = loo(ns.loo_pool, ns.extra, ns.capped_only)
        if ns.json:
            print(json.dumps(rows, indent=1))
            return 0
        for r in rows:
            print(f"{r['run']}: left out, TTFT mean {r['ttft_mean_rel_error'] * 100:+.1f}%, "
                  f"TPOT mean {r['tpot_mean_rel_error'] * 100:+.1f}%")
        return 0
    rows = evidence(ns.extra)
    if ns.json:
        print(json.dumps(rows, indent=1))
        return 0
    pool = rows[0]["planned_pool_blocks"] if rows else 0
    print("run | prompt steps | batched | largest padding | >256 | KV blocks held p99 / max | replay max "
          f"(pool {pool:,}) | pool matching the measured peak")
    for r in rows:
        print(f"{r['run']} | {r['prompt_steps']} | {r['batched_steps']} | {r['largest_padding_tokens']} | "
              f"{r['steps_over_256_padding']} | {r['measured_peak_blocks_p99']:.0f} / "
              f"{r['measured_peak_blocks_max']:.0f} | {r['replay_peak_blocks_max']:.0f} | "
              f"{r['pool_matching_measured_peak_blocks'] or '—'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
