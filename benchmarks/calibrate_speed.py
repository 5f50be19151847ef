"""How long a calibration over DistServe's five measured vLLM runs takes (target: under a minute on one core).

    python benchmarks/calibrate_speed.py [--repeat N]

Runs exactly what ``kvledger calibrate distserve:vllm-100-1 … distserve:vllm-400-4 --no-leave-one-out`` runs
(load the runs, build the engine from the flags, project the start model, fit) and prints the wall time and the
CPU time of this process (the CPU time is what one core spends; the wall time also counts waiting for a shared
machine), best of ``--repeat``, with the fit's objective and replays. The fit is deterministic: every repeat
must give the same coefficients, which the script checks.
"""

from __future__ import annotations

import argparse
import time

TARGET_S = 60.0
RUNS = ["distserve:vllm-100-1", "distserve:vllm-100-2", "distserve:vllm-200-2", "distserve:vllm-300-3",
        "distserve:vllm-400-4"]


def once():
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.calibration.api import calibrate_files

    a = SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", gpu_memory_utilization=0.95,
                       max_num_batched_tokens=16384, max_num_seqs=1024, max_model_len=2048, block_size=16,
                       batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False,
                       step_cost="calibrated")
    w, c = time.perf_counter(), time.process_time()
    p = calibrate_files(RUNS, a, max_paddings=256, leave_one_out=False)
    return time.perf_counter() - w, time.process_time() - c, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=2)
    n = ap.parse_args().repeat
    results = [once() for _ in range(max(n, 1))]
    coefs = {tuple(sorted(p["step_cost"].items(), key=lambda kv: kv[0])).__repr__() for _, _, p in results}
    wall, cpu = min(r[0] for r in results), min(r[1] for r in results)
    p = results[0][2]
    f = p["fit"]
    print(f"calibration over {len(RUNS)} DistServe runs ({sum(r['num_requests'] for r in p['runs'])} requests): "
          f"best of {len(results)}: {wall:.1f} s wall, {cpu:.1f} s CPU (target < {TARGET_S:.0f} s on one core: "
          f"{cpu / TARGET_S:.2f}× of it)")
    print(f"objective {f['objective_start']:.3f} → {f['objective']:.3f}, {f['iterations']} Gauss-Newton iterations, "
          f"{f['num_replays']} replays; deterministic across repeats: {'yes' if len(coefs) == 1 else 'NO'}")


if __name__ == "__main__":
    main()
