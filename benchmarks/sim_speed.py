"""Simulator speed and memory, in one run: the whole Azure conversation trace as a user runs it, scaling to 1M
requests, step rate.

Prints three tables:

1. Whole process, ``kvledger simulate meta-llama/Llama-3.1-8B --gpu H100 --trace azure-conv
   --json`` (19,366 requests; interpreter start, imports, trace, plan, simulation, output):
   best and median wall of ``--repeat`` runs and peak RSS (``os.wait4``), next to the
   peers' figures recorded on this machine (issue 10: Vidur 0.0.26 warm, closest settings,
   58.8 s and 854 MiB; BLIS, its fastest flag, 7.7 s and 574 MiB; ``blis_pairs.py`` runs BLIS in
   turn with kvledger on this machine, the comparison issue 25 asks for). With ``--with-vidur``,
   Vidur 0.0.26 is installed into its own environment and run on the same trace with its
   closest settings (vidur_run.py), timed the same way, and printed beside kvledger; where it
   cannot be installed or run, the script stops with the reason (exit status 2). Then one line:
   the part of the process outside the simulation's event loop (start-up to the first step;
   summary, output and exit), best of ``--repeat`` (at least 3) runs (startup_speed.py).
2. Scaling: 1k, 10k, 100k, 1M requests (``--sizes``), each in a fresh process: the Azure
   conversation trace tiled end to end (request i is row i mod 19,366, shifted by whole
   trace spans, so load and lengths stay those of the real trace), Llama-3.1-8B on H100,
   roofline step cost, no token times kept (``record_token_times=False``, as the CLI
   without ``--out``). The child builds the tiled workload as columns (``WorkloadColumns``:
   numpy arrays of arrival times and token counts, ids "0", "1", ...; each ``RequestSpec`` is
   made only when the request is delivered), and the simulator keeps the records as columns
   (record_sink.py). Wall of the simulation alone, peak RSS of the process.
3. Step rate: CPU time per simulated engine step against an empty-loop floor (a Python loop
   doing one dict update per step), both as CPU time; for each size up to 100,000 requests the
   first call (with the one-time work of a process's first simulation) and the same run again
   in that process (warm: the cost of a step itself, which the goal is judged on).
4. Policies and step costs: the whole-process run of table 1 with ``--policy sglang`` and with a
   Vidur-priced step cost, as ratios to ``--policy vllm`` with the roofline (``--only-variants``: this
   table alone).

Goal (issue 10): Azure conversation whole process ≤ 1.0 s; 1M requests ≤ 30 s and ≤ 500 MiB. Issue 25: 1M requests
< 300 MiB; a step within 10× the empty loop (the whole process against BLIS: blis_pairs.py); the SGLang policy within
1.5× of the vLLM policy.
Timings on a shared machine are noisy: best-of-N is printed with the median.

    python benchmarks/sim_speed.py [--repeat 3] [--sizes 1000,10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

VIDUR_S, VIDUR_MIB = 58.8, 854  # issue 10, measured on this machine: Vidur 0.0.26 warm, closest settings
BLIS_S, BLIS_MIB = 7.7, 574  # issue 10: BLIS (Go), its fastest flag
CLI = ["-m", "kvledger.cli.main", "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv",
       "--json"]


def run_process(argv: list[str]) -> tuple[float, float, str, float]:
    """(wall s, peak RSS MiB, stdout, CPU s) of one child process (its own rusage, from ``os.wait4``).

    CPU time (user + system) is printed beside wall time: on a machine shared with other work it
    is the steadier figure (wall ≈ CPU when the process has a core to itself).
    """
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv[:3])} … failed:\n{err.read()[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime  # ru_maxrss: KiB on Linux


def whole_process(repeat: int, vidur: tuple[list[float], float] | None = None) -> None:
    walls, peaks, cpus = [], [], []
    for _ in range(repeat):
        wall, peak, out, cpu = run_process(CLI)
        walls.append(wall)
        peaks.append(peak)
        cpus.append(cpu)
    summary = json.loads(out)["summary"]
    best, med = min(walls), statistics.median(walls)
    print(f"1. Azure conversation trace, whole process ({summary['num_requests']:,} requests, "
          f"{summary['num_steps']:,} steps), best of {repeat}:")
    print(f"   {'tool':<34}{'wall s':>9}{'× kvledger':>12}{'peak RSS MiB':>14}")
    print(f"   {'kvledger (best / median)':<34}{best:>9.2f}{1:>12.1f}{max(peaks):>14.0f}   median {med:.2f} s, "
          f"CPU best {min(cpus):.2f} s")
    if vidur is not None:
        v_walls, v_peak = vidur
        v = min(v_walls)
        print(f"   {'Vidur 0.0.26 warm (measured now)':<34}{v:>9.1f}{v / best:>12.1f}{v_peak:>14.0f}   median "
              f"{statistics.median(v_walls):.1f} s")
    else:
        print(f"   {'Vidur 0.0.26 warm (recorded)':<34}{VIDUR_S:>9.1f}{VIDUR_S / best:>12.1f}{VIDUR_MIB:>14}")
    print(f"   {'BLIS, fastest flag (recorded)':<34}{BLIS_S:>9.1f}{BLIS_S / best:>12.1f}{BLIS_MIB:>14}   "
          "(in turn on this machine: blis_pairs.py)")
    print(f"   goal ≤ 1.0 s: {'met' if best <= 1.0 else 'NOT met'}")


CHILD = r"""
import json, sys, time
import numpy as np
from kvledger.analyses.serving.sim_ledgers import prepare_run
from kvledger.dynamics.simulator import simulate
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.dynamics.workload.columns import WorkloadColumns
n = int(sys.argv[1])
setup = prepare_run(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv"))
base = setup.workload
span = base[-1].arrival_s - base[0].arrival_s + (base[-1].arrival_s - base[0].arrival_s) / len(base)
m = len(base)
t, p, o = base.arrival_s, base.num_prompt_tokens, base.num_output_tokens  # the trace, read as WorkloadColumns
i = np.arange(n)
reqs = WorkloadColumns(t[i % m] + (i // m) * span, p[i % m], o[i % m])  # ids "0", "1", ... (id_rows None)
del base, setup.workload, i
t0, c0 = time.perf_counter(), time.process_time()
res = simulate(reqs, setup.config, setup.cost, record_token_times=False)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
s = res.summary
warm = None
if n <= 100_000:  # the same run again in this process: the step cost without the first call's one-time work
    c0 = time.process_time()
    simulate(reqs, setup.config, setup.cost, record_token_times=False)
    warm = time.process_time() - c0
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "warm_cpu_s": warm, "steps": s.num_steps, "finished": s.num_finished,
                  "tpot_p50_s": s.tpot_s.p50}))
"""


def scaling(sizes: list[int]) -> list[dict]:
    print("2. Scaling (Azure conversation trace tiled; Llama-3.1-8B, H100, roofline; no token times kept):")
    print(f"   {'requests':>10}{'sim wall s':>12}{'sim CPU s':>11}{'µs/request':>12}{'steps':>13}{'µs/step':>9}"
          f"{'peak RSS MiB':>14}")
    rows = []
    for n in sizes:
        _, peak, out, _ = run_process(["-c", CHILD, str(n)])
        r = json.loads(out)
        r.update(n=n, peak_mib=peak)
        rows.append(r)
        print(f"   {n:>10,}{r['wall_s']:>12.2f}{r['cpu_s']:>11.2f}{r['wall_s'] / n * 1e6:>12.0f}{r['steps']:>13,}"
              f"{r['wall_s'] / r['steps'] * 1e6:>9.2f}{peak:>14.0f}")
    big = [r for r in rows if r["n"] == 1_000_000]
    if big:
        r = big[0]
        print(f"   goal 1M ≤ 500 MiB (issue 10), < 300 MiB (issue 25): {'met' if r['peak_mib'] <= 500 else 'NOT met'}, "
              f"{'met' if r['peak_mib'] < 300 else 'NOT met'} ({r['peak_mib']:.0f} MiB); "
              f"1M ≤ 30 s: {'met' if r['wall_s'] <= 30 else 'NOT met'} ({r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s "
              f"CPU)")
    return rows


VARIANTS = [("vLLM policy, roofline (the reference)", ["--policy", "vllm"]),
            ("SGLang policy, roofline", ["--policy", "sglang"]),
            ("vLLM policy, Vidur-priced steps", ["--policy", "vllm", "--step-cost",
                                                  "calibrated:vidur:meta-llama/Llama-2-7b-hf@h100-80gb/tp1"])]


def variants(repeat: int) -> None:
    """Whole-process wall and CPU of the same CLI run under the SGLang policy and a Vidur-priced step cost, against
    the vLLM policy with the roofline (runs interleaved, best of ``repeat``). Goal (issue 25): SGLang ≤ 1.5×."""
    best = {name: (math.inf, math.inf) for name, _ in VARIANTS}
    for _ in range(repeat):
        for name, extra in VARIANTS:
            wall, _, _, cpu = run_process(CLI + extra)
            w, c = best[name]
            best[name] = (min(w, wall), min(c, cpu))
    ref_w, ref_c = best[VARIANTS[0][0]]
    print(f"4. Policies and step costs, whole process on the Azure conversation trace, best of {repeat} (interleaved):")
    print(f"   {'run':<40}{'wall s':>8}{'× ref':>7}{'CPU s':>8}{'× ref':>7}")
    for name, _ in VARIANTS:
        w, c = best[name]
        print(f"   {name:<40}{w:>8.2f}{w / ref_w:>7.2f}{c:>8.2f}{c / ref_c:>7.2f}")
    w, c = best[VARIANTS[1][0]]
    print(f"   goal SGLang ≤ 1.5× the vLLM policy: {'met' if w / ref_w <= 1.5 else 'NOT met'} ({w / ref_w:.2f}× wall, "
          f"{c / ref_c:.2f}× CPU)")


def step_floor(steps: int = 2_000_000) -> float:
    """Seconds per iteration of an empty Python loop doing one dict update (the floor for a per-step simulator)."""
    d = {"now_s": 0.0}
    t0 = time.process_time()
    for _ in range(steps):
        d["now_s"] += 0.001
    return (time.process_time() - t0) / steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1000,10000,100000,1000000")
    ap.add_argument("--only-variants", action="store_true", help="print table 4 only (SGLang and Vidur-priced runs)")
    ap.add_argument("--with-vidur", action="store_true",
                    help="install Vidur 0.0.26 into its own venv and run it on the same trace (vidur_run.py)")
    args = ap.parse_args()
    vidur = None
    if args.with_vidur:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from vidur_run import VidurUnavailable, run_vidur

        try:
            vidur = run_vidur(args.repeat)
        except VidurUnavailable as err:
            print(f"--with-vidur: {err}", file=sys.stderr)
            raise SystemExit(2) from None
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from startup_speed import compile_package, outside_simulation_line  # start-up + wrap-up: outside the event loop

    compile_package()  # as installed: without bytecode every run compiles the package again (PYTHONDONTWRITEBYTECODE)
    if args.only_variants:
        variants(max(args.repeat, 3))
        return
    whole_process(args.repeat, vidur)
    print(outside_simulation_line(max(args.repeat, 3)))
    rows = scaling([int(x) for x in args.sizes.split(",") if x])
    floor = min(step_floor() for _ in range(3))
    print("3. Step rate (CPU time of the simulation alone, per simulated engine step):")
    print(f"   empty loop, one dict update per step: {floor * 1e6:.3f} µs/step ({1 / floor / 1e6:.1f} M steps/s)")
    print("   (first call: the process's first simulation, with its one-time work — modules imported on first use, "
          "caches filled —; warm: the same run again in that process, the cost of a step itself; judged on warm, "
          "or on the first call where no warm run is made, above 100,000 requests)")
    for r in rows:
        first = r["cpu_s"] / r["steps"]
        per = r["warm_cpu_s"] / r["steps"] if r.get("warm_cpu_s") is not None else first
        print(f"   {r['n']:>10,} requests: first call {first * 1e6:.3f} µs/step ({first / floor:.1f}× the floor); "
              f"warm {per * 1e6:.3f} µs/step ({1 / per / 1e6:.2f} M steps/s), {per / floor:.1f}× the floor "
              f"(goal ≤ 10×, issue 25: {'met' if per <= 10 * floor else 'NOT met'})")
    variants(max(args.repeat, 3))


if __name__ == "__main__":
    main()
