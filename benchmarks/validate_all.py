"""Validate the simulator on every measured run the project has, calibrating where the issue asks, and print the tables
of docs/validation.md §2.

    python benchmarks/validate_all.py [--sections distserve,llmservingsim,kubecon,training,robustness,lodo,crossmodel,
        gpuscope]
        [--json]

Sections (error = predicted/measured − 1 throughout):

* ``distserve`` — DistServe's five real vLLM runs (OPT-13B, A100-80GB, vLLM 0.2.3 V0; bundled): a step cost
  fitted on all five, and leave-one-out (each run predicted by a fit on the other four), both also with
  ``calibrate --regime-start`` (a second start read off the fitted runs, the lower objective kept); the knee — the
  rate where mean TTFT passes 5 × the 1 req/s measured mean — on the 400-request workload rescaled, under the
  leave-one-out fits that never saw that run; measured knee: linear interpolation between 3 req/s (0.46 s) and
  4 req/s (10.7 s).
* ``llmservingsim`` — LLMServingSim's per-request vLLM 0.19 runs (../shared/data/measured-runs/llmservingsim):
  roofline replay of each, then a fit on the RTX 4090 max_num_seqs 256 run validated on the 128 one.
* ``kubecon`` — inference-perf's H100 load sweep of six vLLM launch configurations (aggregates per stage): fitted
  on the stages of two configurations (``vllm``, ``vllm+chunking_and_prefix_caching``), validated on the others'
  stages from the stage aggregates (same synthetic workload per stage; closed loop of the client's 440-request
  cap where the client could not keep the requested rate).
* ``training`` — inference-sim/training's H100 stages (no licence: read from ../shared, never copied): Llama-2-7B TP1,
  CodeLlama-34B TP2, Llama-2-70B TP4, each replayed with the model, TP and limits of its launch record and its
  client's fixed prompt pool under prefix caching; roofline, stage aggregates compared.
* ``lodo`` — leave one deployment out over every replayable run, uncalibrated and GPU-calibrated; the error
  bands (``--write-bands``: ``kvledger/ledgers/data/error_bands.json``) and ``docs/calibration/validation-latency.md``
  (``--write-docs``); see benchmarks/lodo_bands.py.
* ``crossmodel`` — a GPU-scope calibration (fractions and the set-up's frontend latency) fitted on one model's
  inference-sim/training stages, and on two models' (leave one model out), predicting another model's on the same
  H100 set-up (benchmarks/cross_model.py; ``cross_model.VARIANTS`` for the fractions alone and the host terms).
* ``gpuscope`` — issue 23's must-hold counted over every measured run (DistServe's bundled runs, LLMServingSim,
  kubecon, inference-sim/training): each predicted by a GPU-scope fit on the other models' runs on its GPU, or, with
  no other model there, by the uncalibrated roofline; per-run verdicts and band coverage (benchmarks/gpuscope_all.py).
* ``robustness`` — every bundled calibrated step cost on the whole Azure conversation trace (no traceback).

Timing figures are wall-clock on a shared machine: noisy.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
#: ../shared beside the checkout (a worktree one level deeper finds it one folder further up)
SHARED = next((p / "shared" / "data" / "measured-runs" for p in (ROOT.parent, ROOT.parent.parent)
               if (p / "shared" / "data" / "measured-runs").is_dir()),
                   ROOT.parent / "shared" / "data" / "measured-runs")
KNEE_FACTOR = 5.0
SWEEP_RATES = (2.0, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75, 4.0)


def _args(**kw):
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    return SimRequestArgs(**kw)


# ------------------------------------------------------------------ DistServe
def distserve() -> dict:
    from kvledger.calibration.api import calibrate_runs, engine_for, headline_errors
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.fit import fit_step_cost, initial_guess
    from kvledger.calibration.replay import MeasuredRun, load_measured, replay
    from kvledger.dynamics.engine.request import RequestSpec
    from kvledger.dynamics.workload.distserve_runs import list_distserve_runs

    a = _args(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", gpu_memory_utilization=0.95,
              max_num_batched_tokens=16384, max_num_seqs=1024, max_model_len=2048, block_size=16, batching="vllm_v0",
              enable_chunked_prefill=False, enable_prefix_caching=False, step_cost="calibrated")
    runs = [load_measured("distserve:" + n) for n in list_distserve_runs()]
    setups = [engine_for(a, r, max_paddings=256) for r in runs]
    pairs = [(r, s.config) for r, s in zip(runs, setups)]
    t0 = time.perf_counter()
    fit_all = fit_step_cost(pairs, initial_guess(pairs, setups[0].cost, False))
    fit_s = time.perf_counter() - t0
    out = calibrate_runs(pairs, setups[0].cost, leave_one_out=True)
    # calibrate --regime-start: each fit also started from its own runs' regime-by-regime start, the lower kept
    out2 = calibrate_runs(pairs, setups[0].cost, leave_one_out=True, two_starts=True, workers=2)
    base = runs[-1]  # vllm-400-4
    loo_400 = [x for x in out["leave_one_out"] if x["run"] == base.label][0]
    from kvledger.accounting.fitted_cost import LinearStepCost

    loo_cost = LinearStepCost.from_coefficients(loo_400["step_cost"], name="loo-400")
    loo2_cost = LinearStepCost.from_coefficients([x for x in out2["leave_one_out"] if x["run"] == base.label][0]
                                                 ["step_cost"], name="loo-400-regime-start")
    threshold = KNEE_FACTOR * float(np.mean([r.ttft_s for r in runs[0].measured.records]))
    rows = []
    for name, cost in (("bundled DistServe fit", setups[0].cost), ("fitted on all five", fit_all.cost),
                       ("fitted without vllm-400-4", loo_cost),
                       ("--regime-start, without 400-4", loo2_cost)):
        means = []
        for rate in SWEEP_RATES:
            k = 4.0 / rate  # the workload's own rate is 4 req/s
            reqs = [RequestSpec(q.request_id, q.arrival_s * k, q.num_prompt_tokens, q.num_output_tokens)
                    for q in base.requests]
            res = replay(MeasuredRun("sweep", "sweep", reqs, base.measured), setups[-1].config, cost)
            means.append(float(np.mean([r.ttft_s for r in res.records.records if r.ok])))
        rows.append({"model": name, "sweep_ttft_mean_s": dict(zip(SWEEP_RATES, means)),
                     "knee_req_per_s": _knee(list(SWEEP_RATES), means, threshold)})
    measured = [(3.0, float(np.mean([r.ttft_s for r in runs[3].measured.records]))),
                (4.0, float(np.mean([r.ttft_s for r in runs[4].measured.records])))]
    m_knee = _knee([m[0] for m in measured], [m[1] for m in measured], threshold)
    per_run = []
    for (r, cfg), fitted, loo, fitted2, loo2 in zip(pairs, out["runs"], out["leave_one_out"], out2["runs"],
                                                    out2["leave_one_out"]):
        bundled = headline_errors(compare_runs(r.label, r.measured, replay(r, cfg, setups[0].cost).records))
        per_run.append({"run": r.label, "bundled": bundled, "fitted_all": {k: fitted[k] for k in bundled},
                        "leave_one_out": {k: loo[k] for k in bundled},
                        "fitted_all_regime_start": {k: fitted2[k] for k in bundled},
                        "leave_one_out_regime_start": {k: loo2[k] for k in bundled},
                        "measured_ttft_mean_s": float(np.mean([x.ttft_s for x in r.measured.records])),
                        "measured_tpot_mean_s": float(np.mean([x.tpot_s for x in r.measured.records
                                                               if x.num_output_tokens > 1]))})
    return {"fit_seconds_five_runs": fit_s, "fit": fit_all.cost.coefficients(), "objective": fit_all.objective,
            "objective_regime_start": out2["fit"].objective, "fit_regime_start": out2["fit"].cost.coefficients(),
            "objective_start": fit_all.objective_start, "runs": per_run, "knee_threshold_s": threshold,
            "measured_knee_req_per_s": m_knee, "knees": rows}


def _knee(rates: list[float], means: list[float], threshold: float) -> float | None:
    for i, (r, t) in enumerate(zip(rates, means)):
        if t > threshold:
            if i == 0:
                return r
            r0, t0 = rates[i - 1], means[i - 1]
            return r0 + (threshold - t0) / (t - t0) * (r - r0)
    return None


def _print_distserve(d: dict) -> None:
    print("\n== DistServe: OPT-13B, A100-80GB, vLLM 0.2.3 (V0), five real runs ==")
    print(f"fit on all five: {d['fit_seconds_five_runs']:.1f} s wall; objective {d['objective_start']:.3f} → "
          f"{d['objective']:.3f}; coefficients "
          f"{json.dumps({k: float(f'{v:.4g}') for k, v in d['fit'].items() if not isinstance(v, bool)})}")
    print(f"{'run':<12}{'TTFT mean meas':>15}{'bundled':>9}{'fit-all':>9}{'LOO':>8}{'TPOT mean meas':>16}{'bundled':>9}"
          f"{'fit-all':>9}{'LOO':>8}")
    for r in d["runs"]:
        e = [r[k][m] for m in ("ttft_mean_rel_error",) for k in ("bundled", "fitted_all", "leave_one_out")]
        f = [r[k][m] for m in ("tpot_mean_rel_error",) for k in ("bundled", "fitted_all", "leave_one_out")]
        print(f"{r['run']:<12}{r['measured_ttft_mean_s'] * 1e3:>12.0f} ms" + "".join(f"{x * 100:>+8.0f}%" for x in e)
              + f"{r['measured_tpot_mean_s'] * 1e3:>13.1f} ms" + "".join(f"{x * 100:>+8.0f}%" for x in f))
    print(f"calibrate --regime-start (objective {d['objective_regime_start']:.3f}): fit-all / LOO")
    for r in d["runs"]:
        print(f"  {r['run']:<12}" + "  ".join(
            f"{m.split('_')[0].upper()} {r['fitted_all_regime_start'][m] * 100:+.0f}% / "
            f"{r['leave_one_out_regime_start'][m] * 100:+.0f}%"
            for m in ("ttft_mean_rel_error", "tpot_mean_rel_error")))
    print(f"knee (mean TTFT > {d['knee_threshold_s']:.3f} s): measured {d['measured_knee_req_per_s']:.2f} req/s "
          "(interpolated between 3 and 4 req/s)")
    for k in d["knees"]:
        sweep = ", ".join(f"{r:g}: {t:.2f}s" for r, t in k["sweep_ttft_mean_s"].items())
        kn = k["knee_req_per_s"]
        print(f"  {k['model']:<28} knee {'none ≤ 4' if kn is None else f'{kn:.2f} req/s'}   ({sweep})")


# ------------------------------------------------------------- LLMServingSim
LSS = {  # run folder → engine flags from its meta.json (vLLM 0.19, V1)
    "RTX4090/Llama-3.1-8B (seqs 256)": ("bench/examples/RTX4090/Llama-3.1-8B/vllm", "RTX 4090",
                                        dict(max_num_seqs=256, num_gpu_blocks_override=2588, max_model_len=32768)),
    "RTX4090/Llama-3.1-8B (seqs 128)": ("bench/results/rtx4090-llama8b-tp1", "RTX 4090",
                                        dict(max_num_seqs=128, num_gpu_blocks_override=2588, max_model_len=32768)),
    "RTXPRO6000/Llama-3.1-8B": ("bench/examples/RTXPRO6000/Llama-3.1-8B/vllm", "RTX PRO 6000",
                                dict(max_num_seqs=128)),
}


def llmservingsim() -> dict:
    from kvledger.calibration.api import calibrate_runs, engine_for, headline_errors
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.replay import load_measured, replay

    out = {"roofline": [], "calibrated": None}
    loaded = {}
    for label, (rel, gpu, kw) in LSS.items():
        path = SHARED / "llmservingsim" / rel
        if not path.exists():
            print(f"skip {label}: {path} not found", file=sys.stderr)
            continue
        run = load_measured(str(path))
        run.label = label
        a = _args(model="meta-llama/Llama-3.1-8B", gpu=gpu, engine_version="0.19.0", max_num_batched_tokens=2048,
                  enable_prefix_caching=False, **kw)
        s = engine_for(a, run)
        loaded[label] = (run, s)
        c = compare_runs(label, run.measured, replay(run, s.config, s.cost).records)
        out["roofline"].append({"run": label, **headline_errors(c),
                                "measured_ttft_mean_s": c.row("TTFT mean").measured,
                                "measured_tpot_mean_s": c.row("TPOT mean").measured})
    fit_on, check = "RTX4090/Llama-3.1-8B (seqs 256)", "RTX4090/Llama-3.1-8B (seqs 128)"
    if fit_on in loaded and check in loaded:
        r, s = loaded[fit_on]
        cal = calibrate_runs([(r, s.config)], s.cost, leave_one_out=False)
        r2, s2 = loaded[check]
        c = compare_runs(check, r2.measured, replay(r2, s2.config, cal["fit"].cost).records)
        out["calibrated"] = {"fitted_on": fit_on, "validated_on": check, "fit": cal["fit"].cost.coefficients(),
                             "fit_errors": {k: v for k, v in cal["runs"][0].items() if k.endswith("rel_error")},
                             "validation_errors": headline_errors(c)}
    return out


def _print_llmservingsim(d: dict) -> None:
    print("\n== LLMServingSim: vLLM 0.19 (V1), Llama-3.1-8B, 300 ShareGPT requests at 10 req/s (overload bursts) ==")
    print(
        f"{'run':<34}{'TTFT mean':>12}{'error':>8}{'TPOT mean':>12}{'error':>8}{'TTFT p90':>9}{'E2E mean':>9}{'thr':>8}"
    )
    for r in d["roofline"]:
        print(f"{r['run']:<34}{r['measured_ttft_mean_s']:>10.2f} s{r['ttft_mean_rel_error'] * 100:>+7.0f}%"
              f"{r['measured_tpot_mean_s'] * 1e3:>9.1f} ms{r['tpot_mean_rel_error'] * 100:>+7.0f}%"
              f"{r['ttft_p90_rel_error'] * 100:>+8.0f}%{r['e2e_mean_rel_error'] * 100:>+8.0f}%"
              f"{r['throughput_rel_error'] * 100:>+7.0f}%   (roofline, uncalibrated)")
    c = d.get("calibrated")
    if c:
        for name, e in (("fit on " + c["fitted_on"], c["fit_errors"]), ("validated on " + c["validated_on"],
                                                                         c["validation_errors"])):
            print(f"  {name:<50} TTFT mean {e['ttft_mean_rel_error'] * 100:+.0f}%, p90 "
                  f"{e['ttft_p90_rel_error'] * 100:+.0f}%; "
                  f"TPOT mean {e['tpot_mean_rel_error'] * 100:+.0f}%; E2E mean {e['e2e_mean_rel_error'] * 100:+.0f}%; "
                  f"throughput {e['throughput_rel_error'] * 100:+.0f}%")


# -------------------------------------------------------------------- kubecon
KUBECON = SHARED / "inference-perf-kubecon-na-2025"
#: folder → (engine flags from its manifests.yaml, whether the simulator models the configuration)
KUBECON_CONFIGS = {
    "vllm": (dict(max_num_seqs=128, enable_prefix_caching=False, enable_chunked_prefill=False), ""),
    "vllm+chunking_and_prefix_caching": (dict(max_num_seqs=128, enable_prefix_caching=True,
                                              enable_chunked_prefill=True), ""),
    "vllm+batch_size": (dict(max_num_seqs=192, enable_prefix_caching=False, enable_chunked_prefill=False), ""),
    "vllm+v0_engine": (dict(max_num_seqs=128, enable_prefix_caching=False, enable_chunked_prefill=False,
                            batching="vllm_v0", engine_version="0.9.0"), ""),
    # its manifest writes "--quantization bitsandbytes" as one argv element, which vLLM 0.11.0's api_server parses as
    # its unread positional model_tag (kvledger.calibration.run_record.positional_notes): the engine ran bf16, with
    # chunked prefill and prefix caching, as vllm+chunking_and_prefix_caching did (its stages agree within ~1%)
    "vllm+quantization": (dict(max_num_seqs=128, enable_prefix_caching=True, enable_chunked_prefill=True), ""),
    "vllm+eagle": (dict(max_num_seqs=128), "EAGLE-3 speculative decoding: not simulated"),
}
KUBECON_FIT_ON = ("vllm", "vllm+chunking_and_prefix_caching")
#: folder → the folder whose engine its launch resolves to: one deployment measured twice, grouped with it wherever a
#: deployment is left out or weighted once (leave-one-deployment-out, the bands)
KUBECON_SAME_ENGINE = {"vllm+quantization": "vllm+chunking_and_prefix_caching"}


def kubecon_deployment(name: str) -> str:
    """The deployment a kubecon folder's stages belong to (``KUBECON_SAME_ENGINE``)."""
    return f"kubecon {KUBECON_SAME_ENGINE.get(name, name)}"
CLIENT_CONCURRENCY = 44 * 10  # config.yaml: num_workers × worker_max_concurrency
FIT_MAX_REQUESTS = 1500  # per stage when fitting (a shorter window of the same load)


def _kubecon_runs(name: str, max_requests: int | None):
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.sweep import read_stage, stage_run

    kw, _ = KUBECON_CONFIGS[name]
    kw = dict(kw)
    a = _args(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version=kw.pop("engine_version", "0.11.0"),
              gpu_memory_utilization=0.9, max_model_len=512, **kw)
    out = []
    for k in range(7):
        st = read_stage(KUBECON / name / "results" / f"stage_{k}_lifecycle_metrics.json")
        run = stage_run(st, f"{name}/stage {k}", seed=k, client_concurrency=CLIENT_CONCURRENCY,
                        max_requests=max_requests)
        out.append((st, run, engine_for(a, run)))
    return out


def _stage_rows(name: str, cost, cost_of_setup: bool = False) -> list[dict]:
    from kvledger.calibration.replay import replay
    from kvledger.calibration.sweep import stage_comparison

    rows = []
    for st, run, s in _kubecon_runs(name, None):
        c = stage_comparison(run.label, st, replay(run, s.config, s.cost if cost_of_setup else cost).records)
        below = st.achieved_rate >= 0.95 * st.requested_rate
        rows.append({"config": name, "stage": run.label.rsplit(" ", 1)[1], "rate": st.requested_rate,
                     "below_saturation": below, "closed_loop": run.concurrency is not None,
                     **{k: {"measured": c.row(k).measured, "predicted": c.row(k).predicted,
                            "rel_error": c.row(k).rel_error}
                        for k in ("TTFT p50", "TTFT mean", "TPOT mean", "TPOT (file's field) p50", "E2E p50",
                                  "throughput")}})
    return rows


def kubecon() -> dict:
    from kvledger.calibration.fit import fit_step_cost, initial_guess

    if not KUBECON.exists():
        return {"skipped": f"{KUBECON} not found"}
    fit_runs = []
    for name in KUBECON_FIT_ON:
        fit_runs += [(run, s.config) for _, run, s in _kubecon_runs(name, FIT_MAX_REQUESTS)]
    start = _kubecon_runs("vllm", 10)[0][2].cost
    t0 = time.perf_counter()
    fit = fit_step_cost(fit_runs, initial_guess(fit_runs, start, False), fit_frontend=True)
    fit_s = time.perf_counter() - t0
    out = {"fit": fit.cost.coefficients(), "fit_seconds": fit_s, "objective_start": fit.objective_start,
           "objective": fit.objective, "fitted_on": list(KUBECON_FIT_ON), "configs": {}, "excluded": {}}
    for name, (_, caveat) in KUBECON_CONFIGS.items():
        if caveat:  # a configuration the simulator refuses (engine_for): listed, not replayed
            out["excluded"][name] = caveat
            continue
        rows = _stage_rows(name, fit.cost)
        roof = _stage_rows(name, None, cost_of_setup=True)
        out["configs"][name] = {"caveat": caveat, "in_fit": name in KUBECON_FIT_ON, "calibrated": rows,
                                "roofline": roof, **_sweep_verdict(rows)}
    return out


def _sweep_verdict(rows: list[dict]) -> dict:
    """Throughput at saturation (the largest over stages) and the worst median TTFT/TPOT error below saturation."""
    m = max(r["throughput"]["measured"] for r in rows)
    p = max(r["throughput"]["predicted"] for r in rows)
    below = [r for r in rows if r["below_saturation"]]
    return {"saturation_throughput": {"measured": m, "predicted": p, "rel_error": p / m - 1},
            "worst_below": {k: max((r[k]["rel_error"] for r in below), key=abs) for k in ("TTFT p50", "TPOT mean")}}


def _print_kubecon(d: dict) -> None:
    print("\n== inference-perf kubecon sweep: Llama-3.1-8B, 1× H100, vLLM 0.11 (V1) / 0.9 (V0), 7 stages per config ==")
    if "skipped" in d:
        print(d["skipped"])
        return
    print(f"fit on {', '.join(d['fitted_on'])} (≤ {FIT_MAX_REQUESTS} requests per stage): {d['fit_seconds']:.0f} s "
          f"wall; "
          f"objective {d['objective_start']:.2f} → {d['objective']:.2f}; "
          + json.dumps({k: float(f'{v:.4g}') for k, v in d["fit"].items() if not isinstance(v, bool)}))
    print(f"{'config':<34}{'model':<10}{'sat. thr meas→pred':>24}{'worst TTFT p50':>16}{'worst TPOT mean':>16}  (below "
          f"saturation)")
    for name, c in d["configs"].items():
        for label, rows in (("calibr.", c["calibrated"]), ("roofline", c["roofline"])):
            v = _sweep_verdict(rows)
            st = v["saturation_throughput"]
            tag = " [in fit]" if c["in_fit"] else ""
            print(f"{name:<34}{label:<10}{st['measured']:>8.1f} → {st['predicted']:6.1f} "
                  f"({st['rel_error'] * 100:+4.0f}%)"
                  f"{v['worst_below']['TTFT p50'] * 100:>+15.0f}%{v['worst_below']['TPOT mean'] * 100:>+15.0f}%{tag}")
    print("per stage (calibrated): rate → TTFT p50 measured/predicted, TPOT mean (from E2E − TTFT) measured/predicted")
    for name, c in d["configs"].items():
        cells = [f"{r['rate']:.0f}{'*' if not r['below_saturation'] else ''}: {r['TTFT p50']['measured'] * 1e3:.0f}/"
                 f"{r['TTFT p50']['predicted'] * 1e3:.0f} ms, {r['TPOT mean']['measured'] * 1e3:.1f}/"
                 f"{r['TPOT mean']['predicted'] * 1e3:.1f} ms" for r in c["calibrated"]]
        print(f"  {name}: " + "; ".join(cells))
    for name, why in d["excluded"].items():
        print(f"  {name}: not replayed ({why})")
    print("  (* = saturated stage: the client's 440-request cap bound the load; replayed as a closed loop)")


# ------------------------------------------------------------------- training
#: ../shared's copy (12 of the 16 experiments); ``--training-dir`` points it at a clone of the public repository
TRAINING = SHARED / "inference-sim-training" / "default_args"


def training_runs(max_requests: int | None = None) -> list[dict]:
    """Every inference-sim/training experiment with a bundled model: its stages below the 10% failure cut as
    (run, stage), each replayed with the model, TP and scheduler limits of its launch record (``exp-config.yaml``,
    read by ``kvledger.calibration.stage_launch``) and its client's prompt pool as shared prefixes
    (``kvledger.calibration.stage_launch.pool_prefix``: results/config.yaml, 10 × 10 whole prompts in every run)."""
    from kvledger.calibration.sweep import read_stage, stage_run
    from kvledger.catalog.models import resolve_bundled

    out = []
    for exp in sorted(p for p in TRAINING.iterdir() if p.is_dir()) if TRAINING.exists() else []:
        items, model = [], None
        for f in sorted((exp / "results").glob("stage_*_lifecycle_metrics.json")):
            st = read_stage(f)
            run = stage_run(st, f"{exp.name.split('-', 2)[2]} {f.name.split('_')[1]}", seed=0,
                            max_requests=max_requests)
            model = run.measured.metadata.model
            if st.num_failed <= 0.1 * st.count:
                items.append((run, st))
        out.append({"experiment": exp.name.split("-", 2)[2], "model": model, "items": items,
                    "bundled": model is not None and resolve_bundled(model) is not None,
                    "args": _args(model=model, gpu="H100", tp=None, gpu_profile="none")})
    return out


def training() -> dict:
    """Roofline replay of every stage of every experiment (model, TP and limits from its launch record; no
    calibration)."""
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.replay import replay
    from kvledger.calibration.sweep import stage_comparison

    if not TRAINING.exists():
        return {"skipped": f"{TRAINING} not found"}
    rows, skipped = [], []
    for exp in training_runs():
        if not exp["bundled"]:
            skipped.append(exp["experiment"])
            continue
        for run, st in exp["items"]:
            s = engine_for(exp["args"], run)
            c = stage_comparison(run.label, st, replay(run, s.config, s.cost).records)
            rows.append({"stage": run.label, "model": s.model_name, "tp": s.tp, "rate": st.requested_rate,
                         "failed": st.num_failed,
                         **{k: {"measured": c.row(k).measured, "predicted": c.row(k).predicted,
                                "rel_error": c.row(k).rel_error} for k in ("TTFT mean", "TTFT p50", "TPOT mean",
                                                                           "E2E p50", "throughput")}})
    return {"rows": rows, "not_run": skipped}


def _print_training(d: dict) -> None:
    print("\n== inference-sim/training: H100 SXM stages (roofline, uncalibrated; a fixed pool of 100 prompts re-sent "
          "under prefix caching) ==")
    if "skipped" in d:
        print(d["skipped"])
        return
    for r in d["rows"]:
        e = "; ".join(f"{k} {r[k]['measured'] * (1e3 if k != 'throughput' else 1):.1f}→"
                      f"{r[k]['predicted'] * (1e3 if k != 'throughput' else 1):.1f} ({r[k]['rel_error'] * 100:+.0f}%)"
                      for k in ("TTFT mean", "TTFT p50", "TPOT mean", "E2E p50", "throughput"))
        print(f"  {r['stage']:<30} {r['rate']:>5.0f} "
              f"req/s{' (' + str(r['failed']) + ' failed)' if r['failed'] else ''} TP {r['tp']}: {e}")
    if d["not_run"]:
        print(f"  not run (model not bundled): {', '.join(d['not_run'])}")


# ----------------------------------------------------------------- robustness
def robustness() -> dict:
    """Every bundled calibrated step cost (``kvledger.accounting.calibrated.list_calibrated``) serving the whole Azure
    conversation trace for Llama-3.1-8B on an H100 (the table stands in for the model's step times, as
    ``--step-cost calibrated:KEY`` does). A KvLedgerError is a clean refusal; anything else would be a crash."""
    from kvledger.accounting.calibrated import list_calibrated
    from kvledger.analyses.serving.sim_setup import prepare
    from kvledger.analyses.serving.step_cost_choice import calibrated_step_cost
    from kvledger.dynamics.simulator import simulate
    from kvledger.errors import KvLedgerError

    setup = prepare(_args(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv"))
    ok, refused, crashed, worst = 0, [], [], 0.0
    for c in list_calibrated():
        try:
            cost, _ = calibrated_step_cost("calibrated:" + c.key, "meta-llama/Llama-3.1-8B", "H100", 1)
            t = time.perf_counter()
            res = simulate(setup.workload, setup.config, cost)
            worst = max(worst, time.perf_counter() - t)
            ok += res.summary.num_finished == setup.num_requests
        except KvLedgerError as e:
            refused.append(f"{c.key}: {e}")
        except Exception as e:  # noqa: BLE001 — this benchmark exists to find crashes and list them
            crashed.append(f"{c.key}: {type(e).__name__}: {e}")
    return {"models": len(list_calibrated()), "finished_every_request": ok, "refused": refused, "crashed": crashed,
            "num_requests": setup.num_requests, "slowest_run_s": worst}


def _print_robustness(d: dict) -> None:
    print(f"\n== robustness: {d['models']} bundled calibrated step costs × the whole Azure conversation trace "
          f"({d['num_requests']:,} requests) ==")
    print(f"finished every request: {d['finished_every_request']}; refused: {len(d['refused'])}; "
          f"crashed: {len(d['crashed'])}; slowest simulation {d['slowest_run_s']:.2f} s (wall, shared machine)")
    for line in d["refused"] + d["crashed"]:
        print("  " + line)


def lodo() -> dict:
    import lodo_bands

    return lodo_bands.lodo(SHARED)


def _print_lodo(d: dict) -> None:
    import lodo_bands

    lodo_bands.print_lodo(d)


def crossmodel() -> dict:
    import cross_model

    return cross_model.cross_model(lomo=True, variants=((True, False),))


def _print_crossmodel(d: dict) -> None:
    import cross_model

    cross_model.print_cross_model(d)


def gpuscope() -> dict:
    import gpuscope_all

    return gpuscope_all.gpuscope(SHARED)


def _print_gpuscope(d: dict) -> None:
    import gpuscope_all

    gpuscope_all.print_gpuscope(d)


SECTIONS = ("distserve", "llmservingsim", "kubecon", "training", "robustness", "lodo", "crossmodel", "gpuscope")


def _use_training_dir(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    """Point every section at ``--training-dir`` (this module runs as ``__main__``; gpuscope_all imports it by
    name, so both copies are set)."""
    if a.write_bands:
        ap.error("--training-dir with --write-bands: the bundled bands are built from ../shared's runs alone")
    if not any(a.training_dir.glob("*/results/stage_*_lifecycle_metrics.json")):
        ap.error(f"--training-dir {a.training_dir}: no <experiment>/results/stage_*_lifecycle_metrics.json under it "
                 "(give the clone's default_args/ folder)")
    import validate_all

    global TRAINING
    TRAINING = validate_all.TRAINING = a.training_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {', '.join(SECTIONS)}")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    ap.add_argument("--write-bands", action="store_true", help="lodo: write the error bands into the package")
    ap.add_argument("--write-docs", action="store_true", help="lodo: write docs/calibration/validation-latency.md")
    ap.add_argument("--gemm-efficiency", choices=("flat", "measured"), default=None,
                    help="gpuscope: price the weight matmuls flat (default) or by the GPU's measured curve")
    ap.add_argument("--training-dir", type=Path, default=None,
                    help="inference-sim/training's default_args/ in a clone of the public repository (all 16 "
                         "experiments, Mixtral-8x7B's among them; ../shared holds 12); not with --write-bands: the "
                         "bundled bands come from ../shared's runs alone")
    a = ap.parse_args()
    chosen = [s.strip() for s in a.sections.split(",") if s.strip()]
    bad = [s for s in chosen if s not in SECTIONS]
    if bad:
        ap.error(f"unknown section(s) {', '.join(bad)}; known: {', '.join(SECTIONS)}")
    if a.training_dir is not None:
        _use_training_dir(ap, a)
    if a.gemm_efficiency is not None:
        import gpuscope_all

        gpuscope_all.GEMM_MODE = a.gemm_efficiency
    out = {}
    for s in chosen:
        t = time.perf_counter()
        out[s] = globals()[s]()
        out[s]["wall_s"] = time.perf_counter() - t
        if not a.json:
            globals()["_print_" + s](out[s])
            print(f"[{s}: {out[s]['wall_s']:.0f} s wall]")
    if "lodo" in out:
        import lodo_bands

        if a.write_bands:
            lodo_bands.write_bands(out["lodo"])
        if a.write_docs:
            lodo_bands.write_doc(out["lodo"])
    if a.json:
        print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
