"""The error band of a figure priced by a GPU profile, honest for what is known about that profile.

The measured band of the GPU-calibrated regime (``error_band``) comes from the runs that regime has been checked
on — today two RTX 4090 runs of one model, each predicted from the other, for saturation throughput; its latency
bands are the cross-model band itself (``error_band._regimes``: those two runs are saturated, so they give no
latency point). Applied as it stands to a profile fitted on one model and used on another, a two-run band claims a
few % where the cross-model evidence shows tens of %. So the band widens, per side (on the error e =
predicted/measured − 1), to the widest of:

- the calibrated regime's band (``error_band``);
- the **cross-model band** (``error_bands.json`` → ``cross_model``, written by ``benchmarks/crossmodel_bands.py``
  from issue 23's must-hold count, docs/validation.md §2.4: every run priced by a GPU profile fitted on *other*
  models on its GPU), when the regime has fewer than ``MIN_POINTS`` measured points or the figure is for a model or
  TP the profile was not fitted on;
- the **uncalibrated band**, when the profile's own fit is poor (``fit_verdict``: fewer than ``MIN_WITHIN`` of its
  runs within ``FIT_LIMITS`` in-sample): such a profile does not describe its own runs, so what it says elsewhere is
  no better known than the plain roofline;
- the **uncalibrated band** for a latency figure when every run the profile was fitted on was saturated
  (``latency_unmeasured``): only their throughput constrained the fit; and for a saturation-throughput (capacity)
  figure when none of its runs is known to have been saturated (``capacity_unmeasured``): nothing measured its
  capacity (a run below saturation serves its offered load), and a run whose file does not say counts as not;
- the profile's **out-of-sample checks** (``ProfileFacts.checks``: runs of other models or TPs on its GPU priced by
  it, its file's ``out_of_sample``), for a figure of a model or TP it was not fitted on: never narrower than what it
  is known to miss by elsewhere on its GPU (the bundled RTX PRO 6000 profile, fitted on Llama-3.1-8B TP 1, carries
  Qwen3-32B TP 2's +7.6% throughput and −10.0% TPOT), the checks of the figure's own kernel family only (a row's
  ``moe`` flag: DeepSeek-V3.2-Exp-16L64E's +26% FP8 MoE throughput says nothing of a dense model's GEMMs; a row of an
  older file that does not say widens both);
- the profile's **in-sample errors** (each fitted run's error of the metric, and 0): never a band narrower than the
  fit's own residuals.

The calibrated regime's measured points are profiles used on the model they were fitted on (leaving a deployment of
it out): two RTX 4090 runs of one model today; a profile carried to another model is what the cross-model band and
the checks are for. The band's source names every piece that set it, and the GPUs the regime's points ran on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.ledgers.cross_model_words import cross_model, points_on, with_cross_model
from kvledger.ledgers.error_band import Band, error_band

__all__ = ["ProfileFacts", "profile_band", "poor_fit", "fit_verdict", "FIT_LIMITS", "MIN_POINTS", "MIN_WITHIN",
           "latency_unmeasured", "SATURATED_ONLY", "capacity_unmeasured", "capacity_words",
           "fit_quality", "rows_fit_quality", "at_least_uncalibrated", "judged_metrics"]

#: fewer measured points than this in the calibrated regime: its band alone is not enough (the split-conformal
#: rank of lodo_bands starts at 10 values; below it a t interval on 2 values is a guess at the spread)
MIN_POINTS = 10
#: in-sample error beyond which a GPU profile's fit is poor: issue 23's held-out targets (mean TTFT and TPOT within
#: 15% below saturation, throughput within 10% at saturation). A fit that misses on its own runs the target set for
#: runs it never saw cannot be expected to meet it on those
FIT_LIMITS = {"ttft_mean": 0.15, "tpot_mean": 0.15, "throughput": 0.10}
#: the share of fitted runs that must be within ``FIT_LIMITS`` in-sample: issue 23's 80% (one stage's tail that no
#: step time reproduces, as Llama-2-70B's 20 req/s TTFT, does not condemn a fit on fifteen)
MIN_WITHIN = 0.8


@dataclass(frozen=True)
class ProfileFacts:
    """What a band needs to know about the GPU profile that priced a figure.

    Attributes:
        label: the profile in words. fitted: (model, TP) of each fitted run. in_sample: per fitted run, metric →
            its in-sample error (None where the run does not state it), with "saturated" (bool) where known.
        checks: the same for runs of other models or TPs the profile priced but was not fitted on (its
            ``out_of_sample``): what it is known to miss by elsewhere on its GPU.
        gpu_id: the catalog id of the GPU the profile was fitted on (None: not in the catalog or not said).
    """

    label: str
    fitted: tuple[tuple[str, int], ...]
    in_sample: tuple[dict, ...]
    checks: tuple[dict, ...] = ()
    gpu_id: str | None = None


def _judged(r: dict) -> tuple[str, ...]:
    """The metrics a fitted run is judged on: mean TTFT and TPOT below saturation (the measured run's: a queue in the
    prediction alone is a real miss), throughput at saturation (below, it is the offered load); not said, all three."""
    sat = r.get("saturated")
    sat = "measured" in (sat.get("sides") or []) if isinstance(sat, dict) else sat  # as gpu_profile.run_facts
    return ("throughput",) if sat else ("ttft_mean", "tpot_mean") if sat is False else tuple(FIT_LIMITS)


judged_metrics = _judged  # the metrics a fitted run is judged on, public for model_band


def _checked(r: dict, metric: str) -> bool:
    """Whether an out-of-sample check's error of ``metric`` says how far the profile's step cost is off: the metrics
    it is judged on, and, past saturation, its TPOT too (the time between a request's tokens is the step time of the
    batches it ran in, which a replay at the run's own arrivals reproduces when the step cost is right; its TTFT is
    the queue's)."""
    return metric in _judged(r) or (metric == "tpot_mean" and r.get("saturated") is True)


def poor_fit(in_sample: tuple[dict, ...] | list[dict]) -> list[str]:
    """The in-sample errors beyond ``FIT_LIMITS``, in words (empty: the fit holds its own runs; ``_judged``)."""
    out = []
    for r in in_sample:
        for m in _judged(r):
            e = r.get(m)
            if isinstance(e, (int, float)) and abs(e) > FIT_LIMITS[m]:
                out.append(f"{r.get('label') or r.get('model')}: {m.replace('_', ' ')} {e:+.1%} "
                           f"(limit ±{FIT_LIMITS[m]:.0%})")
    return out


#: why a profile fitted on saturated runs alone says nothing measured about latency below saturation
SATURATED_ONLY = ("every run the profile was fitted on was saturated: only their throughput constrained it, and "
                  "its latency below saturation is not measured")


def latency_unmeasured(in_sample: tuple[dict, ...] | list[dict]) -> bool:
    """Whether every fitted run states that it was saturated: the fit then saw throughput alone (``_judged``), so a
    latency figure below saturation is no better known than the plain roofline's (``SATURATED_ONLY``)."""
    return bool(in_sample) and all(r.get("saturated") is True for r in in_sample)


def capacity_unmeasured(in_sample: tuple[dict, ...] | list[dict]) -> bool:
    """Whether none of the profile's runs states that it was saturated: a run below saturation serves its offered
    load, so nothing measured its capacity (``capacity_words``). A run that does not say (null or missing, as in files
    written before calibrate recorded "not saturated" as false) counts as not measuring it."""
    return not any(r.get("saturated") is True for r in in_sample)


def capacity_words(in_sample: tuple[dict, ...] | list[dict]) -> str:
    """Why ``capacity_unmeasured``, in words: no run, none saturated, or how many runs do not say."""
    unknown = sum(r.get("saturated") is None for r in in_sample)
    said = ("the profile lists no runs" if not in_sample else "none of the profile's runs was saturated"
            if not unknown else f"none of the profile's runs is known to have been saturated ({unknown} of "
            f"{len(in_sample)} do not say whether they were: counted as not)")
    return f"{said}: nothing measured its capacity (saturation throughput)"


def fit_verdict(in_sample: tuple[dict, ...] | list[dict]) -> tuple[bool, list[str], int, int]:
    """(poor, the errors beyond ``FIT_LIMITS`` in words, runs within, runs): poor when fewer than ``MIN_WITHIN`` of
    the runs that state an error are within on every metric they are judged on (``_judged``)."""
    beyond = poor_fit(in_sample)
    stated = [r for r in in_sample if any(isinstance(r.get(m), (int, float)) for m in _judged(r))]
    within = sum(not poor_fit([r]) for r in stated)
    return bool(stated) and within < MIN_WITHIN * len(stated), beyond, within, len(stated)


def _launch_hints(given: dict[str, Any], recorded: dict[str, tuple[Any, str]], files: str = "stage") -> list[str]:
    """The launch-flag hints of a poor fit: a flag neither given nor stated by the runs' records (``recorded``: key →
    (value, the record file)), or a given one that differs from what a record states, both values said; ``files``:
    what the runs are, "stage" (a client's stage files) or "run" (per-request runs)."""
    out = []
    for key, flag, why in (("max_model_len", "--max-model-len", "it sets vLLM's default token budget"),
                           ("engine_version", "--engine-version", "vLLM's rules and defaults change by version; a "
                            "V0 engine also needs --batching vllm_v0")):
        mine, (rec, where) = given.get(key), recorded.get(key, (None, None))
        if mine is None and rec is None:
            out.append(f"{flag} as the server was launched ({why}): neither the {files} files nor a launch record "
                       "beside them state it")
        elif mine is not None and rec is not None and str(mine) != str(rec):
            out.append(f"{flag} as launched: {mine} was given, the runs' record ({where}) states {rec} ({why})")
    return out


def fit_quality(in_sample: list[dict], client_timed: bool, fit_frontend: bool,
                given: dict[str, Any] | None = None, scope: str = "gpu",
                recorded: dict[str, tuple[Any, str]] | None = None) -> dict:
    """Whether the fit holds its own runs (``fit_verdict``: fewer than 80% of them within the held-out targets
    in-sample, mean TTFT/TPOT 15%, throughput 10%), the errors beyond, and, for a poor fit of runs timed at a client
    (inference-perf stages), what to try: only launch flags neither given (``given``: ``max_model_len``,
    ``engine_version`` as the user passed them or the runs' records state them, None where not) nor stated by the
    runs' own records (``recorded``: key → (value, file), which the replay applied), or a given one that differs from
    the recorded value, both said. A poor profile still prices, but its band widens to the uncalibrated one
    (``profile_band``; a model-scope profile's too, ``model_band``). ``in_sample``: ``GpuProfile.runs``-shaped
    (``gpu_profile.run_facts``); ``scope``: "gpu" or "model", the profile the verdict is written for."""
    poor, beyond, within, total = fit_verdict(in_sample)
    hints = []
    if poor and client_timed:
        hints = [] if fit_frontend else ["--fit-frontend: the client's HTTP, tokenisation and streaming time is in "
                                         "every measured TTFT; without it the "
                                         + ("fractions absorb it" if scope == "gpu" else "step cost's terms absorb it")]
        hints += _launch_hints(given or {}, recorded or {})
    elif poor:  # per-request runs: the engine they were replayed on is what their launch record states, or defaults
        hints = _launch_hints(given or {}, recorded or {}, "run")
        if any((given or {}).get(k) is None for k in ("max_num_seqs", "max_num_batched_tokens")):
            hints.append("--max-num-seqs and --max-num-batched-tokens as launched: no flag and no launch record beside "
                         "the runs (an LLMServingSim run's meta.json) states them, so the replay used the engine's "
                         "defaults, which bound the requests running together and the tokens per step")
    return {"poor": poor, "limits": dict(FIT_LIMITS), "min_share_within": MIN_WITHIN, "runs_within": within,
            "runs": total, "beyond": beyond, "hints": hints,
            "latency_unmeasured": latency_unmeasured(in_sample),
            "capacity_unmeasured": scope == "gpu" and capacity_unmeasured(in_sample),  # profile_band's rule
            "why": "a fit that misses on its own runs the targets set for runs it never saw (mean TTFT and TPOT "
                   f"within 15%, throughput within 10%, on {MIN_WITHIN:.0%} of runs) cannot be expected to meet "
                   + ("them on other models; its bands widen to the uncalibrated roofline's "
                      "(kvledger.ledgers.profile_band)" if scope == "gpu" else
                      "them on runs it was not fitted on; its bands widen to take in the uncalibrated roofline's "
                      "(kvledger.ledgers.model_band)")}


def rows_fit_quality(rows: list[dict], client_timed: bool, fit_frontend: bool, given: dict[str, Any] | None = None,
                     scope: str = "gpu", recorded: dict[str, tuple[Any, str]] | None = None) -> dict:
    """``fit_quality`` of a profile's ``runs`` rows as calibrate writes them (``*_rel_error`` keys, ``saturated``):
    the one check both scopes run (``calibrate_gpu_files``, ``calibrate_files``)."""
    from kvledger.accounting.gpu_profile import run_facts

    return fit_quality([run_facts(r) for r in rows], client_timed, fit_frontend, given, scope, recorded)


def _uncalibrated(regime: str, metric: str, facts: ProfileFacts, q: tuple[float, float],
                  why: list[str]) -> tuple[float, float, Band | None]:
    """(q10, q90, the uncalibrated band or None): ``q`` widened, each side, to take in the uncalibrated band where the
    profile's fit is poor or its runs did not measure ``metric`` (latency: saturated only; capacity: none saturated),
    the reason appended to ``why``."""
    q10, q90 = q
    poor, bad, within, total = fit_verdict(facts.in_sample)
    blind = (capacity_unmeasured if metric == "throughput" else latency_unmeasured)(facts.in_sample)
    unc = error_band(regime.replace("gpu/", "uncalibrated/", 1), metric) if poor or blind else None
    if unc is None:
        return q10, q90, None
    u10, u90 = unc.errors()
    wider = u10 < q10 or u90 > q90
    q10, q90 = min(q10, u10), max(q90, u90)
    reason = (f"the profile's own fit is poor ({within} of {total} runs within ±15% in-sample; "
              f"{'; '.join(bad[:3])}{'; …' if len(bad) > 3 else ''})" if poor else
              capacity_words(facts.in_sample) if metric == "throughput" else SATURATED_ONLY)
    why.append(f"{reason}, so " + (f"widened, each side, to take in the uncalibrated band {u10:+.1%} … {u90:+.1%}: "
                                   f"{q10:+.1%} … {q90:+.1%}" if wider else
                                   f"no narrower than the uncalibrated band {u10:+.1%} … {u90:+.1%}"))
    return q10, q90, unc


def profile_band(regime: str, metric: str, facts: ProfileFacts | None, model: str | None = None,
                 tp: int | None = None) -> Band | None:
    """The honest band of ``metric`` for a figure of ``model`` at ``tp`` priced by the profile ``facts`` describes
    (module docstring); ``error_band``'s when ``facts`` is None or the regime is not GPU-calibrated."""
    base = error_band(regime, metric)
    if facts is None or not regime.startswith("gpu/") or base is None:
        return base
    (q10, q90), n = base.errors(), base.num_runs
    lent = f" (none of its own: {base.lent_from}'s)" if base.lent_from else ""
    other = model is not None and not any(m == model and (tp is None or t == tp) for m, t in facts.fitted)
    few = base.num_runs < MIN_POINTS
    cm = cross_model(metric) if (few or other) and not base.cross_model else None  # the base is it already
    # the points' GPUs said of the band used: "none measured on" the profile's GPU only where no point behind it was
    on = points_on(base, facts.gpu_id if cm is None or facts.gpu_id not in cm[4] else None)
    head = f"calibrated regime {regime}{lent}"
    said = f"{q10:+.1%} … {q90:+.1%} from {n} measured points{on}" if not base.cross_model else \
        f"{base.source}: {q10:+.1%} … {q90:+.1%}"
    why = [f"{head}: {said}"] if cm is None else with_cross_model(head, said, cm, (q10, q90), [
        f"fewer than {MIN_POINTS} calibrated points"] * few + ([f"{model} TP {tp} is not what the profile was fitted "
                                                                 "on"] if other else []))
    if cm is not None:
        q10, q90, n = min(q10, cm[0]), max(q90, cm[1]), max(n, cm[2])
    q10, q90, unc = _uncalibrated(regime, metric, facts, (q10, q90), why)
    moe = regime.split("/")[1] == "moe"
    seen = [(e, f"{r.get('model')} TP {r.get('tp')}") for r in facts.checks if other and _checked(r, metric)
            and r.get("moe") in (None, moe) and isinstance(e := r.get(metric), (int, float))]
    if seen and (min(e for e, _ in seen) < q10 or max(e for e, _ in seen) > q90):
        q10, q90 = min(q10, *(e for e, _ in seen)), max(q90, *(e for e, _ in seen))
        why.append("no narrower than its errors on the models and TPs it was checked on but not fitted on ("
                   + ", ".join(f"{w}: {e:+.1%}" for e, w in seen) + f"): {q10:+.1%} … {q90:+.1%}")
    own = [e for r in facts.in_sample if metric in _judged(r) and isinstance(e := r.get(metric), (int, float))]
    if own and (min(own) < q10 or max(own) > q90):
        q10, q90 = min(q10, *own), max(q90, *own)
        why.append(f"no narrower than the fit's own in-sample errors {min(own):+.1%} … {max(own):+.1%}")
    src = f"{facts.label}: " + "; ".join(why)
    # the GPUs behind it: the lent bands' where its runs and checks measured nothing of it (Band.on_gpu), else unknown
    gpus = set(base.gpu_ids) | set(unc.gpu_ids if unc is not None else ()) | set(cm[4] if cm is not None else ())
    return Band(regime, metric, 1.0 / (1.0 + q90), 1.0 / (1.0 + q10), n, src,
                gpu_ids=tuple(sorted(gpus)) if not own and not seen and base.gpu_ids else ())


def at_least_uncalibrated(band: Band | None, regime: str, metric: str, reasons: list[str]) -> Band | None:
    """``band`` widened, per side, to at least the uncalibrated regime's band of the same architecture and engine,
    for a figure priced by a model-scope profile used where it says nothing measured (``reasons``: another model or
    TP, a workload beyond its fitted range; ``analyses/serving/profile_scope.py``): there its step cost is no better
    known than the plain roofline's, as for a GPU profile whose fit is poor (``profile_band``)."""
    unc = error_band("uncalibrated/" + regime.split("/", 1)[1], metric)
    if unc is None or not reasons:
        return band
    if band is None:
        return Band(regime, metric, unc.low, unc.high, unc.num_runs,
                    f"uncalibrated roofline's band, the profile being {'; '.join(reasons)}: {unc.source}")
    low, high = min(band.low, unc.low), max(band.high, unc.high)
    u10, u90 = unc.errors()
    src = (f"{band.source}; widened to at least the uncalibrated band {u10:+.1%} … {u90:+.1%} ({unc.num_runs} "
           f"measured points): the profile was {'; '.join(reasons)}")
    return Band(regime, metric, low, high, max(band.num_runs, unc.num_runs), src)
