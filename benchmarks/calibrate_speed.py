"""How long a calibration over DistServe's five measured vLLM runs takes, with its default leave-one-out (target:
under 30 s on two cores, issue 25) and without it.

    python benchmarks/calibrate_speed.py [--repeat N] [--workers N] [--no-loo]

Runs exactly what ``kvledger calibrate distserve:vllm-100-1 … distserve:vllm-400-4`` runs (load the runs, build the
engine from the flags, project the start model, fit on all five, then — the default — fit on each four and predict
the fifth) and prints the wall time and this process's CPU time (its workers' CPU is not counted: the wall time is
the figure), best of ``--repeat``, the ratio to the target, the machine's empty-loop floor and the wall time in floor
steps. The fit is deterministic: every repeat, and every number of workers, must give the same coefficients and the
same leave-one-out errors, which the script checks.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import floor_line, in_floor_steps, step_floor_s  # noqa: E402

TARGET_S = 30.0
RUNS = ["distserve:vllm-100-1", "distserve:vllm-100-2", "distserve:vllm-200-2", "distserve:vllm-300-3",
        "distserve:vllm-400-4"]


def once(loo: bool, workers: int):
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.calibration.api import calibrate_files

    a = SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", gpu_memory_utilization=0.95,
                       max_num_batched_tokens=16384, max_num_seqs=1024, max_model_len=2048, block_size=16,
                       batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False,
                       step_cost="calibrated")
    w, c = time.perf_counter(), _cpu_s()
    p = calibrate_files(RUNS, a, max_paddings=256, leave_one_out=loo, workers=workers)
    return time.perf_counter() - w, _cpu_s() - c, p


def _cpu_s() -> float:
    """CPU seconds of this process and of its finished worker processes."""
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def _signature(p: dict) -> str:
    loo = [(x["run"], sorted(x["step_cost"].items()), x["ttft_mean_rel_error"]) for x in p["leave_one_out"]]
    return repr((sorted((k, v) for k, v in p["step_cost"].items() if k not in ("units", "terms")), loo))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                    else (os.cpu_count() or 1), help="as calibrate --workers (default: one per CPU, as calibrate)")
    ap.add_argument("--no-loo", action="store_true", help="fit on all five only (--no-leave-one-out)")
    a = ap.parse_args()
    loo = not a.no_loo
    floor = step_floor_s()
    results = [once(loo, a.workers) for _ in range(max(a.repeat, 1))]
    sigs = {_signature(p) for _, _, p in results}
    wall, cpu = min(r[0] for r in results), min(r[1] for r in results)
    p = results[0][2]
    f = p["fit"]
    what = "with leave-one-out (6 fits)" if loo else "without leave-one-out (1 fit)"
    cores = max(1, min(a.workers, 6 if loo else 1))
    print(f"calibration over {len(RUNS)} DistServe runs ({sum(r['num_requests'] for r in p['runs'])} requests) {what}, "
          f"{a.workers} worker(s), {os.cpu_count()} CPUs: best of {len(results)}: {wall:.1f} s wall "
          f"({wall / TARGET_S:.2f}× the {TARGET_S:.0f} s target), {cpu:.1f} s CPU with its workers "
          f"(÷ {cores} core(s) used = {cpu / cores:.1f} s, {cpu / cores / TARGET_S:.2f}× the target, if the machine "
          f"were its alone)")
    print(f"{floor_line(floor)}; best wall = {in_floor_steps(wall, floor)}")
    print(f"fit on all five: objective {f['objective_start']:.3f} → {f['objective']:.3f}, {f['iterations']} "
          f"Gauss-Newton iterations, {f['num_replays']} replays; deterministic across repeats: "
          f"{'yes' if len(sigs) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
