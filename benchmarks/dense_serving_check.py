"""Replay public dense-model serving measurements through ``kvledger simulate`` (uncalibrated) and print the errors.

The points are ``benchmarks/data/public-dense-serving/points.csv`` (provenance in SOURCES.md there): measured
mean TTFT, mean TPOT, throughput or medians of dense models served by vLLM on GPUs that ``../shared/data`` holds no
measured run of (A100 80GB, MI300X, MI355X, L4). They are held out: nothing in kvledger was fitted to them, and
nothing may be. Each ``run`` (one benchmark invocation) is simulated once; each row is one metric of it.

Each run executes ``kvledger simulate MODEL --json`` as a user on that GPU would, with no GPU profile and no
calibration, in a subprocess whose ``PYTHONPATH`` is ``--src`` (default: this repository's ``src``)::

    python benchmarks/dense_serving_check.py                      # this tree
    python benchmarks/dense_serving_check.py --src /other/tree/src

Workload: fixed prompt/output lengths (the source's, or its means where lengths were not forced); a closed loop at
the stated max concurrency (every request sent at once, ``--request-rate inf``), or, with no concurrency, every
request at t=0 (a burst of the source's own request count). Band coverage: whether the measured value lies inside
the 80% band ``simulate`` prints for that metric (mean TTFT, mean TPOT, throughput; output tok/s uses the
throughput band scaled by the simulated output tokens per request; medians have no band).
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
POINTS = ROOT / "benchmarks" / "data" / "public-dense-serving" / "points.csv"
#: metric -> (summary field, statistic, scale to the metric's unit, band key in simulate's error_bands)
METRICS = {
    "ttft_mean_ms": ("ttft_s", "mean", 1e3, "ttft_mean"),
    "tpot_mean_ms": ("tpot_s", "mean", 1e3, "tpot_mean"),
    "ttft_p50_ms": ("ttft_s", "p50", 1e3, None),
    "itl_p50_ms": ("itl_s", "p50", 1e3, None),
    "itl_mean_ms": ("itl_s", "mean", 1e3, None),
    "request_per_s": ("throughput_req_per_s", None, 1.0, "throughput"),
    "output_tok_per_s": ("throughput_output_tok_per_s", None, 1.0, "throughput"),
}


def sim_argv(p: dict) -> list[str]:
    """``kvledger simulate`` arguments for one run (shared by all its rows)."""
    model = p["model"]
    if model.endswith(".json"):
        model = str(ROOT / model)
    argv = ["simulate", model, "--gpu", p["gpu"], "--tp", p["tp"] or "1",
            "--prompt-lengths", f"fixed:{p['prompt_tokens']}", "--output-lengths", f"fixed:{p['output_tokens']}",
            "--rate", p["request_rate"] or "inf", "--num-requests", p["source_num_requests"], "--json"]
    if p["concurrency"]:
        argv += ["--concurrency", p["concurrency"]]
    if p.get("engine") == "sglang":
        argv += ["--engine", "sglang"]
    if p["engine_version"]:
        argv += ["--engine-version", p["engine_version"]]
    return argv + (p.get("extra_flags") or "").split()


def run_sim(p: dict, src: Path) -> tuple[dict | None, str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "import sys; from kvledger.cli.main import main; sys.argv[0] = 'kvledger'; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, *sim_argv(p)], env=env, capture_output=True, text=True,
                          timeout=900)
    if proc.returncode != 0:
        return None, (proc.stdout.strip() or proc.stderr.strip() or "?").splitlines()[-1][:200]
    return json.loads(proc.stdout), ""


def predicted(out: dict, metric: str) -> tuple[float, tuple[float, float] | None]:
    """The simulated value of ``metric`` and its printed 80% band (None where simulate prints none)."""
    field, stat, scale, band_key = METRICS[metric]
    s = out["summary"]
    value = (s[field][stat] if stat else s[field]) * scale
    band = (out.get("error_bands") or {}).get(band_key) if band_key else None
    if band is None:
        return value, None
    # the band is stored in the regime's own unit (s, or req/s for throughput); scale it with the prediction
    k = value / band["predicted"]
    return value, (band["low"] * k, band["high"] * k)


def evaluate(points: list[dict], sims: dict) -> list[dict]:
    rows = []
    for p in points:
        out, err = sims[p["run"]]
        meas = float(p["value"])
        pred, band = predicted(out, p["metric"]) if out else (None, None)
        rows.append({"run": p["run"], "source": p["source_name"], "model": p["served_model"], "gpu": p["gpu"],
                     "tp": p["tp"], "metric": p["metric"], "measured": meas, "predicted": pred,
                     "error": None if pred is None else pred / meas - 1, "band": band,
                     "covered": None if band is None else band[0] <= meas <= band[1], "failure": err,
                     "control": p.get("control") == "1"})
    return rows


def print_rows(rows: list[dict]) -> None:
    hdr = f"{'run':<14} {'model':<24} {'gpu':<20} {'metric':<16} {'measured':>11} {'predicted':>11} {'error':>8}  band"
    print(hdr)
    print("-" * (len(hdr) + 22))
    for r in rows:
        name = r["model"].split("/")[-1][:24]
        if r["predicted"] is None:
            print(f"{r['run']:<14} {name:<24} {r['gpu']:<20} {r['metric']:<16} {r['measured']:11.4g} "
                  f"{'FAILED':>11} {r['failure'][:70]}")
            continue
        band = "none" if r["band"] is None else \
            f"{r['band'][0]:.4g}–{r['band'][1]:.4g} {'covers' if r['covered'] else 'MISSES'}"
        print(f"{r['run']:<14} {name:<24} {r['gpu']:<20} {r['metric']:<16} {r['measured']:11.4g} "
              f"{r['predicted']:11.4g} {r['error']:+8.1%}  {band}")


def _metric_lines(ok: list[dict]) -> None:
    for metric in METRICS:
        errs = [r["error"] for r in ok if r["metric"] == metric]
        if not errs:
            continue
        banded = [r for r in ok if r["metric"] == metric and r["covered"] is not None]
        cov = f"{sum(r['covered'] for r in banded)}/{len(banded)}" if banded else "no band"
        print(f"  {metric:<18} {statistics.mean(abs(x) for x in errs):7.1%} {statistics.median(errs):+8.1%}"
              f"  n={len(errs):<3} band {cov}")


def print_summary(rows: list[dict]) -> None:
    ok = [r for r in rows if r["error"] is not None]
    for label, part in (("held out (GPUs with no run in ../shared)", [r for r in ok if not r["control"]]),
                        ("control (the GPU the bands were measured on)", [r for r in ok if r["control"]])):
        if not part:
            continue
        banded = [r for r in part if r["covered"] is not None]
        covered = sum(r["covered"] for r in banded)
        print(f"\n{label}: mean |error| {statistics.mean(abs(r['error']) for r in part):.1%} over {len(part)} rows"
              f" of {len({r['run'] for r in part})} runs; bands cover {covered}/{len(banded)}")
        print("  per metric (mean |error|, median signed error, n; band: covered / banded):")
        _metric_lines(part)
    print("\nper GPU (mean |error| over all its rows, n):")
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        errs = [r["error"] for r in ok if r["gpu"] == gpu]
        if errs:
            print(f"  {gpu:<22} {statistics.mean(abs(x) for x in errs):7.1%}  n={len(errs)}")
    failed = len(rows) - len(ok)
    if failed:
        print(f"  {failed} row(s) failed")


def replay_points(description: str, default_points: Path) -> tuple[argparse.Namespace, list[dict], dict, float]:
    """The command line of a public-points check (``--src``, ``--points``, ``--jobs``, ``--json``), its points read
    and each run simulated once: (args, points, simulations by run, seconds taken)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="source tree whose kvledger to import")
    ap.add_argument("--points", type=Path, default=default_points)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the per-row results here")
    args = ap.parse_args()
    args.src = args.src.resolve()
    points = list(csv.DictReader(args.points.open()))
    runs = {p["run"]: p for p in points}
    t0 = time.time()
    with ThreadPoolExecutor(args.jobs) as ex:
        sims = dict(zip(runs, ex.map(lambda p: run_sim(p, args.src), runs.values())))
    return args, points, sims, time.time() - t0


def main() -> int:
    args, points, sims, took_s = replay_points(__doc__.splitlines()[0], POINTS)
    src = args.src
    print(f"kvledger from {src}; {len(points)} rows of {len(sims)} runs in {took_s:.0f} s (uncalibrated)")
    rows = evaluate(points, sims)
    print_rows(rows)
    print_summary(rows)
    if args.json:
        args.json.write_text(json.dumps({"src": str(src), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
