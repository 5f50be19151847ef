"""The error band of a figure priced by a model-scope calibration profile (``calibrate --scope model``), at least as
honest as a GPU profile's (``profile_band``).

The model-calibrated regime has no measured point of its own in ``error_bands.json`` today: ``error_band`` lends it
the GPU-calibrated regime's band (throughput: two RTX 4090 points under a t interval; latency: the cross-model
band), which that module itself calls "a floor, not a measurement". Printed as it stands it reads as an 80% band: on
kubecon's ``vllm+batch_size`` sweep priced by a profile fitted on kubecon's ``vllm`` stages 1, 3 and 5, 6 of its 8
latency figures fell outside bands of ±10% (the two-point band of the time).
So, per side, on the error e = predicted/measured − 1, the band is the widest of:

- the regime's band (``error_band``; its points and whether it is borrowed are said in the band's source; the GPU
  regime's latency band it borrows is the cross-model one, GPU profiles judged on models they were not fitted on);
- the profile's own **leave-one-out errors** (each of its runs priced by a fit on the others: held-out errors of this
  very profile, the nearest it has to its regime's own leave-one-deployment-out band); where the profile has none
  (fitted with ``--no-leave-one-out``, or on one run) and the regime's band is borrowed or rests on fewer than
  ``MIN_POINTS`` points, the **uncalibrated regime's** leave-one-deployment-out band of the same architecture and
  engine: nothing measured then says the fit does better than the plain roofline off its own runs;
- the uncalibrated band too when the profile's own fit is **poor** (``profile_band.fit_verdict``, the check
  ``calibrate`` prints for both scopes), as for a GPU profile;
- the profile's **in-sample errors** (each fitted run's error of the metric, and 0).

The band's ``num_runs`` is the most points any of these rests on, and its source says each, starting with how many
points the regime's band rests on and that it is a floor. A profile used on another model or TP, or beyond its fitted
range, widens further (``profile_band.at_least_uncalibrated``).
"""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.error_band import Band, error_band
from kvledger.ledgers.profile_band import MIN_POINTS, fit_verdict, judged_metrics

__all__ = ["model_profile_band"]


def _span(q10: float, q90: float) -> str:
    return f"{q10:+.1%} … {q90:+.1%}"


def _errors(rows: list[dict], metric: str, judged: dict[str, tuple[str, ...]]) -> list[float]:
    """The ``metric`` errors of ``rows`` (run facts, or leave-one-out rows keyed ``*_rel_error``) that their run is
    judged on (``judged``: label → metrics; a run not known is judged on all)."""
    out = []
    for r in rows:
        label = str(r.get("label") or r.get("run"))
        e = r.get(metric, r.get(f"{metric}_rel_error"))
        if isinstance(e, (int, float)) and metric in judged.get(label, (metric,)):
            out.append(float(e))
    return out


def model_profile_band(regime: str, metric: str, label: str, in_sample: list[dict],
                       leave_one_out: list[dict[str, Any]]) -> Band | None:
    """The band of ``metric`` for a figure priced by a model-scope profile (module docstring): ``label`` the profile
    in words, ``in_sample`` its runs' rows as calibrate writes them (``label``, ``saturated``, ``*_rel_error``),
    ``leave_one_out`` its held-out errors (``*_rel_error`` rows by ``run``)."""
    from kvledger.accounting.gpu_profile import run_facts

    in_sample = [run_facts(r) for r in in_sample]
    base = error_band(regime, metric)
    if base is None:
        return None
    (q10, q90), n = base.errors(), base.num_runs
    why = [f"regime {regime}: {_span(q10, q90)} from {n} measured point{'s' if n != 1 else ''}"
           + ("" if base.lent_from is None else f" of {base.lent_from}, lent to it")
           + (" (GPU profiles judged on models they were not fitted on)" if base.cross_model else "")
           + (f" — fewer than {MIN_POINTS}: a floor, not a measurement" if n < MIN_POINTS else "")]
    not_own = n < MIN_POINTS or base.lent_from is not None  # no measurement of this regime's own to stand on
    unc = error_band("uncalibrated/" + regime.split("/", 1)[1], metric)

    def take(lo: float, hi: float, points: int, what: str) -> None:
        nonlocal q10, q90, n
        wider = lo < q10 or hi > q90
        q10, q90, n = min(q10, lo), max(q90, hi), max(n, points)
        why.append(f"{what} {_span(lo, hi)}: " + (f"widened to {_span(q10, q90)}" if wider else "no wider"))

    judged = {str(r.get("label")): judged_metrics(r) for r in in_sample}
    loo = _errors(leave_one_out, metric, judged)
    if loo:  # held-out errors of this very profile: never a band narrower than them
        take(min(loo), max(loo), len(loo), f"the profile's own leave-one-out errors ({len(loo)} held-out runs)")
    elif not_own and unc is not None:
        u10, u90 = unc.errors()
        take(u10, u90, unc.num_runs, "no leave-one-out errors in the profile (fitted with --no-leave-one-out or on "
             f"one run), so the uncalibrated roofline's band ({unc.num_runs} measured points)")
        unc = None  # taken in already
    poor, bad, within, total = fit_verdict(in_sample)
    if poor:
        verdict = (f"the profile's own fit is poor ({within} of {total} runs within its limits in-sample; "
                   f"{'; '.join(bad[:2])}{'; …' if len(bad) > 2 else ''})")
        if unc is not None:
            u10, u90 = unc.errors()
            take(u10, u90, unc.num_runs, f"{verdict}, so the uncalibrated roofline's band")
        else:
            why.append(f"{verdict}: the uncalibrated roofline's band is in already")
    own = _errors(in_sample, metric, judged)
    if own and (min(own) < q10 or max(own) > q90):
        take(min(own), max(own), 0, "the fit's own in-sample errors")
    return Band(regime, metric, 1.0 / (1.0 + q90), 1.0 / (1.0 + q10), n, f"{label}: " + "; ".join(why))
