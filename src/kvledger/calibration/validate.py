"""``kvledger validate``'s work: replay measured runs (or a load sweep) with the user's engine and step cost, compare,
and find the knee of a sweep on both sides.

The knee of a sweep is the request rate where mean TTFT first exceeds ``KNEE_FACTOR`` × the measured mean TTFT at
the sweep's lowest rate, interpolated linearly between the two stages around it (the same threshold on the measured
and the simulated side, so they can be compared); None when no stage passes it. Files that state no mean TTFT
(SGLang's ``bench_serving`` keeps medians) set it on the median, on both sides.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.gpu_source import with_record_gpu
from kvledger.calibration.in_sample import fitted_data, fitted_digests, fitted_on, profile_words, run_in_sample
from kvledger.calibration.knee_growth import at_knee
from kvledger.calibration.replay import replay
from kvledger.calibration.saturation import compared_saturation
from kvledger.calibration.stage_launch import sent_at_inf
from kvledger.calibration.stage_notes import stage_goodput_note
from kvledger.calibration.stated_duration import compare_timed
from kvledger.calibration.sweep import stage_comparison
from kvledger.calibration.sweep_bands import run_bands, sweep_bands
from kvledger.calibration.sweep_notes import sweep_notes
from kvledger.calibration.targets import (
    Target,
    check_sweep,
    input_names,
    load_targets,
    pick_run,
    placed,
    with_record_model,
)
from kvledger.calibration.validation_types import LATENCY_COLUMNS, RunValidation, SweepSide, SweepValidation
from kvledger.errors import InputError, KvLedgerError
from kvledger.evidence.deployment import refuse_mixed_sweep
from kvledger.ledgers.slo import SLO
from kvledger.records import WARNING_PREFIX

__all__ = ["RunValidation", "SweepSide", "SweepValidation", "validate_file", "validate_sweep", "knee_rate",
           "KNEE_FACTOR", "LATENCY_COLUMNS", "fitted_on", "stated_rate"]

#: the knee: mean TTFT passes this many times its value at the sweep's lowest rate
KNEE_FACTOR = 5.0
def stated_rate(t: Any) -> float | None:
    """The request rate the run states, req/s: a stage's requested rate, else the file's own (vLLM's request_rate); None
    when it states none or sent as fast as it could (inf: the JSON's number would not be strict)."""
    if t.stage is not None:
        return t.stage.requested_rate
    meta = t.run.measured.metadata if t.run.measured is not None else None
    rate = meta.request_rate if meta is not None else None
    return rate if rate is not None and math.isfinite(rate) else None


def knee_rate(rates: list[float], ttft_means: list[float | None], threshold: float) -> float | None:
    """The rate where mean TTFT first exceeds ``threshold``, linear between the stages around it; None if none does.

    >>> knee_rate([1.0, 2.0, 3.0], [0.1, 0.2, 1.2], 0.5)
    2.3
    """
    pts = [(r, t) for r, t in zip(rates, ttft_means) if t is not None]
    for i, (r, t) in enumerate(pts):
        if t > threshold:
            if i == 0:
                return r
            r0, t0 = pts[i - 1]
            return round(r0 + (threshold - t0) / (t - t0) * (r - r0), 12)
    return None


def _record_setup(t: Target, args: SimRequestArgs, max_paddings: int | None) -> tuple[Any, SimRequestArgs,
                                                                                     str | None, str | None]:
    """The replay's setup with the model and GPU the run's record names where no flag did (``with_record_model``,
    ``with_record_gpu``), the args so completed and the notes saying where each came from."""
    from kvledger.calibration.api import engine_for

    given = bool(args.model)
    args, model_note = with_record_model(t, args)
    args, gpu_note = with_record_gpu(t, args)
    try:
        return engine_for(args, t.run, max_paddings), args, model_note, gpu_note
    except KvLedgerError as err:  # a name the record gave that the replay cannot take: say where the name came from
        from kvledger.calibration.record_refusal import record_refusal

        said = record_refusal(err, t.run.source, None if given else args.model, args.gpu, model_note, gpu_note)
        if said is None:  # another flag's error: as it stands
            raise
        raise said from None


def _compare_one(t: Target, args: SimRequestArgs, slo: SLO | None, max_paddings: int | None) -> RunValidation:
    from kvledger.analyses.serving.prediction_bands import setup_band, setup_regime
    from kvledger.calibration.api import headline_errors
    from kvledger.calibration.profile_frontend import with_profile_frontend
    from kvledger.ledgers.band_members import band_member
    from kvledger.ledgers.error_band import METRICS

    setup, args, model_note, gpu_note = _record_setup(t, args, max_paddings)
    in_sample = run_in_sample(t.run.source, fitted_data(setup.cost_info),  # by path, or a copy by its content
                              fitted_digests(getattr(setup, "gpu_profile", None) or setup.cost_info))
    setup, frontend, frontend_note = with_profile_frontend(setup, args, t.run.source, in_sample)  # the fit's own
    records = _client_records(replay(t.run, setup.config, setup.cost), setup)
    if t.stage is not None:
        c = stage_comparison(t.run.label, t.stage, records, t.run, setup.config.enable_prefix_caching)
        if slo is not None:  # no joint figure from marginal quantiles: say so, with the file that would give one
            c = replace(c, slo=slo.to_dict(), notes=[*c.notes, stage_goodput_note(t.stage.path, slo.describe())])
    else:
        c = compare_timed(t.run.label, t.run.measured, records, slo)  # a stated duration of 0: its timestamps'
    notes = [f"WARNING: {w}" for w in setup.cost_info.get("warnings") or ()  # the profile's, as simulate's, but
             if not (setup.cost_info.get("mismatch") and " was fitted on another " in w)]  # that one: said below
    said = getattr(getattr(t.run.measured, "metadata", None), "definitions", ())  # the reader's, as goodput's
    notes += [f"WARNING: {d.removeprefix(WARNING_PREFIX)}" for d in said if d.startswith(WARNING_PREFIX)]
    notes += [n for n in (model_note, gpu_note, setup.cost_info.get("engine_mismatch")) if n] + [*setup.notes, *c.notes]
    sat = compared_saturation(t.run, t.stage, records)  # a stage's measured side on its rates, as calibrate's rows
    knee = at_knee(t.run.measured if t.stage is None else None, records, t.stage)
    scope = setup.cost_info.get("scope", "uncalibrated")
    bands = {m: setup_band(setup, m, lambda src: bool(src) and fitted_on(t.run.source, [src])) for m in METRICS}
    notes[:0] = [frontend_note] if frontend_note else []
    if in_sample:
        notes.append(f"IN-SAMPLE: the {profile_words(scope)} pricing this run was fitted on this very run, so these "
                     "errors are the fit's, not a prediction's; for an out-of-sample check pass "
                     + ("--gpu-profile none" if scope == "gpu" else "--step-cost roofline")
                     + " or a profile fitted on other runs")
    member = band_member(t.run.source) if any(bands.values()) else None
    if member:
        notes.append(_band_member_note(member, setup_regime(setup)))
    if setup.cost_info.get("mismatch"):
        what = setup.cost_info.get("mismatch_what", "model or TP")
        notes.insert(0, f"WARNING: a model-scope calibration of {setup.cost_info['mismatch']} priced this run of "
                        f"{setup.model_name} at TP {setup.tp}: its step times do not carry to another {what} (no "
                        "error band: none was measured so); calibrate the GPU instead (kvledger calibrate --scope gpu)")
    return RunValidation(t.run.label, t.run.source, len(t.run.requests), t.run.num_dropped, setup.model_name,
                         setup.gpu_name, setup.tp, scope, setup.cost_info, setup.config,
                         stated_rate(t), c, headline_errors(c), sat, notes,
                         in_sample, setup.client_latency, bands, at_knee=knee, band_member=member,
                         profile_frontend=frontend)


def _band_member_note(member: str, regime: str) -> str:
    """Says that this run's file is one of the points behind the stored bands (``ledgers.band_members``), and how the
    bands covered the points of their regime when each deployment was left out."""
    from kvledger.ledgers.band_members import held_out_coverage

    words = {"ttft_mean": "mean-TTFT", "tpot_mean": "mean-TPOT", "throughput": "saturation-throughput"}
    cov = held_out_coverage(regime)
    held = ", ".join(f"{c} of {n} {words.get(m, m)}" for m, (c, n) in cov.items())
    return (f"bands in sample: this run's file is one of those the stored bands were built from (deployment "
            f"{member}): the errors of its deployment (a stage below saturation its TTFT and TPOT, a sweep or "
            "saturated run its saturation throughput) helped set them, so its band is not held out"
            + (f"; built leaving each deployment out, the {regime} bands covered {held} points" if held else ""))


def _client_records(res: Any, setup: Any) -> Any:
    """The replay's records with the user's --client-latency added to every TTFT and E2E (on top of a model-scope
    profile's own fitted ``frontend_s``, which ``replay`` adds)."""
    if setup.client_latency is None:
        return res.records
    own = float(getattr(setup.cost, "frontend_s", 0.0) or 0.0)
    if own > 0:
        raise InputError(f"--client-latency: the profile pricing this run already adds its own fitted front-end "
                         f"latency ({own * 1e3:.4g} ms) to every TTFT and E2E; the two would be counted twice: drop "
                         "--client-latency, or price the run with a GPU profile (which adds none)")
    from kvledger.analyses.serving.client_latency import with_client_latency

    return with_client_latency(res, setup.client_latency.seconds).records


def validate_file(path: str, args: SimRequestArgs, slo: SLO | None = None, max_paddings: int | None = None, *,
                  client_concurrency: int | None = None, seed: int = 0, run: int | None = None
                  ) -> RunValidation | SweepValidation:
    """Replay the measured run in ``path`` with ``args``' engine and step cost and compare (``Comparison``'s rows),
    with the 80% bands of its regime on the figures it is judged on (``run_bands``).

    A stage or aggregate run is compared on its aggregates, replaying a synthetic workload like it
    (``kvledger.calibration.sweep``; a closed loop of ``client_concurrency`` users when the client fell behind the
    requested rate); goodput is then not compared. A file holding several aggregate runs (a sweep over rates) is
    validated as a sweep (``validate_sweep``)."""
    targets = pick_run(load_targets(path, seed=seed, client_concurrency=client_concurrency), path, run)
    if len(targets) > 1:
        return validate_sweep([path], args, max_paddings, client_concurrency=client_concurrency, seed=seed)
    one = _compare_one(targets[0], args, slo, max_paddings)  # (``run`` is the --run number)
    return replace(one, error_bands=run_bands(one, targets[0].stage))


def validate_sweep(paths: list[str], args: SimRequestArgs, max_paddings: int | None = None, *,
                   client_concurrency: int | None = None, seed: int = 0) -> SweepValidation:
    """Validate every stage of a load sweep (stage files, or aggregate runs at several rates) and report the measured
    and simulated knee (module docstring) and the saturation throughput (the largest over the stages) of each side,
    with the 80% error bands of the simulated figures (``sweep_bands``). A sweep of closed loops (runs at
    request_rate inf under client caps: ``vllm bench serve --max-concurrency 1,2,4,…``) is read on its clients
    instead: the knee where mean TTFT passes the same threshold, interpolated in clients (``SweepValidation.clients``).

    Raises:
        InputError: fewer than two stages, or closed-loop stages mixed with rated ones (``check_sweep``).
    """
    names = input_names(paths)
    # every file draws with the seed itself (its own stages with seed + their index): a file replays as it does
    # alone, whatever its place on the command line, and the levels share their random numbers
    targets = placed([t for i, p in enumerate(paths)  # a per-request run placed by its own rate (record_stage)
                      for t in load_targets(p, seed=seed, client_concurrency=client_concurrency, name=names[i])])
    stages = [t for t in targets if t.placed is not None]
    check_sweep(paths, stages, len(targets), [t for t in targets if t.placed is None])
    timed = [t.run.measured for t in stages if t.stage is None]  # per-request runs, each placed by its own rate
    if len(timed) > 1:
        refuse_mixed_sweep(timed, "--sweep reads a knee and a saturation throughput")
    one_rate = {t.placed.requested_rate for t in stages}  # one rate under several caps: a sweep over the caps
    closed = sent_at_inf(stages[0].placed) or (len(one_rate) == 1 and all(
        t.placed.client_users for t in stages))  # check_sweep: all stages closed loops, or none

    def level(t: Target) -> float:
        return t.placed.client_users if closed else t.placed.requested_rate

    stages.sort(key=level)
    _distinct([level(t) for t in stages], "clients" if closed else "req/s")
    mixed = _deployments(stages)
    rows = [_compare_one(t, args, None, max_paddings) for t in stages]
    rates = [level(t) for t in stages]

    def values(key: str, metric: str) -> list[float | None]:
        return [next((getattr(x, key) for x in r.comparison.rows if x.metric == metric), None) for r in rows]

    metric, stat = ("TTFT mean", "mean") if values("measured", "TTFT mean")[0] is not None else ("TTFT p50", "median")
    first = values("measured", metric)[0]
    threshold = None if first is None else KNEE_FACTOR * first

    def side(key: str) -> SweepSide:
        ttft, thr = values(key, metric), values(key, "throughput")
        knee = None if threshold is None else knee_rate(rates, ttft, threshold)
        return SweepSide(None if closed else knee, threshold, values(key, "TTFT mean"),
                         max((x for x in thr if x is not None), default=None), values(key, "TTFT p50"),
                         knee if closed else None)

    predicted = side("predicted")
    lowest = "the fewest clients" if closed else "the lowest rate"
    rule = (f"{stat} TTFT > {KNEE_FACTOR:g} × the measured {stat} TTFT at {lowest}, interpolated"
            + ("" if stat == "mean" else "; the files state no mean TTFT")) if first is not None else \
        f"none read: the files state no TTFT at {lowest}"
    return SweepValidation([] if closed else rates, side("measured"), predicted, rule,
                           rows, mixed + sweep_notes(rows, rates, closed),
                           sweep_bands(rows, [t.placed for t in stages], predicted.saturation_throughput_req_per_s),
                           [int(x) for x in rates] if closed else None)


def _distinct(levels: list[float], unit: str) -> None:
    """Refuse a sweep two of whose stages sit at one level: its knee and its table need one stage per level.

    Raises:
        InputError: the repeated levels, and what to do instead.
    """
    repeated = sorted({x for x in levels if levels.count(x) > 1})
    if repeated:
        raise InputError(f"--sweep needs one stage per level; {', '.join(f'{x:g}' for x in repeated)} {unit} "
                         "appear more than once (repeated runs of one load, or different deployments): validate them "
                         "apart, or give one stage per level")


def _deployments(stages: list[Any]) -> list[str]:
    """A sweep is one deployment's stages: refuse stages whose launch records (a manifests.yaml, a launch record)
    differ; a warning note when they come from different folders without one (aggregate runs may be kept apart)."""
    from pathlib import Path

    from kvledger.evidence.deployment import launch_record

    def record(t: Any) -> str | None:  # the launch record, or the settings of a record each file carries (server_info)
        return launch_record(t.run.measured.metadata if t.run.measured is not None else None)

    def level(t: Any) -> str:
        return f"{t.placed.client_users:,} clients" if sent_at_inf(t.placed) else f"{t.placed.requested_rate:g} req/s"

    recs = {r: [level(t) for t in stages if record(t) == r] for r in {record(t) for t in stages}}
    if len(recs) > 1 and None not in recs:
        raise InputError("--sweep compares the load stages of one deployment; these were launched by different "
                         "records: " + "; ".join(f"{r} (stages at {', '.join(levels)})"
                                                 for r, levels in sorted(recs.items()))
                         + ". Validate each deployment's stages apart.")
    folders = {str(Path(t.placed.path).resolve().parent) for t in stages}
    if len(folders) > 1:
        return [f"WARNING: the stages come from {len(folders)} folders ({', '.join(sorted(folders))}): a sweep is one "
                "deployment's stages; if these are different deployments, the knee mixes them"]
    return []
