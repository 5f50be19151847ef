"""One API function per command: ``calibrate_files`` (fit a step cost to measured runs, leave-one-out errors, the
profile) and ``validate_file`` (predicted vs measured for one run).

Both build the engine exactly as ``kvledger simulate`` does from the same flags
(``kvledger.analyses.serving.sim_setup.prepare`` with the measured workload in place of a trace), so a
profile written here and passed back as ``--step-cost FILE`` reproduces the numbers it reports.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.accounting.calibration_profile import PROFILE_KIND
from kvledger.accounting.fitted_cost import GPU_TERMS, LinearStepCost
from kvledger.analyses.serving.sim_setup import SimRequestArgs, SimSetup
from kvledger.calibration.compare import Comparison, compare_runs
from kvledger.calibration.fit import METRIC_WEIGHTS, STAT_QUANTILES
from kvledger.calibration.folds import fit_and_folds
from kvledger.calibration.gpu_source import runs_gpu
from kvledger.calibration.old_release import older_release, padding_notes, recorded_max_paddings
from kvledger.calibration.record_notes import pool_note, record_name, record_overrides
from kvledger.calibration.recorded_gpu import check_recorded_gpu
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.calibration.resolved_quant import replay_setup
from kvledger.calibration.run_record import RECORD_WORDS, recorded_settings
from kvledger.dynamics.simulator import EngineConfig
from kvledger.errors import InputError, KvLedgerError

__all__ = ["engine_for", "replaying", "calibrate_runs", "calibrate_files", "headline_errors"]


def _with_run_settings(args: SimRequestArgs, run: MeasuredRun) -> tuple[SimRequestArgs, list[str], dict[str, Any]]:
    """``args`` with every engine setting the run's own record states (``run_record.recorded_settings``) filled in where
    the user left it unset, notes saying which, and the settings taken from the record. A record names the engine it
    measured: replaying it under other defaults would not be that engine.

    Raises:
        InputError: the record states a deployment kvledger cannot replay as one engine (data or pipeline parallel).
    """
    extra = dict(run.measured.metadata.extra) if run.measured is not None else {}
    if not extra.get("engine_kwargs") and run.engine_hints:
        extra["engine_kwargs"] = run.engine_hints
    rec = recorded_settings(extra)
    if rec.unmodelled:
        raise InputError(f"{run.source}: the run's record states " + "; ".join(rec.unmodelled) + ". Replaying it as "
                         "one engine would compare another deployment (errors of +1,000% and more); validate or "
                         "calibrate runs of one engine (TP within it is modelled)")
    if rec.refused:
        raise InputError(f"{run.source}: " + " ".join(rec.refused) + " Validate or calibrate runs launched without it.")
    defaults = SimRequestArgs(model=args.model, gpu=args.gpu)
    sglang_only = ("mem_fraction_static", "max_total_tokens") if args.policy not in (None, "sglang") else ()
    taken = {k: v for k, v in rec.flags.items() if k not in sglang_only and (  # another --engine: SGLang's own unused
             getattr(args, k) is None or (k == "kv_cache_dtype" and args.kv_cache_dtype == defaults.kv_cache_dtype))}
    old = older_release(rec.engine_version, args) if args.engine_version is None and rec.engine_version else None
    if old is None and args.engine_version is None and rec.engine_version is not None:
        from kvledger.accounting.vllm_rules import parse_version

        try:
            parse_version(rec.engine_version)
            taken["engine_version"] = rec.engine_version
        except InputError:
            pass  # not a version: the default rules apply, and the note below does not claim it
    notes = []
    if taken:
        text = ", ".join(RECORD_WORDS.get(k, k + " {}").format(v) for k, v in taken.items())
        notes.append(f"from the run's own record ({record_name(run)}): {text} (a flag given on the command line "
                     "wins)")
    if old is not None:  # a release before the rules modelled: replayed as the oldest read (old_release.py)
        taken.update(old[0])
        notes.append(old[1])
    notes += record_overrides(args, rec, run)  # a flag against the record; a WARNING for another engine than ran
    notes += rec.positional + rec.unused
    if rec.unapplied:
        notes.append(f"WARNING: recorded, not modelled: {', '.join(rec.unapplied)} ({record_name(run)}): the replay "
                     "runs without it, so whatever it changes in the measured engine is in the errors")
    sglang = "sglang" in (args.policy, args.batching, extra.get("backend"))  # a flag or the file: not vLLM's version
    if args.engine_version is None and "engine_version" not in taken and not sglang:
        from kvledger.accounting.vllm_rules import LATEST

        notes.append(f"WARNING: engine version: neither the run's record nor --engine-version names it: vLLM "
                     f"{LATEST}'s rules assumed (the newest read); a release's async scheduling and host time per step "
                     "can move the replayed latency by more than its band: pass --engine-version as launched")
    if args.tp is None and "tp" not in taken:
        taken["tp"] = 1
    if run.num_dropped and run.target_stats is None:
        notes.append(f"{run.num_dropped} failed or unfinished request(s) of the run dropped: compared on the "
                     f"{len(run.requests)} that finished")
    return replace(args, **taken), notes, taken


def replaying(args: SimRequestArgs, run: MeasuredRun, several: bool, max_paddings: int | None = None) -> SimSetup:
    """``engine_for(args, run, max_paddings)``; among ``several`` runs, its refusal names the run: a fresh-user trial
    got "the model does not fit" with no file named when a 4090 run and an RTX PRO 6000 TP 2 run were calibrated
    together (one run: the error stands as it is, the run being the one given)."""
    try:
        return engine_for(args, run, max_paddings)
    except KvLedgerError as e:  # any refusal (a bad flag, an unknown recorded model, a file): which run it was
        if not several:
            raise
        raise InputError(f"replaying {run.source}: {e}") from None


def engine_for(args: SimRequestArgs, run: MeasuredRun, max_paddings: int | None = None) -> SimSetup:
    """The simulation setup (plan, engine settings, step cost from ``args.step_cost``) for replaying ``run``, with the
    launch settings the run's own record states filled in where the user gave none."""
    args, notes, taken = _with_run_settings(args, run)
    setup, more = replay_setup(args, run, taken)  # the resolved quantization needs the checkpoint: after the plan
    notes = notes + more
    check_recorded_gpu(run, setup.gpu_name, args.gpu)
    setup.record_settings = dict(taken)
    record = record_name(run)
    setup.notes = notes + [pool_note(n, setup, record, taken, args.kv_pool_source) if setup.plan is not None else n
                           for n in setup.notes]
    recorded = recorded_max_paddings(run) if max_paddings is None and setup.config.batching == "vllm_v0" else None
    if recorded is not None:
        max_paddings = recorded
        setup.notes.append(f"from the run's own record ({record}): max_paddings {max_paddings} (--max-paddings wins)")
    if max_paddings is not None:
        if setup.config.batching != "vllm_v0":
            raise InputError("--max-paddings is a vLLM V0 (0.2.x) setting: it needs --batching vllm_v0")
        notes = padding_notes(run, max_paddings)
        setup.config = replace(setup.config, max_paddings=None if notes else max_paddings)
        setup.notes.extend(notes)
    return setup


def headline_errors(c: Comparison) -> dict[str, float | None]:
    """Mean and p90 TTFT/TPOT and mean E2E errors of a comparison, flat (what tables and the profile quote)."""
    out = {}
    for metric, key in (("TTFT mean", "ttft_mean"), ("TTFT p90", "ttft_p90"), ("TPOT mean", "tpot_mean"),
                        ("TPOT p90", "tpot_p90"), ("E2E mean", "e2e_mean"), ("throughput", "throughput")):
        try:
            out[f"{key}_rel_error"] = c.row(metric).rel_error
        except KeyError:
            out[f"{key}_rel_error"] = None
    return out


def _compare(run: MeasuredRun, stage: Any, recs: Any, cfg: EngineConfig | None = None) -> Comparison:
    """The replay against the measurement: a stage's (or aggregate run's) aggregates when ``stage`` is given
    (``sweep.stage_comparison``, as ``validate`` compares it), else the measured run request by request."""
    if stage is not None:
        from kvledger.calibration.sweep import stage_comparison

        return stage_comparison(run.label, stage, recs, run, None if cfg is None else cfg.enable_prefix_caching)
    return compare_runs(run.label, run.measured, recs)


def calibrate_runs(runs: list[tuple[MeasuredRun, EngineConfig]], start, *, overlap: bool = False,
                   leave_one_out: bool = True, fit_frontend: bool = False,
                   split_regimes: bool = False, workers: int = 1, two_starts: bool = False,
                   stages: list[Any] | None = None, progress: Any = None) -> dict[str, Any]:
    """Fit on every run, report each run's errors, and (with several runs and ``leave_one_out``) each run's errors
    under a model fitted on the others. ``start`` is the step-cost model the fit starts from (its linear projection).
    ``workers`` > 1 runs the fits in parallel processes (``folds.fit_and_folds``; same results); ``two_starts`` also
    fits each from a start read off its own runs regime by regime (``regime_start``) and keeps the better.
    ``stages``: per run, the stage it stands for (``targets.Target.stage``; None for a per-request run): a stage
    holds no per-request records, so its errors compare its aggregates."""
    stages = list(stages) if stages is not None else [None] * len(runs)
    order = sorted(range(len(runs)), key=lambda i: (runs[i][0].source, runs[i][0].label))  # the fit sums the runs in
    guess, fit, got = fit_and_folds([runs[i] for i in order], start, overlap=overlap,  # one order, whatever the files'
                                    split_regimes=split_regimes, fit_frontend=fit_frontend,
                                    leave_one_out=leave_one_out, workers=workers, two_starts=two_starts,
                                    progress=progress)
    folds = [got[order.index(i)] for i in range(len(runs))] if got else []
    per_run = []
    from kvledger.calibration.saturation import compared_saturation
    from kvledger.ledgers.band_members import file_sha256

    for (run, cfg), st in zip(runs, stages):
        recs = replay(run, cfg, fit.cost).records
        c = _compare(run, st, recs, cfg)
        per_run.append({"label": run.label, "source": run.source, "sha256": file_sha256(run.source),  # IN-SAMPLE
                        "num_requests": len(run.requests),
                        **headline_errors(c), "comparison": c.to_dict(),
                        "saturated": compared_saturation(run, st, recs)})
    loo = []
    for i, ((run, cfg), f) in enumerate(zip(runs, folds)):
        rest = runs[:i] + runs[i + 1:]
        recs = replay(run, cfg, f.cost).records
        c = _compare(run, stages[i], recs, cfg)
        loo.append({"run": run.label, "fitted_on": [r.label for r, _ in rest], "step_cost": f.cost.coefficients(),
                    **headline_errors(c), "saturated": compared_saturation(run, stages[i], recs)})
    from kvledger.analyses.serving.profile_scope import fitted_range
    from kvledger.calibration.replay import replay_recorded

    span = fitted_range(runs, [replay_recorded(run, cfg, fit.cost)[1] for run, cfg in runs])
    default = [{"label": run.label, **headline_errors(_compare(run, st, replay(run, cfg, start).records, cfg))}
               for (run, cfg), st in zip(runs, stages)]  # the same runs under the step cost the fit started from
    return {"fit": fit, "runs": per_run, "leave_one_out": loo, "start": getattr(start, "name", type(start).__name__),
            "initial": guess, "fitted_range": span, "default_runs": default}


def calibrate_files(paths: list[str], args: SimRequestArgs, *, max_paddings: int | None = None,
                    leave_one_out: bool = True, fit_frontend: bool = False,
                    client_concurrency: int | None = None, split_regimes: bool = False,
                    workers: int = 1, two_starts: bool = False, progress: Any = None) -> dict[str, Any]:
    """The calibration profile (``kvledger.accounting.calibration_profile``'s layout) for measured runs in ``paths``.

    The CPU overhead is fitted as overlapping the GPU when the engine schedules asynchronously
    (``args.async_scheduling``, else the engine version's default), as added to each step otherwise.

    Accepts what ``validate`` accepts (``kvledger.calibration.targets``): per-request runs, inference-perf stage files
    and aggregate-only benchmark runs (fitted on the aggregates they hold). ``progress(text)``: told as each fit (on
    all runs, then each leave-one-out fold) ends (``folds.fit_and_folds``).

    Raises:
        InputError / FormatError: unreadable files, bad engine flags.
    """
    if not paths:
        raise InputError("calibrate needs at least one measured run file")
    from kvledger.calibration.targets import input_names, load_targets

    names = input_names(paths)
    targets = [t for i, p in enumerate(paths)  # seed 0 for every file, as validate: the order of files moves nothing
               for t in load_targets(p, seed=0, client_concurrency=client_concurrency, name=names[i])]
    args, model_notes = _record_model(targets, args)
    args, gpu_notes = runs_gpu(targets, args)  # --gpu, else the one GPU the runs' records name
    measured = [t.run for t in targets]
    setups = [replaying(args, m, len(measured) > 1, max_paddings) for m in measured]
    runs = [(m, s.config) for m, s in zip(measured, setups)]
    out = calibrate_runs(runs, setups[0].cost, overlap=setups[0].config.async_scheduling, leave_one_out=leave_one_out,
                         fit_frontend=fit_frontend, split_regimes=split_regimes, workers=workers,
                         two_starts=two_starts, stages=[t.stage for t in targets], progress=progress)
    from kvledger.calibration.engine_assumptions import engine_notes, launch_given, launch_recorded
    from kvledger.calibration.fit_spread import model_spread
    from kvledger.calibration.model_default import against_default

    profile = build_profile(out, args, setups[0], paths)
    profile["fit"]["spread"] = model_spread(profile)  # each coefficient's folds' range, those held at their start
    from kvledger.ledgers.profile_band import rows_fit_quality

    profile["fit_quality"] = rows_fit_quality(  # the check calibrate --scope gpu runs, on this profile's own runs
        out["runs"], any(t.stage is not None for t in targets), fit_frontend, launch_given(setups, args), scope="model",
        recorded=launch_recorded(measured))
    profile["fit_quality"]["against_default"] = against_default(out["runs"], out["default_runs"])
    profile["notes"] += model_notes + gpu_notes + engine_notes(setups, args) + [
        n for m in measured if m.measured is not None and (n := m.measured.metadata.extra.get("client_loop"))]
    for m, s in zip(measured, setups):  # the runs replayed without the cap given or recorded, each with its reason
        cap = max_paddings if max_paddings is not None else recorded_max_paddings(m)
        profile["notes"] += [f"{m.label}: {n}" for n in (padding_notes(m, cap) if cap is not None
                                                          and s.config.batching == "vllm_v0" else [])]
    return profile


def _record_model(targets: list[Any], args: SimRequestArgs) -> tuple[SimRequestArgs, list[str]]:
    """``args`` with the model the runs' records name when ``--model`` was not given (as ``validate`` reads it:
    ``targets.with_record_model``), and the note saying where; a model-scope fit is one model's, so the records
    must name one.

    Raises:
        InputError: a record names no model, or the records name several.
    """
    from kvledger.calibration.targets import with_record_model

    if args.model:  # the user's --model wins; a note for each record that names another
        return args, list(dict.fromkeys(n for t in targets if (n := with_record_model(t, args)[1])))
    named = [with_record_model(t, args) for t in targets]
    models = sorted({a.model for a, _ in named})
    if len(models) > 1:
        raise InputError(f"calibrate --scope model fits one model's step cost, but the runs' records name "
                         f"{len(models)} models ({', '.join(models)}): pass --model, or fit the GPU on them all "
                         "with --scope gpu")
    return named[0][0], [named[0][1]]


def build_profile(out: dict[str, Any], args: SimRequestArgs, setup: SimSetup, paths: list[str]) -> dict[str, Any]:
    """The profile dict from ``calibrate_runs``' result."""
    fit = out["fit"]
    cost: LinearStepCost = fit.cost
    sc = cost.coefficients()
    kv_bpt = None
    if setup.plan is not None:
        kv_bpt = getattr(getattr(setup.plan, "kv", None), "bytes_per_token", None)
    units = {t[0]: t[1] for t in GPU_TERMS}
    units["cpu_overhead_s"] = "s per step" + (" (overlaps GPU work)" if cost.overlap else " (added to each step)")
    units["frontend_s"] = "s per request, outside the engine (added to TTFT and E2E by validate, not by simulate)"
    sc_out = {**sc, "units": units, "terms": {t[0]: t[2] for t in GPU_TERMS}}
    if kv_bpt:  # one GPU's share at the profile's TP (the plan's pool is per GPU), as simulation.plan names it
        sc_out["kv_bytes_per_token_per_gpu"] = kv_bpt
        sc_out["decode_kv_byte_s"] = cost.decode_kv_token_s / kv_bpt
    notes = []
    if not cost.overlap:
        notes.append("synchronous engine: the per-step CPU/serving overhead and the GPU's fixed time per step add up "
                     "and cannot be told apart from latencies; both are in fixed_s (cpu_overhead_s = 0)")
    return {
        "kind": PROFILE_KIND, "version": 1, "model": setup.model_name, "gpu": setup.gpu_name, "tp": setup.tp,
        "engine": setup.config.to_dict(), "engine_flags": {k: v for k, v in vars(args).items()
                                                            if v is not None and k not in ("model", "gpu", "trace")},
        "step_cost": sc_out,
        "fit": {"method": "damped Gauss-Newton on log-ratio errors of run statistics, then a multiplicative pattern "
                          "search, then Gauss-Newton again (kvledger.calibration.fit)",
                "statistics": ["mean"] + [f"p{int(q * 100)}" for q in STAT_QUANTILES[1:]],
                "metric_weights": dict(METRIC_WEIGHTS), "start_model": out["start"],
                "initial": out["initial"].coefficients(), "objective_start": fit.objective_start,
                "objective": fit.objective, "iterations": fit.iterations, "num_replays": fit.num_replays},
        "fitted_range": out.get("fitted_range"),
        "runs": out["runs"], "leave_one_out": out["leave_one_out"], "data_files": list(paths), "notes": notes,
    }
