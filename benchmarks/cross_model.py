"""A GPU-scope calibration carried across models: inference-sim/training's H100 SXM runs of three models from one
instrumented set-up and one client (Llama-2-7B TP1, CodeLlama-34B-Instruct TP2, Llama-2-70B TP4; no licence: read from
../shared, errors only).

Used by ``python benchmarks/validate_all.py --sections crossmodel``.

For every ordered pair of models (X, Y): the roofline's two GPU fractions are fitted
(``kvledger.calibration.gpu_fit.fit_gpu_fractions``) on X's stages only and Y's stages are predicted with them; and
leaving one model out, on the other two models' stages together. Each stage is replayed with its own model, TP and
scheduler limits (its launch record) and its client's prompt pool (``validate_all.training_runs``). Errors are
predicted/measured − 1 of each stage's mean TTFT and mean TPOT (the TPOT derived from E2E and TTFT,
``kvledger.calibration.sweep``) and of its throughput. A stage is saturated when the engine served less than 90% of
the requested rate (only CodeLlama-34B's reasoning stage: 3.22 of 4 req/s); its throughput is then the saturation
throughput, and its TTFT/TPOT are not held to the below-saturation target; it is not fitted on (``_saturated``).
Never fitted on the model predicted.
"""

from __future__ import annotations

import time

STAGE_REQUESTS = 1000  # each stage's first requests (a shorter window of the same load), for speed
SATURATED_SHARE = 0.9  # served / requested rate below this: the stage saturated the engine
TARGETS = {"ttft_mean": 0.15, "tpot_mean": 0.15, "throughput": 0.10}  # issue 23's must-hold


def _groups() -> dict[str, list[tuple]]:
    """Model → [(run, stage, setup)] over its experiments."""
    import validate_all as va
    from kvledger.calibration.api import engine_for

    out: dict[str, list[tuple]] = {}
    for exp in va.training_runs(STAGE_REQUESTS):
        if exp["bundled"]:
            out.setdefault(exp["model"], []).extend((r, st, engine_for(exp["args"], r)) for r, st in exp["items"])
    return out


def _saturated(st) -> bool:
    """The engine served less than ``SATURATED_SHARE`` of the requested rate: its queue grew all stage. Such a stage
    is predicted (its throughput is the saturation throughput) but never fitted on: its measured TTFT is the queue of a
    whole 1,200 s stage, a ``STAGE_REQUESTS`` window replays a fifth of it, and its log error (−80% … −88%) would
    outweigh every other stage's in the objective (a fit on CodeLlama-34B with it chose a 0.61 bandwidth fraction,
    TPOT +28% on its own general stage)."""
    return st.requests_per_s < SATURATED_SHARE * st.requested_rate


def _errors(items: list[tuple], fractions: tuple[float, ...] | None, frontend_s: float = 0.0) -> list[dict]:
    """Per stage: label, TP, saturated, and the TTFT/TPOT/throughput errors under the roofline at ``fractions`` (the
    two fractions, then optionally the host's per-step and per-sequence time, s) with ``frontend_s`` of set-up latency
    added to each TTFT and E2E."""
    from kvledger.calibration.gpu_fit import roofline_with
    from kvledger.calibration.replay import replay, with_frontend
    from kvledger.calibration.sweep import stage_comparison

    rows = []
    for run, st, s in items:
        cost = s.cost if fractions is None else roofline_with(s, *fractions)
        c = stage_comparison(run.label, st, with_frontend(replay(run, s.config, cost), frontend_s).records)
        sat = _saturated(st)
        rows.append({"stage": run.label, "tp": s.tp, "saturated": sat,
                     **{k: c.row(m).rel_error for k, m in (("ttft_mean", "TTFT mean"), ("tpot_mean", "TPOT mean"),
                                                          ("throughput", "throughput"))}})
    return rows


def _verdict(rows: list[dict]) -> dict:
    """Share of the stages within the must-hold's limits: TTFT and TPOT below saturation, throughput at it."""
    below = [r for r in rows if not r["saturated"]]
    sat = [r for r in rows if r["saturated"]]
    ok = sum(abs(r["ttft_mean"]) <= TARGETS["ttft_mean"] and abs(r["tpot_mean"]) <= TARGETS["tpot_mean"] for r in below)
    return {"below_within": [ok, len(below)],
            "saturation_within": [sum(abs(r["throughput"]) <= TARGETS["throughput"] for r in sat), len(sat)]}


#: the fits compared: (fit the set-up's frontend latency, fit the host's per-step and per-sequence time)
VARIANTS = ((False, False), (True, False), (True, True))


def cross_model(lomo: bool = False, single: bool = True, variants: tuple[tuple[bool, bool], ...] = VARIANTS) -> dict:
    """Single-model fits (fit on X, predict each other model) and, with ``lomo``, leave-one-model-out fits (fit on
    the two others); each once per ``variants``: (fit_frontend, fit_host) of ``fit_gpu_fractions`` — the two GPU
    fractions alone, with the set-up's frontend latency, and with the host's per-step and per-sequence time too."""
    from kvledger.calibration.gpu_fit import fit_gpu_fractions

    groups = _groups()
    models = sorted(groups)
    out = {"models": {m: {"tp": groups[m][0][2].tp, "stages": len(groups[m])} for m in models},
           "uncalibrated": {m: _errors(groups[m], None) for m in models}, "folds": []}
    fits = ([[m] for m in models] if single else []) + ([[m for m in models if m != y] for y in models] if lomo else [])
    for frontend, host in variants:
        for fit_on in fits:
            t = time.perf_counter()
            fit = fit_gpu_fractions([(r, s) for m in fit_on for r, st, s in groups[m] if not _saturated(st)],
                                    fit_frontend=frontend, fit_host=host)
            fr = fit.terms
            for y in (m for m in models if m not in fit_on):
                rows = _errors(groups[y], fr, fit.frontend_s)
                out["folds"].append({"fit_on": fit_on, "predict": y, "fractions": list(fr[:2]),
                                     "host_step_s": fit.host_step_s, "host_seq_s": fit.host_seq_s, "fit_host": host,
                                     "frontend_s": fit.frontend_s, "fit_frontend": frontend,
                                     "objective": fit.objective, "rows": rows, **_verdict(rows),
                                     "wall_s": time.perf_counter() - t})
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:+.0f}%"


def print_cross_model(d: dict) -> None:
    print("\n== GPU scope across models: inference-sim/training, H100 SXM, one set-up and client ==")
    for m, info in d["models"].items():
        rows = d["uncalibrated"][m]
        print(f"  {m} (TP {info['tp']}, {info['stages']} stages) uncalibrated: "
              + "; ".join(f"{r['stage']} TTFT {_pct(r['ttft_mean'])} TPOT {_pct(r['tpot_mean'])} thr "
                          f"{_pct(r['throughput'])}" for r in rows))
    for f in d["folds"]:
        print(f"  fit on {' + '.join(f['fit_on'])} (fractions {f['fractions'][0]:.3f} FLOP/s, "
              f"{f['fractions'][1]:.3f} bandwidth, frontend {f['frontend_s'] * 1e3:.1f} ms"
              f"{'' if f['fit_frontend'] else ' (not fitted)'}"
              + (f", host {f['host_step_s'] * 1e3:.2f} ms/step + {f['host_seq_s'] * 1e6:.1f} µs/seq"
                 if f.get('fit_host') else "") + f") → {f['predict']}: below saturation "
              f"{f['below_within'][0]}/{f['below_within'][1]} stages within 15% TTFT and TPOT; saturation throughput "
              f"{f['saturation_within'][0]}/{f['saturation_within'][1]} within 10%  ({f['wall_s']:.0f} s)")
        for r in f["rows"]:
            print(f"      {r['stage']:<30}{' [saturated]' if r['saturated'] else '':<13} TTFT {_pct(r['ttft_mean']):>7}"
                  f"  TPOT {_pct(r['tpot_mean']):>6}  throughput {_pct(r['throughput']):>6}")
