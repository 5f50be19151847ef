"""Leave-one-deployment-out validation over every measured run kvledger can replay, the error bands derived from it,
and the table docs/calibration/validation-latency.md.

Used by ``python benchmarks/validate_all.py --sections lodo [--write-bands] [--write-docs]``.

A deployment is one measured launch configuration (model, GPU, TP, engine settings): each LLMServingSim run folder,
each kubecon configuration, each inference-sim/training experiment. Every run is predicted twice where it can be:

* uncalibrated — the plain roofline (0.7/0.8 of peak), no GPU profile;
* gpu — a GPU profile fitted (``kvledger.calibration.gpu_fit``) on the *other* deployments measured on the same GPU
  with engine-side timings (never on the run predicted); a GPU with no other such deployment has no row here.

Errors are predicted/measured − 1 of mean TTFT and mean TPOT (per request run; per stage below saturation for a
sweep) and of saturation throughput (a saturated per-request run's finished requests per second; a sweep's largest
stage throughput where a stage was past saturation; a deployment never driven past its capacity gives none: it served
its offered load on both sides, an error of ~0 that says nothing of capacity).
The bands per regime (``kvledger.ledgers.error_band``) are split-conformal 80% prediction intervals of those errors
(``_q``, ``kvledger.ledgers.conformal``: from n ≥ 10 values, ranks on the pooled distribution in which each of the k
deployments weighs 1/k however many load stages it ran — with one value each, the ⌊0.1(n+1)⌋-th and ⌈0.9(n+1)⌉-th
smallest. Where deployments are exchangeable and k ≥ 9, the interval covers a stage drawn from a new deployment with
probability ≥ 80% whatever the distribution (at k = 9 it is the smallest … largest error, (k−1)/(k+1) = 80%); below
nine deployments, or below 10 values, the t prediction interval of ln(1 + e) with each deployment weighted once, never
narrower than the errors seen (``conformal.few_groups_interval``; one deployment's several stages: a t interval over
its values); coverage is checked leaving each deployment out: its measured values against the band built from the
others'.
Stages whose client failed more than 10% of requests are left out (their real load is unknown). A sweep stage is
below saturation when the client kept the requested rate (≥ 95%) and the engine served ≥ 90% of it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

import gpu_holdout

ROOT = Path(__file__).resolve().parents[1]
BANDS = ROOT / "src" / "kvledger" / "ledgers" / "data" / "error_bands.json"
DOC = ROOT / "docs" / "calibration" / "validation-latency.md"
STAGE_REQUESTS = None  # a sweep stage is replayed whole, as ``kvledger validate`` does (a window of its first
# requests ends in a drain a sixth of its length and starts with a prefix cache the server had warmed before it)
METRIC_ROWS = {"ttft_mean": "TTFT mean", "tpot_mean": "TPOT mean", "throughput": "throughput"}


def _args(**kw):
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    return SimRequestArgs(**kw)


def _lss_runs(shared: Path) -> list[dict]:
    """LLMServingSim's per-request runs (engine-side timings) that one engine replays: deployment, GPU, the run (the
    data-parallel + expert-parallel Qwen3-30B-A3B run is refused by ``validate``, so left out)."""
    from gpuscope_all import MODEL_FILES, lss_runs
    from kvledger.calibration.replay import load_measured

    out = []
    for rel, p, gpu, model in lss_runs(shared):
        if "Qwen3-30B-A3B" in rel:
            continue
        out.append({"deployment": f"llmservingsim {rel.replace('/vllm', '')}", "gpu": gpu, "engine_side": True,
                    "kind": "per-request", "items": [(load_measured(str(p)), None)],
                    "args": _args(model=MODEL_FILES.get(model, model), gpu=gpu, tp=None, gpu_profile="none")})
    return out


def _sweep_runs(shared: Path) -> list[dict]:
    """inference-perf sweeps (client-side timings): kubecon's modelled configurations, training's three models."""
    import validate_all as va
    from kvledger.calibration.sweep import read_stage, stage_run

    out = []
    for name, (kw, caveat) in va.KUBECON_CONFIGS.items():
        # a folder whose launch resolves to another folder's engine (KUBECON_SAME_ENGINE: vllm+quantization, whose
        # stages repeat chunking's within ~1%) adds no deployment: the bands weigh deployments, and a second measure
        # of one would only add a value to the count that decides ranks against a t interval
        if caveat or name in va.KUBECON_SAME_ENGINE or not (va.KUBECON / name).exists():
            continue
        kw = dict(kw)
        a = _args(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version=kw.pop("engine_version", "0.11.0"),
                  gpu_memory_utilization=0.9, max_model_len=512, gpu_profile="none", **kw)
        items = []
        for k in range(7):
            st = read_stage(va.KUBECON / name / "results" / f"stage_{k}_lifecycle_metrics.json")
            items.append((stage_run(st, f"{name}/stage {k}", seed=k, client_concurrency=va.CLIENT_CONCURRENCY,
                                    max_requests=STAGE_REQUESTS), st))
        out.append({"deployment": f"kubecon {name}", "gpu": "H100", "engine_side": False, "kind": "sweep",
                    "items": items, "args": a})
    for exp in va.training_runs(STAGE_REQUESTS):  # model, TP, limits from each launch record; the prompt pool cached
        if exp["bundled"] and exp["items"]:
            out.append({"deployment": f"training {exp['experiment']}", "gpu": "H100", "engine_side": False,
                        "kind": "sweep", "items": exp["items"], "args": exp["args"]})
    return out


def _errors(dep: dict, fractions: tuple | None) -> dict[str, list[float]]:
    """The deployment's errors per metric under the roofline (at ``fractions``, else 0.7/0.8)."""
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.gpu_fit import roofline_with
    from kvledger.calibration.replay import replay
    from kvledger.calibration.saturation import saturation
    from kvledger.calibration.sweep import stage_comparison
    from kvledger.calibration.sweep_bands import below_saturation

    out: dict[str, list[float]] = {m: [] for m in METRIC_ROWS}
    thr, saturated = [], False
    for run, st in dep["items"]:
        s = engine_for(dep["args"], run)
        cost = s.cost if fractions is None else roofline_with(s, *fractions)
        recs = replay(run, s.config, cost).records
        c = stage_comparison(run.label, st, recs) if st is not None else compare_runs(run.label, run.measured, recs)
        # below saturation: the client kept the rate and the engine served ≥ 90% of it (CodeLlama-34B's reasoning
        # stage was sent at 4 req/s and served 3.22: its queue grew all stage); validate --sweep bands the same stages.
        # A per-request run: neither side's backlog grew (validate's own test, calibration.saturation); LLMServingSim's
        # three runs are saturated on both sides, and their latency errors measure the queue, not the step cost
        below = saturation(run.measured, recs) is None if st is None else below_saturation(st)
        for m in ("ttft_mean", "tpot_mean"):
            e = c.row(METRIC_ROWS[m]).rel_error
            if below and e is not None:
                out[m].append(e)
        saturated = saturated or not below
        if dep["kind"] == "sweep" or not below:
            thr.append((c.row("throughput").measured, c.row("throughput").predicted))
    # the throughput band is one of saturation throughput (capacity): a deployment never driven past its capacity
    # served its offered load on both sides, an error of ~0 that says nothing of capacity, and stays out
    if dep["kind"] == "sweep" and saturated:
        out["throughput"].append(max(p for _, p in thr) / max(m for m, _ in thr) - 1)
    elif dep["kind"] != "sweep":
        out["throughput"] += [p / m - 1 for m, p in thr]
    return out


def lodo(shared: Path) -> dict:
    """Every deployment's errors, uncalibrated and (where another deployment of its model on its GPU exists)
    GPU-calibrated: the calibrated regime's band is of a profile used on what it was fitted on; a profile carried to
    another model is the cross-model band's (``crossmodel_bands.py``) and the profile's own out-of-sample checks'."""
    from gpuscope_all import arch_of
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.gpu_fit import fit_gpu_fractions

    deps = _lss_runs(shared) + _sweep_runs(shared)
    rows = []
    for dep in deps:
        t = time.perf_counter()
        row = {"deployment": dep["deployment"], "gpu": dep["gpu"], "kind": dep["kind"],
               "arch": arch_of(dep["args"].model), "uncalibrated": _errors(dep, None)}
        others = [d for d in deps if d is not dep and d["gpu"] == dep["gpu"] and d["engine_side"]
                  and d["args"].model == dep["args"].model]
        if others and dep["engine_side"]:
            items = [(r, engine_for(d["args"], r)) for d in others for r, _ in d["items"]]
            fit = fit_gpu_fractions(items)
            row["gpu_fit"] = {"fitted_on": [d["deployment"] for d in others],
                              "fractions": [fit.flops_fraction, fit.bandwidth_fraction], "link_share": fit.link_share}
            row["gpu"] = dep["gpu"]
            row["gpu_scope"] = _errors(dep, (fit.flops_fraction, fit.bandwidth_fraction, 0.0, 0.0, fit.link_share))
        row["held_out_gpu"] = gpu_holdout.held_out_errors(dep, row["uncalibrated"])  # leave one GPU out
        row["wall_s"] = time.perf_counter() - t
        row["files"] = [str(st.path if st is not None else r.source) for r, st in dep["items"]]
        rows.append(row)
    from public_moe_rows import public_moe_rows

    public = public_moe_rows()  # the public MoE serving figures, uncalibrated (public_moe_rows.py)
    gpu_holdout.public_held_out(public)
    rows += public
    measured = bands(rows)
    return {"rows": rows, "bands": measured, "coverage": coverage(rows),
            "unmeasured_gpu": gpu_holdout.section(rows, measured)}


def _regime_errors(rows: list[dict], skip: str | None = None) -> dict[str, dict[str, list[tuple[float, str]]]]:
    """Per regime and metric: (error, deployment) of every row but ``skip``'s."""
    out: dict[str, dict[str, list[tuple[float, str]]]] = {}
    for r in rows:
        if r["deployment"] == skip:
            continue
        for scope, key in (("uncalibrated", "uncalibrated"), ("gpu", "gpu_scope")):
            if key in r:
                reg = out.setdefault(f"{scope}/{r.get('arch', 'dense')}/vllm", {m: [] for m in METRIC_ROWS})
                for m in METRIC_ROWS:
                    reg[m] += [(e, r["deployment"]) for e in r[key][m]]
    return out


EMPIRICAL_FROM = 10  # values from which the band is the conformal ranks


def _q(errs: list[float], groups: list[str] | None = None) -> dict:
    """q10/q90 of the errors: conformal ranks from ``EMPIRICAL_FROM`` values, each deployment (``groups``) weighted
    once (``kvledger.ledgers.conformal``); below, the 80% prediction interval of a new value with log(1 + e) normal
    (mean ± t·s·√(1 + 1/n)), which is wide where few values stand behind it; one value is kept as a point
    (``ONE_POINT``): no interval of its own, the nearest regime's band is widened to take it in
    (``kvledger.ledgers.error_band``)."""
    from kvledger.ledgers.conformal import T90, conformal_interval, few_groups_interval

    a = np.array(errs)
    k = len(set(groups)) if groups is not None else len(a)
    if len(a) >= EMPIRICAL_FROM and k >= 9:  # conformal ranks (module docstring). Interpolated 10th/90th percentiles
        # (np.quantile) covered 17 of 24 TTFT and 17 of 24 TPOT values leaving each deployment out: they are the
        # sample's own spread, narrower than what a new value falls in. Ranks over values rather than deployments
        # let a five-stage sweep count five times: gpuscope's bands covered 67 of 88 held-out values that way, 71
        # counting each deployment once (docs/validation.md §2.19)
        lo, hi = conformal_interval(errs, groups)
        how = f"split-conformal 80% interval (pooled ranks, {k} deployments weighted once each)"
    elif len(a) >= 2 and k >= 2:  # below nine deployments no rank reaches 80% (their smallest … largest error covers
        # (k − 1)/(k + 1)): widened to the t prediction interval with each deployment weighted once (§2.21)
        lo, hi = few_groups_interval(errs, groups)
        how = f"t prediction interval ({k} deployments, each weighted once; never inside their smallest … largest)"
    elif len(a) >= 2:  # one deployment's several stages: their spread, as a t interval over the values
        z = np.log1p(a)
        half = T90[len(a) - 2] * z.std(ddof=1) * np.sqrt(1 + 1 / len(a))
        lo, hi, how = np.expm1(z.mean() - half), np.expm1(z.mean() + half), "t prediction interval (few values)"
    elif len(a) == 1:
        from kvledger.ledgers.error_band import ONE_POINT

        lo = hi = a[0]
        how = ONE_POINT
    else:
        return {}
    out = {"q10": float(lo), "q90": float(hi), "num_runs": len(a), "median_abs": float(np.median(np.abs(a))),
           "method": how}
    return {**out, "num_deployments": len(set(groups))} if groups is not None else out


def bands(rows: list[dict], skip: str | None = None) -> dict[str, dict]:
    """Per regime and metric its band (``_q``) with the catalog ids of the GPUs its deployments ran on (``gpu_ids``:
    a figure for another GPU is told the band was not measured on it, ``kvledger.ledgers.error_band``)."""
    gpus = {r["deployment"]: _gpu_id(r["gpu"]) for r in rows}
    out = {reg: {m: {**q, "gpu_ids": sorted({gpus[g] for _, g in eg})}
                 for m, eg in ms.items() if (q := _q([e for e, _ in eg], [g for _, g in eg]))}
           for reg, ms in _regime_errors(rows, skip).items()}
    return {reg: ms for reg, ms in out.items() if ms}


def _gpu_id(name: str) -> str:
    """The catalog id of a run's GPU as its record or folder names it ("H100" → nvidia_h100_sxm)."""
    from kvledger.catalog.gpus import get_gpu

    return get_gpu(name).gpu_id


def coverage(rows: list[dict]) -> dict[str, dict[str, list[int]]]:
    """Per regime and metric: [covered, checked] — each deployment's errors against the band of the others."""
    from kvledger.ledgers.error_band import ONE_POINT

    out: dict[str, dict[str, list[int]]] = {}
    for r in rows:
        b = bands(rows, skip=r["deployment"])
        for scope, key in (("uncalibrated", "uncalibrated"), ("gpu", "gpu_scope")):
            reg = f"{scope}/{r.get('arch', 'dense')}/vllm"
            if key not in r or reg not in b:
                continue
            for m in METRIC_ROWS:
                if m not in b[reg] or b[reg][m]["method"] == ONE_POINT:  # one value: no interval to check against
                    continue
                c = out.setdefault(reg, {}).setdefault(m, [0, 0])
                for e in r[key][m]:
                    c[0] += b[reg][m]["q10"] <= e <= b[reg][m]["q90"]
                    c[1] += 1
    return out


def _member_files(rows: list[dict]) -> dict[str, str]:
    """sha256 of each measured file behind the bands → its deployment (``kvledger.ledgers.band_members``: ``validate``
    says when the run it checks is one of them, its band then in sample)."""
    import hashlib

    out = {}
    for r in rows:
        for f in r.get("files") or []:
            out[hashlib.sha256(Path(f).read_bytes()).hexdigest()] = r["deployment"]
    return dict(sorted(out.items()))


def write_bands(d: dict) -> None:
    BANDS.parent.mkdir(parents=True, exist_ok=True)
    doc = {"kind": "kvledger-error-bands", "version": 1,
           "provenance": {"written_by": "python benchmarks/validate_all.py --sections lodo --write-bands",
                          "method": __doc__.split("\n\n")[1].replace("\n", " "),
                          "deployments": [r["deployment"] for r in d["rows"]],
                          "pricing": "each run priced as the commands price it by default (uncalibrated: the "
                                     "roofline at FLOP fraction 1.0 × the GPU's measured matmul efficiency where "
                                     "operator profiles measured it, A100/H100 SXM and RTX PRO 6000, 0.7 flat "
                                     "elsewhere; bandwidth 0.8)",
                          "data": "../shared/data/measured-runs (LLMServingSim MIT, inference-perf kubecon Apache-2.0, "
                                  "inference-sim/training: errors only, no data copied), benchmarks/data/"
                                  "public-runs (LLMServingSim's Qwen3-32B TP 2 and DeepSeek-V3.2-Exp-16L64E, MIT) "
                                  "and benchmarks/data/public-moe-serving (published MoE serving figures, vLLM)"},
           "regimes": d["bands"], "coverage_leave_one_out": d["coverage"], "member_files": _member_files(d["rows"]),
           "unmeasured_gpu": d["unmeasured_gpu"]}
    if BANDS.exists():  # the cross-model band is another section's (benchmarks/crossmodel_bands.py): kept
        kept = json.loads(BANDS.read_text(encoding="utf-8")).get("cross_model")
        if kept:
            doc["cross_model"] = kept
    BANDS.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def _pct(v) -> str:
    return "—" if v is None else f"{v * 100:+.1f}%"


def _stamp() -> str:
    """The UTC date and the code's commit (``git rev-parse --short HEAD``; "+ uncommitted code" when a tracked .py file
    differs from it) the table was written at: the same text for two runs of one tree on one day."""
    import datetime
    import subprocess

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return ""

    head = git("rev-parse", "--short", "HEAD") or "unknown commit"
    dirty = " + uncommitted code" if git("status", "--porcelain", "--untracked-files=no", "--", "*.py") else ""
    return f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d} at commit {head}{dirty}"


def write_doc(d: dict) -> None:
    lines = ["# Validation: latency and capacity against measured runs", "",
             "Written by `python benchmarks/validate_all.py --sections lodo --write-docs` "
             f"(benchmarks/lodo_bands.py) on {_stamp()}. Error = predicted/measured − 1. Leave one deployment out: a "
             "GPU-calibrated row uses a GPU profile fitted only on the other deployments on that GPU.", "",
             "| deployment | GPU | kind | scope | TTFT mean (each stage) | TPOT mean (each stage) | throughput |",
             "|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        for scope, key in (("uncalibrated", "uncalibrated"), ("GPU profile", "gpu_scope")):
            if key in r:
                e = r[key]
                lines.append(f"| {r['deployment']} | {r['gpu']} | {r['kind']} | {scope} | "
                             + " | ".join(", ".join(_pct(x) for x in e[m]) or "—" for m in METRIC_ROWS) + " |")
    lines += ["", "## Bands (80%: split-conformal ranks of the errors, each deployment weighted once; a t prediction "
                  "interval below 10 values; one value: the point alone, no interval) and coverage", "",
              "| regime | metric | q10 | q90 | values | median abs error | covered (leave one deployment out) "
              "|",
              "|---|---|---|---|---|---|---|"]
    for reg, ms in d["bands"].items():
        for m, b in ms.items():
            cov = d["coverage"].get(reg, {}).get(m)
            lines.append(f"| {reg} | {m} | {_pct(b['q10'])} | {_pct(b['q90'])} | {b['num_runs']} | "
                         f"{b['median_abs'] * 100:.1f}% | {f'{cov[0]}/{cov[1]}' if cov else '—'} |")
    lines += ["", "Not in this table: the Qwen3-30B-A3B DP2+EP run (several engines: refused), kubecon's EAGLE "
              "configuration (not modelled), kubecon's vllm+quantization stages (the same engine as "
              "vllm+chunking_and_prefix_caching: vLLM 0.11 never read its one-argument \"--quantization "
              "bitsandbytes\"), stages with more than 10% failed requests (the Llama-2-7B "
              "and Llama-2-70B reasoning stages); DistServe's five runs are "
              "validated leave-one-out by `--sections distserve` (model scope, A100).", "",
              "## Leave one GPU out: the band of a GPU with no measured run", "",
              "Each GPU's runs held out and priced as on a GPU nobody measured (no GPU profile, flat matmul "
              "efficiency, the layer-kernel floors carried from the other profiled GPUs and the bandwidth share "
              "from its measured copy bandwidth: --gemm-efficiency carried, benchmarks/gpu_holdout.py); the band "
              "printed for a figure on a GPU outside "
              f"{', '.join(d['unmeasured_gpu']['held_out_gpus'])}.", "",
              *gpu_holdout.table_lines(d["unmeasured_gpu"])]
    DOC.write_text("\n".join(lines) + "\n", encoding="utf-8")


def print_lodo(d: dict) -> None:
    _print_rows(d)
    gpu_holdout.print_section(d["unmeasured_gpu"])


def _print_rows(d: dict) -> None:
    print("\n== leave one deployment out: uncalibrated roofline and GPU profile from the other deployments ==")
    for r in d["rows"]:
        for key in ("uncalibrated", "gpu_scope", "held_out_gpu"):
            if key in r:
                e = r[key]
                print(f"  {r['deployment']:<60} {key:<13}" + "  ".join(
                    f"{m} [{', '.join(_pct(x) for x in e[m])}]" for m in METRIC_ROWS) + f"  ({r['wall_s']:.0f} s)")
    for reg, ms in d["bands"].items():
        for m, b in ms.items():
            cov = d["coverage"].get(reg, {}).get(m, [0, 0])
            print(f"  band {reg} {m}: {_pct(b['q10'])} … {_pct(b['q90'])} over {b['num_runs']} values; "
                  f"covered {cov[0]}/{cov[1]} leaving each deployment out")
