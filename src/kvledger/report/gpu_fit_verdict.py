"""The verdict of a GPU-scope fit against no profile at all (``calibrate --scope gpu``): the fit's objective beside the
same objective with every run priced as uncalibrated (``kvledger.calibration.gpu_fit.default_objective``), and, where
the fit does no better, the plain advice to keep the default."""

from __future__ import annotations

from typing import Any

from rich.console import Console

__all__ = ["default_verdict", "model_default_verdict", "ttft_alone_verdict", "NOT_RECOMMENDED"]

NOT_RECOMMENDED = ("not recommended: the uncalibrated default prices its own runs as well; keep the default "
                   "(--gpu-profile none)")


def default_verdict(p: dict[str, Any], con: Console) -> bool:
    """Print how the fit compares with the uncalibrated default on its own runs; False where the default does as well
    or better (the profile's ``fit_quality.beats_default``), True otherwise or where the profile does not say."""
    fit = p.get("fit") or {}
    d, f = fit.get("objective_default"), fit.get("objective")
    if not isinstance(d, (int, float)) or not isinstance(f, (int, float)):
        return True
    words = (f"objective {f:.4g} fitted against {d:.4g} with every run priced as with no profile (FLOP fraction 1.0 × "
             "the measured GEMM curve, or the flat 0.7; bandwidth 0.8; no host terms)")
    if (p.get("fit_quality") or {}).get("beats_default", True):
        con.print(f"against the uncalibrated default: {words}: the fit prices these runs better")
        return True
    con.print(f"[bold red]WARNING: the default prices these runs as well as this fit[/] — {words}: keep the default; "
              "this profile is not recommended (written with \"recommended\": false)")
    return False


def model_default_verdict(p: dict[str, Any], con: Console) -> None:
    """Print how a model-scope fit compares with the step cost it started from on its own runs (the profile's
    ``fit_quality.against_default``: ``kvledger.calibration.model_default``), each metric's mean |error| under both,
    and a warning naming each metric where the fit does worse."""
    a = (p.get("fit_quality") or {}).get("against_default")
    if not a:
        return
    start = (p.get("fit") or {}).get("start_model", "the default")
    words = "; ".join(f"{k} {v['fitted']:.1%} fitted, {v['default']:.1%} uncalibrated" for k, v in a["metrics"].items())
    n = len(a.get("runs") or [])
    con.print(f"against the uncalibrated default ({start}), mean |error| over the {n} run{'s' if n != 1 else ''} "
              f"fitted on: {words}" + ("" if a["worse"] else ": the fit prices these runs better"))
    if a["worse"]:
        con.print(f"[bold red]WARNING: the fit is worse than the uncalibrated default[/] on {', '.join(a['worse'])} "
                  "on its own runs: for those figures keep the default (simulate without --step-cost), or refit "
                  "(--fit-frontend where the client's latency is in TTFT)")


def ttft_alone_verdict(p: dict[str, Any], con: Console) -> bool:
    """Print why the fit is not recommended when TTFT alone set its FLOP fraction (the profile's
    ``fit_quality.flops_from_ttft_alone``, ``recommended_note``: ``kvledger.calibration.fit_identify``); False then,
    True otherwise."""
    if not (p.get("fit_quality") or {}).get("flops_from_ttft_alone"):
        return True
    con.print(f"[bold red]WARNING: not recommended[/] — {p.get('recommended_note', '')} (written with "
              "\"recommended\": false)")
    return False
