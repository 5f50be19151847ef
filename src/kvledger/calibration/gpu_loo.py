"""The runs of a GPU-scope fit (``gpu_setups``: each with its engine) and its leave-one-out (``calibrate --scope
gpu``, on by default with several runs): each run priced by the achievable fractions (and front-end and host terms,
when fitted) that ``gpu_fit.fit_gpu_fractions`` finds on the other runs alone, so its errors are a prediction's, not
the fit's. One extra fit per run, each on one run fewer (kubecon's ``vllm`` stages 0 and 1 with docs/validation.md
§2.8's engine flags: 26 s in all for the fit on both and the two held-out fits, 2-core machine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvledger.errors import InputError

__all__ = ["gpu_setups", "run_errors", "run_row", "gpu_leave_one_out", "check_runs"]


def gpu_setups(paths: list[str], args, client_concurrency: int | None) -> tuple[list[tuple[Any, Any, Any]], list[str]]:
    """Each run with its engine and the stage it stands for (None for a per-request run): ``args.model`` when given
    (the user's flag wins; a note when a record names another), else the model its record names, at its own TP and
    settings, priced by the plain roofline (no GPU profile: that is what is being fitted), on ``args.gpu`` or, without
    it, the one GPU the runs' records name (``gpu_source.runs_gpu``)."""
    from dataclasses import replace

    from kvledger.calibration.api import replaying
    from kvledger.calibration.gpu_source import runs_gpu
    from kvledger.calibration.targets import input_names, load_targets, with_record_model

    out = []
    names = input_names(paths)
    targets = [t for i, p in enumerate(paths) for t in load_targets(p, seed=0, client_concurrency=client_concurrency,
                                                                      name=names[i])]
    refuse_one_model_for_many(targets, args)
    args, notes = runs_gpu(targets, args)  # --gpu, else the one GPU the runs' records name (a note says where)
    for t in targets:
        named, note = with_record_model(t, args)  # a --model the user gave wins over the record
        if note and args.model:
            notes.append(note)
        a = replace(named, step_cost="roofline", gpu_profile="none", achievable_flops_fraction=None,
                    achievable_bandwidth_fraction=None)
        out.append((t.run, replaying(a, t.run, len(targets) > 1), t.stage))
    return out, notes


def refuse_one_model_for_many(targets: list[Any], args) -> None:
    """Refuse ``--model`` for runs whose records name different models: it would replay every one of them as that
    model (a Qwen3-32B run priced as DeepSeek's config), and the fit would read one model's step times off another's.

    Raises:
        InputError: --model given, and the runs' records name two or more models.
    """
    if not args.model:
        return
    from kvledger.calibration.targets import record_model

    named = sorted({m for t in targets if (m := record_model(t))})
    if len(named) > 1:
        raise InputError(f"--model {args.model} would replay every run as that model, but their records name "
                         f"{len(named)} models ({', '.join(named)}); a GPU calibration over several models replays "
                         "each as its own: calibrate the runs of one model at a time, each with its own --model, or "
                         "drop --model where every record's model is bundled or reachable on the Hub")


def run_errors(run: Any, setup: Any, stage: Any, cost: Any, frontend_s: float) -> tuple[Any, Any]:
    """(comparison, replayed records) of ``run`` (its ``setup`` from ``gpu_setups``; ``stage`` None for a
    per-request run) priced by the step cost ``cost``, with ``frontend_s`` (s per request) added to TTFT and E2E: a
    stage's aggregates as ``validate`` compares them, else request by request."""
    from kvledger.calibration.compare import compare_runs
    from kvledger.calibration.replay import replay, with_frontend
    from kvledger.calibration.sweep import stage_comparison

    recs = with_frontend(replay(run, setup.config, cost), frontend_s).records
    if stage is not None:
        return stage_comparison(run.label, stage, recs, run, setup.config.enable_prefix_caching), recs
    return compare_runs(run.label, run.measured, recs), recs


def run_row(run: Any, setup: Any, stage: Any, cost: Any, frontend_s: float) -> tuple[dict[str, Any], Any]:
    """(row, comparison) of ``run`` priced by ``cost`` (``run_errors``): its label, source, model, TP, engine, requests,
    headline errors (``api.headline_errors``) and whether either side saturated (``saturation.saturation``: its
    latency errors then measure the queue) — the row every GPU-scope table writes (fitted runs, leave-one-out,
    out-of-sample)."""
    from kvledger.accounting.platforms import plan_release
    from kvledger.calibration.api import headline_errors
    from kvledger.calibration.saturation import compared_saturation
    from kvledger.ledgers.band_members import file_sha256

    c, recs = run_errors(run, setup, stage, cost, frontend_s)
    mem = setup.plan.memory
    engine = plan_release(mem.engine, mem.engine_version, setup.plan.settings.engine_version)
    said = (run.measured.metadata.extra if run.measured is not None else {}).get("vllm_version")
    return {"label": run.label, "source": run.source, "sha256": file_sha256(run.source),  # validate's IN-SAMPLE test
            "model": setup.model_name, "tp": setup.tp,
            "moe": setup.plan.model.is_moe,  # its kernel family (a profile's check widens that family's bands)
            # the engine release the run was replayed as, and whether its record states it (else kvledger's default
            # or --engine-version): a profile's fractions carry that release's per-step host time
            "engine": engine,  # recorded: the run's record states that release (a flag equal to it too)
            "engine_recorded": said is not None and plan_release(mem.engine, str(said)) == engine,
            "num_requests": len(run.requests), **headline_errors(c),
            # false, not null, when neither side saturated: an older file's null reads as "not said" (run_facts)
            "saturated": compared_saturation(run, stage, recs) or False}, c


def gpu_leave_one_out(staged: list[tuple[Any, Any, Any]], fit: Callable[[list[tuple[Any, Any]]], Any],
                      price: Callable[[Any, Any], Any]) -> list[dict[str, Any]]:
    """For each run of ``staged`` (``gpu_setups``' (run, setup, stage) triples), its errors under ``fit`` (the
    GPU fit, ``gpu_fit.fit_gpu_fractions`` with the command's options) on the others, each run priced by
    ``price(setup, that fit)``: ``run``, ``fitted_on`` (the other runs' labels), the fractions found without it and
    the headline errors (``api.headline_errors``). Empty with fewer than two runs (nothing to fit on without one)."""
    if len(staged) < 2:
        return []
    out = []
    for i, (run, setup, stage) in enumerate(staged):
        rest = staged[:i] + staged[i + 1:]
        f = fit([(r, s) for r, s, _ in rest])
        row, _ = run_row(run, setup, stage, price(setup, f), f.frontend_s)
        out.append({"run": row.pop("label"), "fitted_on": [r.label for r, _, _ in rest],
                    "flops_fraction": f.flops_fraction, "bandwidth_fraction": f.bandwidth_fraction,
                    "allreduce_link_share": f.link_share, "frontend_s": f.frontend_s, **row})
    return out


def check_runs(paths: list[str], args, price: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """Each measured run in ``paths`` (runs a GPU profile was *not* fitted on: other models, other TPs) priced by
    ``price(setup)`` (the profile's step cost, ``gpu_fit.roofline_with``), as ``gpu_profile_file.calibrate_gpu_files``
    writes its fitted runs (label, source, model, TP, requests, headline errors, saturation): the profile's
    ``out_of_sample`` checks, which widen its bands for the models and TPs it was not fitted on
    (``kvledger.ledgers.profile_band``)."""
    staged, _ = gpu_setups(paths, args, None)
    return [run_row(run, s, st, price(s), 0.0)[0] for run, s, st in staged]
