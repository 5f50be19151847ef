"""The cross-model error band of a GPU profile: how far a GPU-scope calibration was off on models it was not fitted
on, from issue 23's must-hold count (``validate_all.py --sections gpuscope``, benchmarks/gpuscope_all.py).

    python benchmarks/crossmodel_bands.py [--from-json GPUSCOPE.json] [--write]

Data: every run of a dense model priced by a GPU profile fitted on *other* models on its GPU (the rows whose regime is
"GPU profile": kubecon's 28 H100 stages, fitted on inference-sim/training's models, training's 16 stages, each fitted
on the other models, and the RTX PRO 6000's dense runs), the values each run is judged on (mean TTFT and mean TPOT
below saturation, throughput at saturation), under each of the section's fit rules ("all" other models on the GPU;
"setup": the run's own client's other models first; "client": "all" with the set-up's latency). Read from the
section's ``--json`` output — what the stored band is built from —, or, by default, from the latest per-run table of
docs/validation.md §2.4: whole percents, the "all" and "setup" rules only, and no kernel family, so an MoE run's
miss enters the throughput band there (the DeepSeek-V3.2 run's +46%): an approximation of the stored band.

The band is symmetric in log(1 + e): half-width h = the conformal 80% rank of |ln(1 + e)| with each deployment (a run,
or a sweep's stages together) weighted once (``kvledger.ledgers.conformal.conformal_upper``; with one value per
deployment the ⌈0.8(n + 1)⌉-th smallest), band [e^−h − 1, e^h − 1]. Symmetric because the sign of a cross-model,
cross-set-up error is the direction in which the fitted runs' set-up differs from the user's, which the data show both
ways: the training-fitted profile over-predicts kubecon's saturated throughput (+17 … +97%), the fits that include
kubecon over-price training's Llama-2-7B TPOT (+11 … +54%). Per metric the widest of the fit rules is kept. Written into
``src/kvledger/ledgers/data/error_bands.json`` under ``cross_model`` (``kvledger.ledgers.profile_band`` reads it).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "validation.md"
#: what the band's errors are, as the commands print it (a description of the data, never a path outside the package);
#: from a gpuscope result, ``words`` says it from its rows
WORDS = "measured H100 load-sweep stages of four models, each priced by a GPU profile fitted on the other models"


def words(d: dict, metric: str) -> str:
    """``WORDS`` for one metric of a gpuscope result: the GPUs and the number of models of the GPU-profile rows judged
    on it (throughput at saturation, mean TTFT and TPOT below)."""
    rows = [r for r in d["rows"] if any(v["regime"] == "gpu" for v in r["views"].values())
            and (metric == "throughput") == bool(r["saturated"]) and r.get("arch", "dense") == "dense"]
    gpus = sorted({r["gpu"] for r in rows})
    return (f"measured runs and load stages of {len({r['model'] for r in rows})} dense models on {' and '.join(gpus)}, "
            "each priced by a GPU profile fitted on the other models on its GPU")
BANDS = ROOT / "src" / "kvledger" / "ledgers" / "data" / "error_bands.json"
METRICS = ("ttft_mean", "tpot_mean", "throughput")
FLOOR = -0.995  # a printed −100% (rounded) stands for at most −99.5%: log needs a positive ratio


Errors = dict[str, dict[str, list[tuple[float, str, str]]]]  # view → metric → (judged error, deployment, GPU)


def from_json(d: dict) -> Errors:
    """view → metric → judged errors of the GPU-profile rows of a gpuscope result, with each row's deployment."""
    out: Errors = {}
    for r in d["rows"]:
        if r.get("arch", "dense") != "dense":  # the dense kernels' band (an MoE run's miss is its own family's)
            continue
        for view, v in r["views"].items():
            if v["regime"] != "gpu":
                continue
            judged = ("throughput",) if r["saturated"] else ("ttft_mean", "tpot_mean")
            for m in judged:
                e = r["errors"][v["pricing"]][m]
                if e is not None:
                    out.setdefault(view, {}).setdefault(m, []).append((e, r["deployment"], r["gpu"]))
    return out


def from_doc(text: str) -> Errors:
    """The same from §2.4's latest per-run table (gpuscope_all.markdown; the first in the file, the older ones further
    down are history): bold cells are the judged values; a run's deployment is its label less the stage ("kubecon
    vllm/stage 3" → "kubecon vllm", "training x 1" → "training x")."""
    out: Errors = {}
    start = text.find("| run | GPU | regime | judged |")
    for line in text[start:].splitlines() if start >= 0 else ():
        if not line.startswith("|"):
            break  # the end of that table
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 9 or cells[2] != "GPU profile":
            continue
        for view, cell in (("all", cells[4]), ("setup", cells[7] if cells[7] != "same" else cells[4])):
            for m, part in zip(METRICS, cell.split(" / ")):
                if "**" in part:
                    v = float(re.sub(r"[*%+]", "", part).replace("−", "-")) / 100
                    dep = re.sub(r"(/stage \d+| \d+)$", "", cells[0])
                    out.setdefault(view, {}).setdefault(m, []).append((v, dep, cells[1]))
    return out


def symmetric_band(errs: list[tuple[float, str, str]]) -> dict:
    """The symmetric log band of ``errs`` ((error, deployment, GPU); module docstring), with the catalog ids of the
    GPUs behind it (``gpu_ids``)."""
    from kvledger.catalog.gpus import get_gpu
    from kvledger.ledgers.conformal import conformal_upper

    h = conformal_upper([abs(math.log1p(max(e, FLOOR))) for e, *_ in errs], [g for _, g, _ in errs])
    k = len({g for _, g, _ in errs})
    return {"q10": math.expm1(-h), "q90": math.expm1(h), "num_runs": len(errs),
            "gpu_ids": sorted({get_gpu(gpu).gpu_id for *_, gpu in errs}),
            "method": f"symmetric in log(1 + e): conformal 80% rank of |ln(1 + e)|, {k} deployments weighted once each"}


def bands(errs: Errors, data: str | dict[str, str]) -> dict[str, dict]:
    """metric → its band (the widest over the fit rules), with what its data are (``data``: one text, or per metric)."""
    out = {}
    for m in METRICS:
        per = {view: symmetric_band(e[m]) for view, e in errs.items() if len(e.get(m, [])) >= 2}
        if per:
            view, b = max(per.items(), key=lambda kv: kv[1]["q90"])
            out[m] = {**b, "rule": view, "data": data[m] if isinstance(data, dict) else data}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from-json", help="validate_all.py --sections gpuscope --json output")
    ap.add_argument("--write", action="store_true", help="write into error_bands.json (cross_model)")
    ap.add_argument("--label", default="", help="with --from-json: the run it is (commit, date, matmul pricing), "
                    "recorded as the band's data; never a path outside the repository")
    a = ap.parse_args()
    if a.from_json:
        d = json.loads(Path(a.from_json).read_text(encoding="utf-8"))
        errs = from_json(d.get("gpuscope", d))
        data = {m: words(d.get("gpuscope", d), m) + (f" ({a.label})" if a.label else "") for m in METRICS}
    else:
        errs = from_doc(DOC.read_text(encoding="utf-8"))
        data = WORDS + " (whole percents, docs/validation.md §2.4's latest per-run table)"
    if not errs:
        sys.exit("no GPU-profile rows found")
    got = bands(errs, data)
    for m, b in got.items():
        print(f"{m}: {b['q10']:+.1%} … {b['q90']:+.1%} ({b['num_runs']} values, rule {b['rule']})")
    if a.write:
        doc = json.loads(BANDS.read_text(encoding="utf-8"))
        doc["cross_model"] = {"gpu/dense/vllm": got, "written_by": "python benchmarks/crossmodel_bands.py --write",
                              "method": next(p for p in __doc__.split("\n\n") if p.startswith("The band is"))
                              .replace("\n", " ").strip()}
        BANDS.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
