"""Replay public SGLang serving measurements through ``kvledger simulate --engine sglang`` (uncalibrated), print the
errors, the engine-relative errors against the same pages' vLLM runs, and the band those errors would make.

The points are ``benchmarks/data/public-sglang-serving/points.csv`` (provenance in SOURCES.md there): measured
request or output throughput, mean TTFT, mean TPOT and mean ITL of dense and MoE models served by SGLang (0.4.5.post3
to 0.5.5.post1) on A100, H100 and H200 GPUs. They are held out: nothing in kvledger was fitted to them, and nothing
may be. Rows with ``control`` = 1 are the same pages' vLLM runs (same GPU, client and dataset), replayed with vLLM's
rules: the ratio SGLang/vLLM, measured against simulated, separates the engine from the page. Each ``run`` is
simulated once, in a subprocess, exactly as ``dense_serving_check.py`` does (same workload rules)::

    python benchmarks/sglang_serving_check.py                      # this tree
    python benchmarks/sglang_serving_check.py --src /other/tree/src

The band: the errors grouped by deployment (source, model, GPU, TP, engine version), per metric, through the same
rule as the stored bands (``lodo_bands._q``: split-conformal ranks from ten values and nine deployments, else the t
prediction interval with each deployment weighted once), printed beside the stored band SGLang borrows today (the
vLLM regime of the same architecture). Band metrics: throughput = request throughput of a burst (every request at
t=0, so the engine ran saturated); TTFT mean = every mean TTFT; TPOT mean = every mean TPOT, and mean ITL where the
output lengths were fixed (EOS ignored: the mean ITL is then the mean TPOT). Nothing here is written to the product.
"""

from __future__ import annotations

import json
import statistics
import sys

from dense_serving_check import ROOT, evaluate, print_rows, replay_points

POINTS = ROOT / "benchmarks" / "data" / "public-sglang-serving" / "points.csv"
BANDS = ROOT / "src" / "kvledger" / "ledgers" / "data" / "error_bands.json"
MOE_MODELS = ("gpt-oss", "Qwen3-235B", "DeepSeek-R1")


def arch(model: str) -> str:
    return "moe" if any(m in model for m in MOE_MODELS) else "dense"


def deployment(p: dict) -> str:
    return f"{p['source_name'].split(' (')[0]} {p['served_model'].split('/')[-1]} {p['gpu']} TP {p['tp']} " \
           f"{p['engine']} {p['engine_version']}"


def band_metric(p: dict) -> str | None:
    """The stored band's metric this row's error counts towards (module docstring), or None."""
    m = p["metric"]
    if m == "request_per_s" and p["request_rate"] == "inf" and not p["concurrency"]:
        return "throughput"
    if m == "ttft_mean_ms":
        return "ttft_mean"
    if m == "tpot_mean_ms" or (m == "itl_mean_ms" and "EOS ignored" in p["notes"]):
        return "tpot_mean"
    return None


def summary(rows: list[dict], points: list[dict]) -> None:
    by_row = {(p["run"], p["metric"]): p for p in points}
    for label, ctrl in (("SGLang (held out)", False), ("vLLM controls (same pages)", True)):
        for a in ("dense", "moe"):
            part = [r for r in rows if r["error"] is not None and r["control"] == ctrl and arch(r["model"]) == a]
            if not part:
                continue
            deps = {deployment(by_row[(r["run"], r["metric"])]) for r in part}
            print(f"\n{label}, {a}: {len(part)} values, {len(deps)} deployments (mean |error|, median signed, n):")
            for metric in dict.fromkeys(r["metric"] for r in part):
                errs = [r["error"] for r in part if r["metric"] == metric]
                print(f"  {metric:<18} {statistics.mean(abs(x) for x in errs):8.1%} {statistics.median(errs):+8.1%}"
                      f"  n={len(errs)}")


def engine_relative(rows: list[dict]) -> None:
    """SGLang/vLLM on the same page: measured ratio, simulated ratio, and the error of the simulated ratio."""
    got = {(r["run"], r["metric"]): r for r in rows if r["error"] is not None}
    print("\nSGLang / vLLM on the same page (run, metric: measured ratio, simulated ratio, error of the ratio):")
    errs = []
    for (run, metric), r in got.items():
        c = got.get((f"{run}-vllm", metric))
        if r["control"] or c is None:
            continue
        meas, pred = r["measured"] / c["measured"], r["predicted"] / c["predicted"]
        errs.append((metric, pred / meas - 1))
        print(f"  {run:<16} {metric:<15} {meas:7.3f} {pred:7.3f} {pred / meas - 1:+8.1%}")
    for metric in dict.fromkeys(m for m, _ in errs):
        e = [x for m, x in errs if m == metric]
        print(f"  {metric:<15} mean |error| of the ratio {statistics.mean(abs(x) for x in e):.1%}, "
              f"median {statistics.median(e):+.1%}, n={len(e)}")


def band_lines(rows: list[dict], points: list[dict]) -> None:
    from lodo_bands import _q

    by_row = {(p["run"], p["metric"]): p for p in points}
    stored = json.loads(BANDS.read_text())["regimes"]
    print("\nBands (80%: the stored bands' rule, lodo_bands._q; multipliers of a prediction = 1/(1 + q90) … "
          "1/(1 + q10)):")
    for ctrl, engine in ((False, "sglang"), (True, "vllm")):
        for a in ("dense", "moe", "all"):
            errs: dict[str, list[tuple[float, str]]] = {}
            for r in rows:
                p = by_row[(r["run"], r["metric"])]
                m = band_metric(p)
                if r["error"] is None or r["control"] != ctrl or m is None or a not in ("all", arch(r["model"])):
                    continue
                errs.setdefault(m, []).append((r["error"], deployment(p)))
            for m, eg in sorted(errs.items()):
                q = _q([e for e, _ in eg], [g for _, g in eg])
                borrowed = (stored.get(f"uncalibrated/{a}/vllm") or {}).get(m) if engine == "sglang" else None
                tail = "" if borrowed is None else \
                    f"   stored uncalibrated/{a}/vllm: {borrowed['q10']:+.1%} … {borrowed['q90']:+.1%} " \
                    f"({borrowed['num_deployments']} deployments)"
                label = f"public {engine} ({'controls' if ctrl else 'held out'}) {a}"
                print(f"  {label:<34} {m:<11} q10 {q['q10']:+8.1%} q90 {q['q90']:+8.1%}  "
                      f"{q['num_deployments']} deployments, {q['num_runs']} values; {q['method'][:40]}{tail}")


def main() -> int:
    args, points, sims, took_s = replay_points(__doc__.splitlines()[0], POINTS)
    src = args.src
    print(f"kvledger from {src}; {len(points)} rows of {len(sims)} runs in {took_s:.0f} s (uncalibrated; "
          f"control rows: the same pages' vLLM runs)")
    rows = evaluate(points, sims)
    print_rows(rows)
    summary(rows, points)
    engine_relative(rows)
    band_lines(rows, points)
    if args.json:
        args.json.write_text(json.dumps({"src": str(src), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
