"""Replay public MoE serving measurements through ``kvledger simulate`` and print predicted/measured.

The points are ``benchmarks/data/public-moe-serving/points.csv`` (provenance in SOURCES.md there):
measured TPOT, output token throughput or request throughput of MoE models served by vLLM or SGLang
on NVIDIA GPUs. None of them was used to fit kvledger's step cost or its fused-MoE kernel term.

Each point runs ``kvledger simulate MODEL --json`` as a user would, in a subprocess whose
``PYTHONPATH`` is ``--src`` (default: this repository's ``src``), so the same script compares two
source trees::

    python benchmarks/moe_serving_check.py                      # this tree
    python benchmarks/moe_serving_check.py --src /other/tree/src

Workload: fixed prompt/output lengths; closed loop at the stated concurrency with
max(50, 4 x concurrency) requests, or, for ``request_rate`` inf (every request sent at t=0), the
source's own request count (``source_num_requests``), since a burst's throughput depends on it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "benchmarks" / "data" / "public-moe-serving" / "points.csv"


def sim_argv(p: dict) -> list[str]:
    """``kvledger simulate`` arguments for one point."""
    argv = ["simulate", p["model"], "--gpu", p["gpu"], "--tp", p["tp"] or "1",
            "--prompt-lengths", f"fixed:{p['prompt_tokens']}",
            "--output-lengths", f"fixed:{p['output_tokens']}", "--json"]
    if p["concurrency"]:
        conc = int(p["concurrency"])
        argv += ["--concurrency", str(conc), "--num-requests", str(max(50, 4 * conc))]
    else:
        argv += ["--rate", p["request_rate"], "--num-requests", p["source_num_requests"]]
    if p["engine"] == "sglang":
        argv += ["--policy", "sglang"]
    if p["engine_version"]:
        argv += ["--engine-version", p["engine_version"]]
    return argv + (p.get("extra_flags") or "").split()  # the source's serve flags that kvledger models


def predicted(summary: dict, metric: str) -> float:
    if metric == "tpot_ms":
        return summary["tpot_s"]["mean"] * 1e3
    if metric == "output_tok_per_s":
        return summary["throughput_output_tok_per_s"]
    if metric == "request_per_s":
        return summary["throughput_req_per_s"]
    raise ValueError(metric)


def run_point(p: dict, src: Path) -> tuple[float | None, str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "import sys; from kvledger.cli.main import main; sys.argv[0] = 'kvledger'; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, *sim_argv(p)], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["?"])[-1]
    out = json.loads(proc.stdout)
    return predicted(out["summary"], p["metric"]), ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="source tree whose kvledger to import")
    ap.add_argument("--points", type=Path, default=POINTS)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the per-point results here")
    args = ap.parse_args()
    src = args.src.resolve()
    points = list(csv.DictReader(args.points.open()))
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda p: run_point(p, src), points))

    print(f"kvledger from {src}; {len(points)} points in {time.time() - t0:.0f} s")
    hdr = f"{'#':>2} {'source':<26} {'model':<22} {'gpu':<21} {'tp':>2} {'metric':<16} {'workload':<18}" \
          f" {'measured':>9} {'predicted':>9} {'error':>7}"
    print(hdr)
    print("-" * len(hdr))
    rows = []
    for i, (p, (pred, err)) in enumerate(zip(points, results), 1):
        meas = float(p["value"])
        load = f"c={p['concurrency']}" if p["concurrency"] else f"rate={p['request_rate']}"
        load += f" {p['prompt_tokens']}/{p['output_tokens']}"
        e = None if pred is None else pred / meas - 1
        rows.append({"point": i, "source": p["source_name"], "model": p["model"], "gpu": p["gpu"], "tp": p["tp"],
                     "engine": p["engine"], "metric": p["metric"], "workload": load, "measured": meas,
                     "predicted": pred, "error": e, "failure": err})
        shown = f"{pred:9.3f} {e:+7.1%}" if pred is not None else f"{'FAILED':>9} {err[:60]}"
        print(f"{i:>2} {p['source_name'][:26]:<26} {p['model'].split('/')[-1][:22]:<22} {p['gpu']:<21} {p['tp']:>2}"
              f" {p['metric']:<16} {load:<18} {meas:9.3f} {shown}")

    print("\nper model (mean |error|, median signed error, n):")
    ok = [r for r in rows if r["error"] is not None]
    for model in dict.fromkeys(r["model"] for r in rows):
        errs = [r["error"] for r in ok if r["model"] == model]
        if errs:
            print(f"  {model:<26} {statistics.mean(abs(x) for x in errs):7.1%} {statistics.median(errs):+8.1%}"
                  f"  n={len(errs)}")
    if ok:
        errs = [r["error"] for r in ok]
        print(f"  {'ALL':<26} {statistics.mean(abs(x) for x in errs):7.1%} {statistics.median(errs):+8.1%}"
              f"  n={len(errs)}")
    failed = len(rows) - len(ok)
    if failed:
        print(f"  {failed} point(s) failed")
    if args.json:
        args.json.write_text(json.dumps({"src": str(src), "points": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
