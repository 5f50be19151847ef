"""Why the calibrated replay of DistServe's vLLM runs over-predicts TPOT from 2.5 req/s up: the decode step each
run's records show, against the step the fitted profile prices.

    python benchmarks/distserve_decode_readoff.py [--extra DIR] [--pool N] [--json]

A V0 engine (vLLM 0.2.3) runs prompt-only and decode-only steps. Between a request's first token and its last, the
engine ran ``output − 1`` decode steps and every prompt step that ended in that interval (``run_evidence
.decode_steps_read``). Pricing those prompt steps with the fitted profile's prompt terms leaves the time the request's
decode steps took, so its mean decode step ``d = (finish − first token − Σ prompt steps) / (output − 1)``, s, and the
time-mean number of requests decoding over its interval, ``B`` (those between their first token and their finish).
The same read-off of the replay recovers the profile's own decode price (a check of the estimator). Requests with
fewer than 30 output tokens are skipped (too few steps to average).

The profile is ``calibrate --regime-start``'s fit on the five bundled runs, each replayed under the padding rule its
record shows (as ``validate_all.py --sections distserve``). ``--extra`` adds DistServe's other runs of the same
commit (e.g. ``vllm-150-1.5.exp``, ``vllm-250-2.5.exp``, ``vllm-350-3.5.exp``), replayed with the profile, never
fitted. The last table replays the runs whose prompt batches obey ``max_paddings`` 256 with decode steps priced as
the records read (a line through their requests' (B, d)), on the planned pool and on ``--pool`` blocks: a diagnosis
of where the error comes from, not a prediction (the line is read off the runs it is then compared with).
Deterministic; about a minute.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from distserve_evidence import _setup  # noqa: E402

MIN_OUTPUT = 30
BINS = (0, 10, 20, 30, 40, 50, 60, 80)


def _prompt_step_s(coef: dict, tokens: tuple[int, ...], padded: bool) -> float:
    """A V0 prompt step as the profile prices it, s: padded to batch × longest prompt under ``max_paddings``
    (vLLM 0.2.2+), the prompts concatenated without it."""
    lens = [max(tokens)] * len(tokens) if padded else list(tokens)
    return coef["fixed_s"] + coef["prefill_step_s"] + coef["prefill_token_s"] * sum(lens) \
        + coef["prefill_pair_s"] * sum(t * (t + 1) / 2 for t in lens)


def readoff(records, coef: dict, padded: bool) -> np.ndarray:
    """Per request (≥ MIN_OUTPUT output tokens): (B, d s, prompt steps per decode step), shape (n, 3)."""
    from kvledger.calibration.run_evidence import decode_steps_read

    return decode_steps_read(records, lambda step: _prompt_step_s(coef, step.prompt_tokens, padded), MIN_OUTPUT)


def _means(records) -> tuple[float, float]:
    ok = [r for r in records if r.ok]
    tpot = [(r.finish_s - r.first_token_s) / (r.num_output_tokens - 1) for r in ok if r.num_output_tokens > 1]
    return float(np.mean([r.ttft_s for r in ok])), float(np.mean(tpot))


def _line(x: np.ndarray) -> tuple[float, float]:
    c, *_ = np.linalg.lstsq(np.c_[np.ones(len(x)), x[:, 0]], x[:, 1], rcond=None)
    return float(c[0]), float(c[1])


def _runs(extra: Path | None):
    from kvledger.calibration.api import engine_for
    from kvledger.calibration.replay import load_measured
    from kvledger.dynamics.workload.distserve_runs import list_distserve_runs

    names = list_distserve_runs()
    sources = ["distserve:" + n for n in names]
    if extra is not None:
        sources += [str(p) for p in sorted(extra.glob("vllm-*.exp")) if p.stem not in set(names)]
    runs = sorted((load_measured(s) for s in sources), key=lambda r: float(r.label.rsplit("-", 1)[1]))
    return [(r, engine_for(_setup(), r, max_paddings=256), r.label in names) for r in runs]


def analyse(extra: Path | None, pool: int) -> dict:
    from kvledger.accounting.fitted_cost import LinearStepCost
    from kvledger.calibration.api import calibrate_runs
    from kvledger.calibration.replay import replay

    runs = _runs(extra)
    fitted = [(r, s.config) for r, s, bundled in runs if bundled]
    fit = calibrate_runs(fitted, runs[0][1].cost, leave_one_out=False, two_starts=True)["fit"]
    coef = fit.cost.coefficients()
    per_run, capped = [], []
    for r, s, bundled in runs:
        padded = s.config.max_paddings is not None
        meas = readoff(r.measured.records, coef, padded)
        sim_recs = replay(r, s.config, fit.cost).records.records
        sim = readoff(sim_recs, coef, padded)
        (mt, mp), (st, sp) = _means(r.measured.records), _means(sim_recs)
        per_run.append({"run": r.label, "fitted": bundled, "max_paddings": s.config.max_paddings,
                        "ttft_mean_rel_error": st / mt - 1, "tpot_mean_rel_error": sp / mp - 1,
                        "measured": _summary(meas), "replay": _summary(sim)})
        if s.config.max_paddings is not None:
            capped.append((r, s, meas, sim))
    pooled = np.vstack([c[2] for c in capped])
    fixed, per_seq = _line(pooled)
    replay_fixed, replay_per_seq = _line(np.vstack([c[3] for c in capped]))
    sims = np.vstack([c[3] for c in capped])
    bins = []
    for lo, hi in zip(BINS[:-1], BINS[1:]):
        k, j = (pooled[:, 0] >= lo) & (pooled[:, 0] < hi), (sims[:, 0] >= lo) & (sims[:, 0] < hi)
        if k.sum() and j.sum():
            bins.append({"b_from": lo, "b_to": hi, "requests": int(k.sum()), "measured_d_s": float(pooled[k, 1].mean()),
                         "priced_d_s": coef["fixed_s"] + coef["decode_seq_s"] * float(pooled[k, 0].mean()),
                         "replay_requests": int(j.sum()), "replay_d_s": float(sims[j, 1].mean()),
                         "replay_priced_d_s": coef["fixed_s"] + coef["decode_seq_s"] * float(sims[j, 0].mean())})
    read_cost = LinearStepCost.from_coefficients({**coef, "fixed_s": fixed, "decode_seq_s": per_seq}, name="read")
    what_if = []
    for r, s, *_ in capped:
        mt, mp = _means(r.measured.records)
        row = {"run": r.label}
        for tag, cfg in (("planned", s.config), ("pool", replace(s.config, num_gpu_blocks=pool))):
            st, sp = _means(replay(r, cfg, read_cost).records.records)
            row[tag] = {"blocks": cfg.num_gpu_blocks, "ttft_mean_rel_error": st / mt - 1,
                        "tpot_mean_rel_error": sp / mp - 1}
        what_if.append(row)
    return {"profile": coef, "objective": fit.objective, "runs": per_run,
            "capped_readoff": {"fixed_s": fixed, "per_decoding_request_s": per_seq, "requests": len(pooled),
                               "bins": bins, "replay_fixed_s": replay_fixed,
                               "replay_per_decoding_request_s": replay_per_seq}, "what_if_read_decode": what_if}


def _summary(x: np.ndarray) -> dict:
    fixed, per_seq = _line(x)
    return {"mean_decoding_requests": float(x[:, 0].mean()), "mean_decode_step_s": float(x[:, 1].mean()),
            "prompt_steps_per_decode_step": float(x[:, 2].mean()), "line_fixed_s": fixed,
            "line_per_decoding_request_s": per_seq}


def _print(d: dict) -> None:
    p = d["profile"]
    print(f"profile (regime start, five bundled runs; objective {d['objective']:.3f}): decode step "
          f"{p['fixed_s'] * 1e3:.1f} ms + {p['decode_seq_s'] * 1e3:.3f} ms per decoding request")
    print("run | TTFT / TPOT mean error | B measured / replay | decode step d, ms, measured / replay | "
          "prompt steps per decode step | line through the measured (B, d), ms")
    for r in d["runs"]:
        m, s = r["measured"], r["replay"]
        print(f"{r['run']}{'' if r['fitted'] else ' (not fitted)'}{' (uncapped)' if r['max_paddings'] is None else ''}"
              f" | {r['ttft_mean_rel_error']:+.0%} / {r['tpot_mean_rel_error']:+.0%} | "
              f"{m['mean_decoding_requests']:.1f} / {s['mean_decoding_requests']:.1f} | "
              f"{m['mean_decode_step_s'] * 1e3:.1f} / {s['mean_decode_step_s'] * 1e3:.1f} | "
              f"{m['prompt_steps_per_decode_step']:.3f} / {s['prompt_steps_per_decode_step']:.3f} | "
              f"{m['line_fixed_s'] * 1e3:.1f} + {m['line_per_decoding_request_s'] * 1e3:.2f}·B")
    c = d["capped_readoff"]
    print(f"runs obeying max_paddings 256, {c['requests']} requests: d = {c['fixed_s'] * 1e3:.1f} ms + "
          f"{c['per_decoding_request_s'] * 1e3:.3f} ms·B; their replays read the same way: "
          f"{c['replay_fixed_s'] * 1e3:.1f} ms + {c['replay_per_decoding_request_s'] * 1e3:.3f} ms·B")
    for b in c["bins"]:
        print(f"  B {b['b_from']}–{b['b_to']}: {b['requests']} requests, measured {b['measured_d_s'] * 1e3:.1f} ms "
              f"(priced at their B {b['priced_d_s'] * 1e3:.1f} ms); replay {b['replay_requests']} requests, read "
              f"{b['replay_d_s'] * 1e3:.1f} ms (priced {b['replay_priced_d_s'] * 1e3:.1f} ms)")
    print("decode priced as read (diagnosis): TTFT / TPOT mean error, planned pool | --pool")
    for r in d["what_if_read_decode"]:
        a, b = r["planned"], r["pool"]
        print(f"{r['run']} | {a['ttft_mean_rel_error']:+.0%} / {a['tpot_mean_rel_error']:+.0%} ({a['blocks']} blocks)"
              f" | {b['ttft_mean_rel_error']:+.0%} / {b['tpot_mean_rel_error']:+.0%} ({b['blocks']} blocks)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extra", type=Path, help="a folder of more DistServe vllm-*.exp runs (replayed, not fitted)")
    ap.add_argument("--pool", type=int, default=3350, help="KV blocks of the last table's second replay")
    ap.add_argument("--json", action="store_true")
    ns = ap.parse_args(argv)
    d = analyse(ns.extra, ns.pool)
    if ns.json:
        print(json.dumps(d, indent=1))
    else:
        _print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
