"""Issue 23's must-hold counted over every measured run the project has: each run predicted by a GPU-scope
calibration fitted on the *other models'* runs on its GPU (never on the run predicted, nor on its model), and, where
no other model was measured on that GPU, by the uncalibrated roofline ("no cross-model evidence").

Used by ``python benchmarks/validate_all.py --sections gpuscope``.

A *run* is a unit the must-hold counts: a per-request run (LLMServingSim, DistServe's bundled vLLM runs) or one
load stage of a sweep (kubecon, inference-sim/training). A *deployment* is its launch configuration (an LLMServingSim
run folder, a kubecon configuration, a training experiment, DistServe's vLLM 0.2.3 set-up; kubecon's
``vllm+quantization`` is ``vllm+chunking_and_prefix_caching``'s engine measured again — vLLM 0.11 never read its
one-argument "--quantization bitsandbytes" — so its stages are judged in that deployment and are evidence for no other
run: ``Unit.repeat``). A *set-up* is the client
and front end that timed it (``SETUP``: LLMServingSim's in-process engine timings, kubecon's client, training's
client, DistServe's client).

Per GPU and per model M measured on it, one fit (``kvledger.calibration.gpu_fit.fit_gpu_fractions``, the machinery of
``calibrate --scope gpu --fit-frontend``) on every run below saturation of every *other* model on that GPU: the two
roofline fractions, and one frontend latency per set-up (the client's, not the GPU's). M's runs are then predicted
with the fractions, and with the frontend latency of their own set-up where another model was timed through it
(else none). Each fit is reused for every run of M. A second view (``VIEWS``: "setup") fits only on the other models
timed through M's own set-up where there are any (inference-sim/training's three models), else as the first ("all",
the issue's rule): runs timed on another host price that host's per-step time into the fractions.

Kernel families: a fit predicting a dense model takes the other *dense* models' runs on the GPU, and one predicting
an MoE model the other MoE models', where the GPU has any; else every other model's. The routed experts of an MoE
model run in their own fused kernels (FP8 block-scaled on the RTX PRO 6000's DeepSeek-V3.2-Exp-16L64E run), whose
achieved share is not the dense GEMMs': with that run in the pool, the fit predicting Llama-3.1-8B fell to 0.40 of the
bandwidth and priced the Llama run's throughput −33% where the dense models' fit gives −6.9% (docs/validation.md
§2.18).

Verdict per run (``TARGETS``): below saturation, mean TTFT and mean TPOT within 15%; saturated, throughput within
10%. A sweep stage is below saturation when the client kept the requested rate (≥ 95%) and the engine served ≥ 90% of
it (as ``lodo_bands``); a per-request run when its measured queue did not keep growing while requests arrived
(``kvledger.calibration.saturation``).

Bands: per regime (``gpu``: a cross-model GPU profile priced the run; ``uncalibrated``: the plain roofline), the
80% band of each metric's error built from the *other* deployments' errors in that regime (``lodo_bands._q``:
split-conformal ranks from 10 values, each deployment weighted once, a t interval below) — and, stricter, from the
other models' only.
A run is covered when every metric it is judged on lies in its band.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAGE_REQUESTS = 1000  # a sweep stage's first requests (a shorter window of the same load) for the fits, for speed
TARGETS = {"ttft_mean": 0.15, "tpot_mean": 0.15, "throughput": 0.10}  # issue 23's must-hold
ROWS = {"ttft_mean": "TTFT mean", "tpot_mean": "TPOT mean", "throughput": "throughput"}
SETUP = {"llmservingsim": "LLMServingSim in-process engine timings", "kubecon": "kubecon inference-perf client (GKE)",
         "training": "inference-sim/training inference-perf client", "distserve": "DistServe's client, vLLM 0.2.3"}


@dataclass
class Unit:
    """One run the must-hold counts, with what its replay needs."""

    label: str
    deployment: str
    setup: str
    gpu: str
    model: str
    run: Any
    stage: Any
    args: Any
    saturated: bool = False
    max_paddings: int | None = None
    errors: dict[str, dict[str, float | None]] = field(default_factory=dict)  # pricing → metric → error
    full: Any = None  # a sweep stage replayed whole (``validate``'s replay), for the errors; ``run`` is its window
    repeat: bool = False  # a second measure of another folder's engine (validate_all.KUBECON_SAME_ENGINE): judged,
    # never evidence for another run (no fit, client latency or band of another run draws on it)


@dataclass
class Excluded:
    """A measured run the simulator does not replay, and why (the refusal's own words where there is one)."""

    label: str
    gpu: str
    runs: int
    why: str


def _args(**kw):
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    return SimRequestArgs(step_cost="roofline", gpu_profile="none", **kw)


def _sweep_below(st) -> bool:
    return st.achieved_rate >= 0.95 * st.requested_rate and st.requests_per_s >= 0.9 * st.requested_rate


def _distserve_units() -> list[Unit]:
    from kvledger.calibration.replay import load_measured
    from kvledger.calibration.saturation import saturation
    from kvledger.dynamics.workload.distserve_runs import list_distserve_runs

    a = _args(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", gpu_memory_utilization=0.95,
              max_num_batched_tokens=16384, max_num_seqs=1024, max_model_len=2048, block_size=16, batching="vllm_v0",
              enable_chunked_prefill=False, enable_prefix_caching=False,
              enforce_eager=True)  # vLLM 0.2.3 had no CUDA graphs (vllm-project/vllm PR #1926, in 0.2.4)
    out = []
    for n in list_distserve_runs():
        r = load_measured("distserve:" + n)
        out.append(Unit(f"distserve {n}", "distserve vLLM 0.2.3 OPT-13B", "distserve", "A100-80GB",
                        "facebook/opt-13b", r, None, a, saturation(r.measured, None) is not None, max_paddings=256))
    return out


LSS_RUNS = (("examples/RTXPRO6000/Llama-3.1-8B/vllm", "RTX PRO 6000", "meta-llama/Llama-3.1-8B"),
            ("examples/RTXPRO6000/Qwen3-30B-A3B-Instruct-2507/vllm", "RTX PRO 6000",
             "Qwen/Qwen3-30B-A3B-Instruct-2507"),
            ("examples/RTX4090/Llama-3.1-8B/vllm", "RTX 4090", "meta-llama/Llama-3.1-8B"),
            ("results/rtx4090-llama8b-tp1", "RTX 4090", "meta-llama/Llama-3.1-8B"),
            ("examples/RTXPRO6000/Qwen3-32B/vllm", "RTX PRO 6000", "Qwen/Qwen3-32B"),
            ("examples/RTXPRO6000/DeepSeek-V3.2-Exp-16L64E/vllm", "RTX PRO 6000",
             "deepseek-ai/DeepSeek-V3.2-Exp-16L64E"))
PUBLIC = Path(__file__).resolve().parent / "data" / "public-runs"
#: LLMServingSim runs the project copied from the public repository (not in ../shared), by their upstream path
PUBLIC_LSS = {"examples/RTXPRO6000/Qwen3-32B/vllm": PUBLIC / "llmservingsim-rtxpro6000-qwen3-32b" / "vllm",
              "examples/RTXPRO6000/DeepSeek-V3.2-Exp-16L64E/vllm":
              PUBLIC / "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "vllm"}
#: models no catalog bundles, by their config.json copied beside the run (a reduced test model: 16 layers, 64 experts)
MODEL_FILES = {"deepseek-ai/DeepSeek-V3.2-Exp-16L64E":
               str(PUBLIC / "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "model" / "config.json")}


def lss_runs(shared: Path) -> list[tuple[str, Path, str, str]]:
    """LLMServingSim's per-request runs that exist here: (upstream path, local path, GPU, model id)."""
    out = []
    for rel, gpu, model in LSS_RUNS:
        p = PUBLIC_LSS.get(rel, shared / "llmservingsim" / "bench" / rel)
        if p.exists():
            out.append((rel, p, gpu, model))
    return out


def _lss_units(shared: Path) -> tuple[list[Unit], list[Excluded]]:
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.replay import load_measured
    from kvledger.calibration.saturation import saturation
    from kvledger.errors import KvLedgerError

    units, excluded = [], []
    for rel, p, gpu, model in lss_runs(shared):
        r = load_measured(str(p))
        label = "llmservingsim " + rel.replace("/vllm", "")
        a = _args(model=MODEL_FILES.get(model, model), gpu=gpu, tp=None)
        try:
            engine_for(a, r)
        except KvLedgerError as e:
            excluded.append(Excluded(label, gpu, 1, str(e).split(". ")[0].replace(str(p) + "/", "")))
            continue
        units.append(Unit(label, label, "llmservingsim", gpu, model, r, None, a,
                          saturation(r.measured, None) is not None))
    return units, excluded


def _sweep_units() -> tuple[list[Unit], list[Excluded]]:
    import validate_all as va
    from kvledger.calibration.sweep import read_stage, stage_run

    units, excluded = [], []
    for name, (kw, caveat) in va.KUBECON_CONFIGS.items():
        if not (va.KUBECON / name).exists():
            continue
        if caveat:
            excluded.append(Excluded(f"kubecon {name}", "H100", 7, caveat))
            continue
        kw = dict(kw)
        a = _args(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version=kw.pop("engine_version", "0.11.0"),
                  gpu_memory_utilization=0.9, max_model_len=512, **kw)
        for k in range(7):
            st = read_stage(va.KUBECON / name / "results" / f"stage_{k}_lifecycle_metrics.json")
            full = stage_run(st, f"kubecon {name}/stage {k}", seed=k, client_concurrency=va.CLIENT_CONCURRENCY)
            units.append(Unit(full.label, va.kubecon_deployment(name), "kubecon", "H100", "meta-llama/Llama-3.1-8B",
                              _window(full), st, a, not _sweep_below(st), full=full,
                              repeat=name in va.KUBECON_SAME_ENGINE))
    for exp in va.training_runs():
        dep = f"training {exp['experiment']}"
        n_all = len(list((va.TRAINING / _exp_dir(exp["experiment"]) / "results").glob("stage_*_lifecycle*.json")))
        if not exp["bundled"]:
            excluded.append(Excluded(dep, "H100", n_all, "model not bundled"))
            continue
        if len(exp["items"]) < n_all:
            excluded.append(Excluded(dep, "H100", n_all - len(exp["items"]), "more than 10% of the stage's requests "
                                     "failed at the client (its real load is unknown)"))
        for full, st in exp["items"]:
            units.append(Unit(f"training {full.label}", dep, "training", "H100", exp["model"], _window(full), st,
                              exp["args"], not _sweep_below(st), full=full))
    return units, excluded


def _window(run):
    """The stage's first ``STAGE_REQUESTS`` requests (``stage_run``'s ``max_requests``: the same workload, cut), which
    the fits replay for speed. The errors replay the whole stage, as ``kvledger validate`` does: a window of a
    saturated stage ends in a drain (the last requests finish at a shrinking batch) that is a sixth of its length
    against ~1% of the measured stage's, and starts with a prefix cache the real server had warmed in the stages
    before."""
    from dataclasses import replace

    return replace(run, requests=run.requests[:STAGE_REQUESTS])


def _exp_dir(short: str) -> str:
    import validate_all as va

    return next(p.name for p in va.TRAINING.iterdir() if p.is_dir() and p.name.split("-", 2)[2] == short)


#: ``validate_all.py --gemm-efficiency``: how every roofline here prices the weight matmuls (None: flat, as before)
GEMM_MODE: str | None = None


def _setup_of(u: Unit):
    from dataclasses import replace

    from kvledger.calibration.api import engine_for

    args = u.args if GEMM_MODE is None else replace(u.args, gemm_efficiency=GEMM_MODE)
    return engine_for(args, u.run, max_paddings=u.max_paddings)


def _errors(u: Unit, setup, cost, frontend_s: float = 0.0) -> dict[str, float | None]:
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.replay import replay, with_frontend
    from kvledger.calibration.sweep import stage_comparison

    recs = with_frontend(replay(u.full if u.full is not None else u.run, setup.config, cost), frontend_s).records
    c = (stage_comparison(u.label, u.stage, recs) if u.stage is not None
         else compare_runs(u.label, u.run.measured, recs))
    return {m: c.row(row).rel_error for m, row in ROWS.items()}


@functools.cache
def arch_of(model: str) -> str:
    """"moe" for a mixture-of-experts model, else "dense" (the kernel family its matmuls run in); each model read once
    (a config file is parsed again by every load_model)."""
    from kvledger.catalog.models import load_model

    return "moe" if load_model(MODEL_FILES.get(model, model)).is_moe else "dense"


def _fit_for(model: str, gpu: str, units: list[Unit], setups: dict[int, Any],
             only_setups: set[str] | None = None) -> tuple[Any, list[str], list[str]] | None:
    """The GPU-scope fit on every below-saturation run of another model of the same kernel family on ``gpu`` (dense or
    MoE: module docstring; another family's where the GPU has none) (with ``only_setups``: of those timed through these
    set-ups), with a frontend latency per set-up; where every such run is saturated, on the per-request ones among them
    (replayed at their own arrivals, as ``calibrate --scope gpu`` fits them: the RTX PRO 6000's models); None where
    there is no such run."""
    from kvledger.calibration.gpu_fit import fit_gpu_fractions

    others = [u for u in units if u.gpu == gpu and u.model != model and not u.repeat
              and (only_setups is None or u.setup in only_setups)]
    on = []
    for pool in ([u for u in others if arch_of(u.model) == arch_of(model)], others):  # own kernel family first
        on = [u for u in pool if not u.saturated] or [u for u in pool if u.stage is None]  # (per-request: below)
        if on:
            break
    if not on:
        return None
    fit = fit_gpu_fractions([(u.run, setups[id(u)]) for u in on], fit_frontend=True, setups=[u.setup for u in on])
    return fit, sorted({u.model for u in on}), sorted({u.setup for u in on})


#: the rules for choosing a run's fit (``gpuscope``; each within the run's kernel family first, ``_fit_for``): every
#: other model's runs on the GPU (the issue's rule); those of
#: the run's own set-up where another model was timed through it (else the same as the first); and "client": the first
#: rule's fractions with the set-up's latency fitted on the set-up's *other deployments* (``_client_latency``)
VIEWS = ("all", "setup", "client")


def _fits(gpu: str, model: str, units: list[Unit], setups: dict[int, Any]) -> dict[str, dict]:
    """view → the fit predicting ``model`` on ``gpu`` (absent: no other model measured there)."""
    out: dict[str, dict] = {}
    own = {u.setup for u in units if u.gpu == gpu and u.model == model}
    for view, only in (("all", None), ("setup", own)):
        t = time.perf_counter()
        got = _fit_for(model, gpu, units, setups, only)
        if got is None:
            continue
        fit, on, via = got
        if view == "setup" and "all" in out and out["all"]["fitted_on"] == on and out["all"]["setups"] == via:
            out[view] = out["all"]
            continue
        out[view] = {"name": f"{gpu}: {' + '.join(on)} → {model}", "view": view, "gpu": gpu, "predict": model,
                     "fitted_on": on, "setups": via, "fractions": [fit.flops_fraction, fit.bandwidth_fraction],
                     "link_share": fit.link_share,
                     "frontends_s": fit.frontends_s, "objective": fit.objective, "num_replays": fit.num_replays,
                     "wall_s": time.perf_counter() - t}
    if "setup" not in out and "all" in out:
        out["setup"] = out["all"]
    return out


def gpuscope(shared: Path) -> dict:
    """Every run predicted (module docstring); returns the per-run rows, the fits, the counts and the exclusions."""
    from kvledger.calibration.gpu_fit import roofline_with

    lss, ex1 = _lss_units(shared)
    sweeps, ex2 = _sweep_units()
    units = _distserve_units() + lss + sweeps
    excluded = ex1 + ex2
    setups = {id(u): _setup_of(u) for u in units}
    fits, views, fracs = [], {}, {}
    for gpu, model in sorted({(u.gpu, u.model) for u in units}):
        got = _fits(gpu, model, units, setups)
        fits += [f for v, f in got.items() if v == "all" or f is not got.get("all")]
        for u in (u for u in units if u.gpu == gpu and u.model == model):
            s = setups[id(u)]
            u.errors["uncalibrated"] = _errors(u, s, s.cost)
            views[id(u)] = {}
            for view, f in got.items():
                key = "gpu/" + f["name"]
                fracs[key] = (*f["fractions"], 0.0, 0.0, f.get("link_share"))  # roofline_with's terms
                if key not in u.errors:
                    u.errors[key] = _errors(u, s, roofline_with(s, *fracs[key]), f["frontends_s"].get(u.setup, 0.0))
                views[id(u)][view] = key
    _client_view(units, setups, views, fracs)
    rows = [_row(u, views[id(u)]) for u in units]
    for view in VIEWS:
        _cover(rows, view)
    return {"rows": rows, "fits": fits, "excluded": [vars(e) for e in excluded],
            "counts": {view: _counts(rows, excluded, view) for view in VIEWS}}


def _client_latency(u: Unit, units: list[Unit], setups: dict[int, Any], views: dict[int, dict],
                    fracs: dict[str, tuple]) -> tuple[float, list[str]]:
    """The latency of ``u``'s set-up (its client and front end) fitted on the below-saturation runs of the set-up's
    *other deployments*, each replayed at its own cross-model fractions ("all"): (seconds, the deployments used); 0 and
    none where the set-up timed no other deployment. Never ``u``'s deployment, so never the run predicted."""
    from kvledger.calibration.gpu_fit import best_frontend, roofline_with
    from kvledger.calibration.replay import replay

    on = [v for v in units if v.setup == u.setup and v.deployment != u.deployment and not v.saturated
          and not v.repeat and "all" in views[id(v)]]
    if not on:
        return 0.0, []
    reps = [(v.run, replay(v.run, setups[id(v)].config, roofline_with(setups[id(v)], *fracs[views[id(v)]["all"]])))
            for v in on]
    return best_frontend(reps)[1], sorted({v.deployment for v in on})


def _client_view(units: list[Unit], setups: dict[int, Any], views: dict[int, dict],
                 fracs: dict[str, tuple]) -> None:
    """View "client": each run with a cross-model fit priced at that fit's fractions plus its set-up's latency fitted
    on the set-up's other deployments (``_client_latency``, one fit per deployment)."""
    from kvledger.calibration.gpu_fit import roofline_with

    by_dep: dict[str, tuple[float, list[str]]] = {}
    for u in units:
        if "all" not in views[id(u)]:
            continue
        if u.deployment not in by_dep:
            by_dep[u.deployment] = _client_latency(u, units, setups, views, fracs)
        lat, via = by_dep[u.deployment]
        key = f"{views[id(u)]['all']} + client {lat * 1e3:.1f} ms from {', '.join(via) or 'no other deployment'}"
        u.errors[key] = _errors(u, setups[id(u)], roofline_with(setups[id(u)], *fracs[views[id(u)]["all"]]), lat)
        views[id(u)]["client"] = key


def _judged(saturated: bool) -> tuple[str, ...]:
    return ("throughput",) if saturated else ("ttft_mean", "tpot_mean")


def _within(errs: dict[str, float | None], saturated: bool) -> bool:
    return all(errs.get(m) is not None and abs(errs[m]) <= TARGETS[m] for m in _judged(saturated))


def _row(u: Unit, views: dict[str, str]) -> dict:
    """The run's errors per pricing (``uncalibrated``; ``gpu/<fit>``) and, per view, which priced it and its verdict."""
    out = {"run": u.label, "deployment": u.deployment, "setup": u.setup, "gpu": u.gpu, "model": u.model,
           "arch": arch_of(u.model), "saturated": u.saturated, "errors": u.errors, "repeat": u.repeat,
           "within_uncalibrated": _within(u.errors["uncalibrated"], u.saturated), "views": {}}
    for view in VIEWS:
        key = views.get(view, "uncalibrated")
        out["views"][view] = {"pricing": key, "regime": "gpu" if key != "uncalibrated" else "uncalibrated",
                              "within": _within(u.errors[key], u.saturated)}
    return out


def _band(rows: list[dict], row: dict, metric: str, key: str, view: str) -> dict:
    """The 80% band of ``metric`` in ``row``'s regime under ``view``, from the errors of the rows of other
    deployments (``key`` = "deployment") or other models (``key`` = "model") in that regime and kernel family: each
    such row's own pricing in that view (a GPU fit's, or the plain roofline's — every row has one). A family with
    fewer than two such values takes the dense band widened to take them in, as ``kvledger.ledgers.error_band`` does
    for a regime with one measured point."""
    import lodo_bands

    regime, arch = row["views"][view]["regime"], row.get("arch", "dense")
    errs: dict[str, list[float]] = {"dense": [], "moe": []}
    deps: dict[str, list[str]] = {"dense": [], "moe": []}  # each error's deployment: the ranks weigh each once
    for r in rows:
        if r[key] == row[key] or r.get("repeat") or metric not in _judged(r["saturated"]):
            continue
        k = r["views"][view]["pricing"] if regime == "gpu" else "uncalibrated"
        if (regime == "gpu") == (k != "uncalibrated") and r["errors"][k].get(metric) is not None:
            errs[r.get("arch", "dense")].append(r["errors"][k][metric])
            deps[r.get("arch", "dense")].append(r["deployment"])
    own = errs[arch]
    if len(own) >= 2:
        return lodo_bands._q(own, deps[arch])
    q = lodo_bands._q(errs["dense"], deps["dense"]) if len(errs["dense"]) >= 2 else {}
    if q and own:
        q = {**q, "q10": min(q["q10"], *own), "q90": max(q["q90"], *own), "num_runs": q["num_runs"] + len(own)}
    return q


def _cover(rows: list[dict], view: str) -> None:
    """Each row's bands under ``view`` and whether they cover its judged metrics (leaving its deployment, then its
    model, out)."""
    for r in rows:
        v = r["views"][view]
        e = r["errors"][v["pricing"]]
        for key in ("deployment", "model"):
            bands = {m: _band(rows, r, m, key, view) for m in _judged(r["saturated"])}
            inside = [bool(b) and e[m] is not None and b["q10"] <= e[m] <= b["q90"] for m, b in bands.items()]
            v[f"band_without_{key}"] = bands
            v[f"covered_without_{key}"] = all(inside)
            v[f"points_covered_without_{key}"] = sum(inside)


def _counts(rows: list[dict], excluded: list[Excluded], view: str) -> dict:
    """[count, of] per question under ``view``: runs within the targets, runs whose bands cover them; over the runs
    with cross-model evidence, every replayed run, every measured run (those not replayed counted as misses), and per
    deployment (every run of it within)."""
    ev = [r for r in rows if r["views"][view]["regime"] == "gpu"]
    n_ex = sum(e.runs for e in excluded)

    def c(rs: list[dict], k: str) -> list[int]:
        return [sum(bool(r["views"][view][k]) for r in rs), len(rs)]

    deps = sorted({r["deployment"] for r in rows})
    return {"cross_model": {"within": c(ev, "within"), "covered": c(ev, "covered_without_deployment"),
                            "covered_model_out": c(ev, "covered_without_model"),
                            "within_uncalibrated": [sum(r["within_uncalibrated"] for r in ev), len(ev)]},
            "replayed": {"within": c(rows, "within"), "covered": c(rows, "covered_without_deployment"),
                         "covered_model_out": c(rows, "covered_without_model")},
            "every_run": {"within": [c(rows, "within")[0], len(rows) + n_ex],
                          "covered": [c(rows, "covered_without_deployment")[0], len(rows) + n_ex]},
            "deployments": [sum(all(r["views"][view]["within"] for r in rows if r["deployment"] == d) for d in deps),
                            len(deps)],
            "points_covered": [sum(r["views"][view]["points_covered_without_deployment"] for r in rows),
                               sum(len(_judged(r["saturated"])) for r in rows)],
            "metric_covered": _metric_covered(rows, view)}


def _metric_covered(rows: list[dict], view: str) -> dict[str, list[int]]:
    """Per metric, [runs whose measured value lies in that metric's band, runs judged on it]: each band is an 80%
    band of one value, so this is the count it is built to meet (a run judged on two metrics is covered only when
    both are, about 0.8² by chance where their errors are independent)."""
    out: dict[str, list[int]] = {m: [0, 0] for m in ROWS}
    for r in rows:
        v = r["views"][view]
        e = r["errors"][v["pricing"]]
        for m, b in v["band_without_deployment"].items():
            out[m][0] += bool(b) and e[m] is not None and b["q10"] <= e[m] <= b["q90"]
            out[m][1] += 1
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:+.0f}%"


def print_gpuscope(d: dict) -> None:
    print("\n== issue 23's must-hold over every measured run: GPU profile from another model on the same GPU ==")
    for f in d["fits"]:
        fe = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in f["frontends_s"].items())
        print(f"  fit [{f['view']}] {f['name']}: {f['fractions'][0]:.3f} FLOP/s, {f['fractions'][1]:.3f} bandwidth; "
              f"frontend {fe}; objective {f['objective']:.3f}, {f['num_replays']} replays, {f['wall_s']:.0f} s")
    for view in VIEWS:
        print(f"  -- view '{view}' --")
        print(f"  {'run':<52}{'priced by':<26}{'TTFT':>7}{'TPOT':>7}{'thr':>7}  judged  within  band (w/o deployment)")
        for r in d["rows"]:
            v = r["views"][view]
            e = r["errors"][v["pricing"]]
            bands = "; ".join(f"{m.split('_')[0]} {_pct(b.get('q10'))}…{_pct(b.get('q90'))}"
                              for m, b in v["band_without_deployment"].items())
            how = "GPU profile" if v["regime"] == "gpu" else "no cross-model evidence"
            print(f"  {r['run']:<52}{how:<26}{_pct(e['ttft_mean']):>7}"
                  f"{_pct(e['tpot_mean']):>7}{_pct(e['throughput']):>7}  {'sat.' if r['saturated'] else 'below':<7} "
                  f"{'yes' if v['within'] else 'NO':<7} {'in' if v['covered_without_deployment'] else 'OUT'}  {bands}")
        c = d["counts"][view]
        x, a, every = c["cross_model"], c["replayed"], c["every_run"]
        print(f"  with cross-model evidence: {x['within'][0]}/{x['within'][1]} runs within the targets "
              f"(uncalibrated: {x['within_uncalibrated'][0]}/{x['within_uncalibrated'][1]}); bands cover "
              f"{x['covered'][0]}/{x['covered'][1]} (without the model: {x['covered_model_out'][0]}/"
              f"{x['covered_model_out'][1]})")
        print(f"  every replayed run (no cross-model evidence: uncalibrated roofline): {a['within'][0]}/"
              f"{a['within'][1]} within; bands cover {a['covered'][0]}/{a['covered'][1]} (without the model: "
              f"{a['covered_model_out'][0]}/{a['covered_model_out'][1]}); points covered {c['points_covered'][0]}/"
              f"{c['points_covered'][1]}; deployments with every run within {c['deployments'][0]}/"
              f"{c['deployments'][1]}")
        print("  each metric's band covering its measured value: " + ", ".join(
            f"{ROWS[m]} {k}/{n}" for m, (k, n) in c["metric_covered"].items()))
        print(f"  every measured run, those not replayed counted as misses: {every['within'][0]}/{every['within'][1]} "
              f"within; covered {every['covered'][0]}/{every['covered'][1]}")
    for e in d["excluded"]:
        print(f"  not replayed: {e['label']} ({e['gpu']}, {e['runs']} run(s)): {e['why']}")


def markdown(d: dict) -> str:
    """The per-run table of docs/validation.md (§2.4) from the section's result: the issue's rule ("all") and, where
    it differs, the own-set-up rule ("setup"); errors TTFT / TPOT / throughput, the judged ones in bold."""
    lines = ["| run | GPU | regime | judged | TTFT / TPOT / throughput (all other models on the GPU) | within | band "
             "covers | own set-up's other models, where different | within |", "|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        cells = []
        for view in VIEWS:
            v = r["views"][view]
            e = r["errors"][v["pricing"]]
            cells.append(" / ".join((f"**{_pct(e[m])}**" if m in _judged(r["saturated"]) else _pct(e[m]))
                                    .replace("-", "−") for m in ROWS))
        a, s = r["views"]["all"], r["views"]["setup"]
        other = (cells[1], "yes" if s["within"] else "no") if s["pricing"] != a["pricing"] else ("same", "")
        lines.append(f"| {r['run']} | {r['gpu']} | {'GPU profile' if a['regime'] == 'gpu' else 'no cross-model'} | "
                     f"{'saturation' if r['saturated'] else 'below'} | {cells[0]} | {'yes' if a['within'] else 'no'} | "
                     f"{'yes' if a['covered_without_deployment'] else 'no'} | {other[0]} | {other[1]} |")
    return "\n".join(lines)
