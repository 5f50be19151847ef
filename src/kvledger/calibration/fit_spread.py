"""How firm each fitted constant is, as a profile records it beside the constant: the range (min–max) it took over the
leave-one-out folds (each fitted without one run: ``fold_range``), whether it sits at a bound of its search
(``at_bound``: the data would push it past, so the value is the bound's, not the data's), and, for a model-scope fit,
which coefficients ended at their start value (``held_at_start``: the runs given did not move them, so they are the
start model's, not fitted). ``spread_lines`` says them in calibrate's text."""

from __future__ import annotations

from typing import Any

__all__ = ["gpu_spread", "model_spread", "spread_lines"]

#: the GPU fit's constants, in the profile's words
_GPU_KEYS = {"flops_fraction": "FLOP/s fraction", "bandwidth_fraction": "bandwidth fraction",
             "frontend_s": "front-end latency (fit.frontend_s)", "allreduce_link_share": "all-reduce link share"}


def _ranges(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, list[float]]:
    """Per key, [min, max] of the numbers the rows give it (keys no row gives a number are left out)."""
    out = {}
    for k in keys:
        vals = [float(r[k]) for r in rows if isinstance(r.get(k), (int, float)) and not isinstance(r.get(k), bool)]
        if vals:
            out[k] = [min(vals), max(vals)]
    return out


def gpu_spread(prof: dict[str, Any], fit_frontend: bool) -> dict[str, Any]:
    """``fold_range`` (over ``prof["leave_one_out"]``'s folds; {} without) and ``at_bound`` (constant → "upper" or
    "lower") of a GPU profile: a fraction at 1.0 (the search's cap; a FLOP fraction no step saw is the default's, not
    a bound's), a fitted front-end latency at 0 or at ``gpu_fit.FRONTEND_MAX_S``, a link share at ``SHARE_RANGE``'s."""
    from kvledger.calibration.gpu_fit import FRONTEND_MAX_S
    from kvledger.calibration.link_fit import SHARE_RANGE

    fit = prof["fit"]
    keys = ["flops_fraction", "bandwidth_fraction"] + (["frontend_s"] if fit_frontend else []) + \
        (["allreduce_link_share"] if prof.get("allreduce_link_share") is not None and not fit.get(
            "allreduce_link_share_given") else [])
    bounds = {"flops_fraction": (None, 1.0), "bandwidth_fraction": (None, 1.0), "frontend_s": (0.0, FRONTEND_MAX_S),
              "allreduce_link_share": SHARE_RANGE}
    values = {k: fit["frontend_s"] if k == "frontend_s" else prof[k] for k in keys}
    at = {}
    for k, v in values.items():
        lo, hi = bounds[k]
        if k == "flops_fraction" and fit.get("flops_seen") is False:
            continue
        if hi is not None and v >= hi * (1 - 1e-9):
            at[k] = "upper"
        elif lo is not None and v <= lo + 1e-12:
            at[k] = "lower"
    return {"fold_range": _ranges(prof.get("leave_one_out") or [], keys), "at_bound": at,
            "bounds": {k: list(bounds[k]) for k in at}}


def model_spread(prof: dict[str, Any]) -> dict[str, Any]:
    """A model-scope profile's ``fold_range`` (each coefficient over the leave-one-out folds' ``step_cost``),
    ``held_at_start`` (coefficients whose fitted value is exactly the start's, a start above 0: no run moved them) and
    ``at_bound`` (a coefficient the fit drove from a positive start to 0, the lower bound: "lower")."""
    sc, start = prof["step_cost"], prof["fit"].get("initial") or {}
    keys = [k for k, v in start.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    folds = [f.get("step_cost") or {} for f in prof.get("leave_one_out") or []]
    held = [k for k in keys if start[k] > 0 and sc.get(k) == start[k]]
    low = {k: "lower" for k in keys if start[k] > 0 and sc.get(k) == 0}
    return {"fold_range": _ranges(folds, keys), "held_at_start": held, "at_bound": low,
            "bounds": {k: [0.0, None] for k in low}}


def _num(k: str, v: float) -> str:
    return f"{v * 1e3:.4g} ms" if k == "frontend_s" else f"{v:.3f}" if k in _GPU_KEYS else f"{v:.4g}"


def spread_lines(prof: dict[str, Any]) -> list[str]:
    """Calibrate's lines on the fitted constants' firmness (``prof["fit"]["spread"]``: ``gpu_spread`` or
    ``model_spread``); none when the profile has no such record."""
    sp = (prof.get("fit") or {}).get("spread")
    if not sp:
        return []
    gpu = prof.get("kind") == "kvledger-gpu-profile"
    name = (lambda k: _GPU_KEYS.get(k, k)) if gpu else (lambda k: k)
    out = []
    if sp.get("fold_range"):
        n = len(prof.get("leave_one_out") or [])
        spans = "; ".join(f"{name(k)} {_num(k, lo)}–{_num(k, hi)}" for k, (lo, hi) in sp["fold_range"].items())
        out.append(f"each constant over the {n} leave-one-out folds (fitted without one run each; min–max): {spans}")
    for k, side in sp.get("at_bound", {}).items():
        v = prof["fit"]["frontend_s"] if k == "frontend_s" else prof[k] if gpu else prof["step_cost"][k]
        b = sp["bounds"][k][1 if side == "upper" else 0]
        out.append(f"{name(k)} {_num(k, v)} is at its {side} bound ({_num(k, b)}, a limit of the search): the data "
                   f"would push {'past' if side == 'upper' else 'below'} it, so the value is the bound's, not the "
                   "data's")
    if sp.get("held_at_start"):
        out.append("held at their start value, not fitted (the runs given do not identify them: no step of the fit "
                   "moved them): " + ", ".join(f"{k} {prof['step_cost'][k]:.4g}" for k in sp["held_at_start"]))
    return out
