"""The public MoE serving figures (``benchmarks/data/public-moe-serving``) as leave-one-deployment-out rows for the
error bands (``lodo_bands.lodo``): kvledger's regime uncalibrated/moe/vllm had one measured run
(DeepSeek-V3.2-Exp-16L64E on an RTX PRO 6000) and borrowed the dense bands for its latency, narrower than what these
figures show.

Each vLLM point is replayed as ``moe_serving_check.py`` replays it (``kvledger simulate`` at the stated concurrency or
burst, fixed lengths, uncalibrated). A deployment is one source's model, GPU, TP and engine version. A TPOT measured at
a fixed concurrency is a mean-TPOT error below saturation; a request throughput under a burst sent at once (``rate``
inf) is a saturation-throughput error. SGLang points are left out (the bands' regimes here are vLLM's), as is output
token throughput at a fixed concurrency (neither a latency nor a capacity).
"""

from __future__ import annotations

import csv
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METRIC = {"tpot_ms": "tpot_mean", "request_per_s": "throughput"}


def _deployment(p: dict) -> str:
    version = f" vLLM {p['engine_version']}" if p["engine_version"] else " vLLM"
    source = re.sub(r"\s*(PR )?#\d+", "", p["source_name"])  # the source's name, not an issue's number
    return f"public {source} {p['model'].split('/')[-1]} {p['gpu']} TP {p['tp'] or 1}{version}"


def public_moe_rows(jobs: int = 2, extra_flags: str = "") -> list[dict]:
    """One row per deployment: ``{"deployment", "gpu", "kind", "arch": "moe", "uncalibrated": {metric: [errors]},
    "files": []}`` (no file of a run ``validate`` reads: none is a band member); ``extra_flags``: added to every
    point's ``simulate`` (gpu_holdout.py prices them as on a GPU nobody measured)."""
    from moe_serving_check import POINTS, run_point

    points = [{**p, "extra_flags": f"{p.get('extra_flags') or ''} {extra_flags}".strip()}
              for p in csv.DictReader(POINTS.open()) if p["engine"] == "vllm" and p["metric"] in METRIC
              and (p["metric"] == "tpot_ms") == bool(p["concurrency"])]
    with ThreadPoolExecutor(jobs) as ex:
        preds = list(ex.map(lambda p: run_point(p, ROOT / "src")[0], points))
    rows: dict[str, dict] = {}
    for p, pred in zip(points, preds):
        if pred is None:
            continue
        r = rows.setdefault(_deployment(p), {"deployment": _deployment(p), "gpu": p["gpu"], "kind": "public aggregate",
                                             "arch": "moe", "files": [], "wall_s": 0.0,
                                             "uncalibrated": {"ttft_mean": [], "tpot_mean": [], "throughput": []}})
        r["uncalibrated"][METRIC[p["metric"]]].append(pred / float(p["value"]) - 1)
    return list(rows.values())


if __name__ == "__main__":
    for r in public_moe_rows():
        print(r["deployment"], {m: [f"{e:+.1%}" for e in v] for m, v in r["uncalibrated"].items() if v})
