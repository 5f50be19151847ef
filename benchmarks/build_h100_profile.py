"""Fit the bundled H100 SXM profile (``src/kvledger/accounting/data/gpu_profiles/h100-sxm.json``) on
inference-sim/training's three models (one set-up, one client), and measure how it carries: leave one model out.

    python benchmarks/build_h100_profile.py [--write] [--json OUT] [--kubecon]

The fit (``kvledger.calibration.gpu_fit.fit_gpu_fractions``, the ``calibrate --scope gpu --fit-frontend`` machinery)
takes the two roofline fractions and the set-up's per-request frontend latency on every stage below saturation of
Llama-2-7B TP1, Llama-2-70B TP4 and CodeLlama-34B TP2 (first ``gpuscope_all.STAGE_REQUESTS`` requests of each). The
frontend latency is that client's (HTTP, tokenisation, streaming), not the GPU's: the profile records it under
``fit`` and never adds it to another user's TTFT. Errors are stated both ways: in-sample with the client's latency
(how well the fit holds its own stages) and without it (what a user of the bundled profile gets for these stages).
Leave one model out: the fractions fitted on the other two models, the held-out model's stages predicted with them
(and the set-up's latency from the other two's fit). No measured value is copied into the profile: the training
repository states no licence (../shared/data/measured-runs/inference-sim-training/SOURCES.md), so the file holds
two fitted numbers, a fitted latency and error percentages only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
OUT = ROOT / "src" / "kvledger" / "accounting" / "data" / "gpu_profiles" / "h100-sxm.json"
SETUP = "inference-sim/training inference-perf client"
MEASURED = (ROOT / ".." / "shared" / "data" / "measured-runs").resolve()
#: why commands do not use it on H100 unless named (--gpu-profile bundled:h100-sxm); the evidence is what
#: ``--kubecon`` prints (docs/validation.md §2.5)
DEFAULT_NOTE = ("opt-in, not H100's default: fitted in measured mode (its FLOP fraction scales the H100's measured "
                "matmul curve, and the layers' kernels are priced), it lands at 0.988 / 0.794, next to the "
                "uncalibrated default's 1.0 / 0.8. On the one H100 set-up it was not fitted on (kubecon's client "
                "and host, Llama-3.1-8B, 28 stages) it is 8/28 within the targets (mean TTFT and TPOT within 15%, "
                "throughput within 10%), as the default is, with a median |judged error| of 10.4% against the "
                "default's 8.9%; the default stays uncalibrated, whose error band was measured on these runs (python "
                "benchmarks/build_h100_profile.py --kubecon)")


def _units():
    import gpuscope_all as ga

    units, _ = ga._sweep_units()
    return [u for u in units if u.setup == "training"], ga


def _errs(ga, units, setups, fit, with_frontend: bool) -> list[dict]:
    from kvledger.calibration.gpu_fit import roofline_with

    out = []
    for u in units:
        s = setups[id(u)]
        fe = fit.frontends_s.get("training", 0.0) if with_frontend else 0.0
        e = ga._errors(u, s, roofline_with(s, fit.flops_fraction, fit.bandwidth_fraction), fe)
        # source: the stage file under ../shared/data/measured-runs (a path, no data), so that a validation of a
        # fitted stage says it is in-sample (accounting/gpu_profile.py: GpuProfile.data)
        out.append({"label": u.label, "source": str(Path(u.run.source).resolve().relative_to(MEASURED)),
                    "model": s.model_name, "tp": s.tp, "saturated": u.saturated,
                    **{f"{k}_rel_error": (round(v, 4) if v is not None else None) for k, v in e.items()}})
    return out


def _fit(units, setups):
    from kvledger.calibration.gpu_fit import fit_gpu_fractions

    on = [u for u in units if not u.saturated]
    return fit_gpu_fractions([(u.run, setups[id(u)]) for u in on], fit_frontend=True, setups=[u.setup for u in on])


def build() -> dict:
    from kvledger.calibration.gpu_profile_file import gpu_profile_dict

    units, ga = _units()
    setups = {id(u): ga._setup_of(u) for u in units}
    t = time.perf_counter()
    fit = _fit(units, setups)
    print(f"all three: {fit.flops_fraction:.4f}/{fit.bandwidth_fraction:.4f}, frontend "
          f"{fit.frontends_s.get('training', 0) * 1e3:.1f} ms ({time.perf_counter() - t:.0f} s)", flush=True)
    runs = _errs(ga, units, setups, fit, True)
    bare = _errs(ga, units, setups, fit, False)
    lomo = []
    for m in sorted({u.model for u in units}):
        t = time.perf_counter()
        f = _fit([u for u in units if u.model != m], setups)
        held = [u for u in units if u.model == m]
        lomo.append({"predict": m, "fitted_on": sorted({u.model for u in units if u.model != m}),
                     "flops_fraction": round(f.flops_fraction, 4), "bandwidth_fraction": round(f.bandwidth_fraction, 4),
                     "frontend_s": round(f.frontends_s.get("training", 0.0), 5),
                     "stages": _errs(ga, held, setups, f, True)})
        print(f"leave {m} out: {f.flops_fraction:.4f}/{f.bandwidth_fraction:.4f} ({time.perf_counter() - t:.0f} s)",
              flush=True)
    prof = gpu_profile_dict(fit, runs, [])
    prof["gpu"] = setups[id(units[0])].gpu_name
    prof["fit"]["frontend_s"] = 0.0
    prof["fit"]["set_up_frontend_s"] = {SETUP: round(fit.frontends_s.get("training", 0.0), 5)}
    prof["fit"]["frontend_note"] = ("fitted for the training client and profiled out of the fractions; the profile "
                                    "never adds it (another user's client has its own)")
    prof["default"] = False
    prof["default_note"] = DEFAULT_NOTE
    prof["runs_without_frontend"] = bare
    prof["leave_one_model_out"] = lomo
    prof["data_files"] = ["../shared/data/measured-runs/inference-sim-training/default_args/*/results/"
                          "stage_*_lifecycle_metrics.json (Llama-2-7B TP1, Llama-2-70B TP4, CodeLlama-34B TP2)"]
    prof["source"] = ("inference-sim/training (commit ed5c1d26900e6909758d5e1641a18edaf56a1caf; no licence stated: "
                      "fitted numbers and error percentages only, no data copied), H100 SXM, instrumented vLLM V1, "
                      "inference-perf client; python benchmarks/build_h100_profile.py --write")
    return prof


def kubecon(fractions: tuple[float, float]) -> dict:
    """kubecon's 28 modelled H100 stages (Llama-3.1-8B, another client and host than the fit's), priced by the
    profile's fractions with no frontend (what a user gets by default) and by the uncalibrated roofline (0.7/0.8): the
    evidence for making the profile H100's default. Judged as issue 23's must-hold (gpuscope_all.TARGETS)."""
    import gpuscope_all as ga
    from kvledger.calibration.gpu_fit import roofline_with

    units, _ = ga._sweep_units()
    out = {"profile": [], "uncalibrated": []}
    for u in (u for u in units if u.setup == "kubecon"):
        s = ga._setup_of(u)
        # uncalibrated: what a user gets with no profile (FLOP fraction 1.0 on the measured matmul curve, 0.7 flat)
        plain = (1.0 if getattr(s.cost, "gemm_curve", getattr(getattr(s.cost, "inner", None), "gemm_curve", None))
                 is not None else 0.7, 0.8)
        for key, cost in (("profile", roofline_with(s, *fractions)), ("uncalibrated", roofline_with(s, *plain))):
            e = ga._errors(u, s, cost)
            out[key].append({"label": u.label, "saturated": u.saturated, **e})
    for key, rows in out.items():
        within = sum(ga._within(r, r["saturated"]) for r in rows)
        judged = [abs(r[m]) for r in rows for m in ga._judged(r["saturated"]) if r[m] is not None]
        print(f"kubecon by {key}: {within}/{len(rows)} within; median |judged error| "
              f"{sorted(judged)[len(judged) // 2]:.1%}")
        for r in rows:
            print(f"  {r['label']}: " + " / ".join(f"{r[m]:+.1%}" if r[m] is not None else "n/a"
                                                  for m in ("ttft_mean", "tpot_mean", "throughput"))
                  + (" (saturated)" if r["saturated"] else ""))
    return out


def main() -> None:
    from kvledger.accounting.calibration_profile import dump_profile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--kubecon", action="store_true", help="only compare profile and roofline on kubecon's stages")
    a = ap.parse_args()
    if a.kubecon:
        prof = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {"flops_fraction": 1.0,
                                                                                "bandwidth_fraction": 0.728}
        kubecon((prof["flops_fraction"], prof["bandwidth_fraction"]))
        return
    prof = build()
    if a.json:
        Path(a.json).write_text(json.dumps(prof, indent=1), encoding="utf-8")
    if a.write:
        OUT.write_text(dump_profile(prof), encoding="utf-8")


if __name__ == "__main__":
    main()
