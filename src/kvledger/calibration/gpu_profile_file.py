"""The GPU profile ``kvledger calibrate --scope gpu`` writes: the fit on the runs (``gpu_fit``: the fractions, the
set-up's frontend, the host terms, and over PCIe the all-reduce's link share, ``link_fit``), each run's errors under
it, and the file's layout (``kvledger.accounting.gpu_profile`` reads it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvledger.accounting.gpu_profile import GPU_PROFILE_KIND
from kvledger.accounting.tp_comm import PCIE_ALLREDUCE_SHARE
from kvledger.calibration.fit_identify import flops_from_ttft_alone, ttft_alone_note
from kvledger.calibration.gpu_fit import ROBUST_SCALE, GpuFit, fit_gpu_fractions, roofline_with
from kvledger.errors import InputError

__all__ = ["gpu_profile_dict", "calibrate_gpu_files", "mixed_families_note"]


def gpu_profile_dict(fit: GpuFit, per_run: list[dict[str, Any]], paths: list[str]) -> dict[str, Any]:
    """The GPU profile's layout (``kvledger.accounting.gpu_profile``) from a fit and each run's errors under it."""
    # full precision: the profile prices as the fit did, so validate on a fitted run reproduces its in-sample errors
    return {"kind": GPU_PROFILE_KIND, "version": 4, "gpu": fit.gpu, "flops_fraction": fit.flops_fraction,
            "gemm_efficiency": fit.gemm_efficiency,
            "bandwidth_fraction": fit.bandwidth_fraction, "host_step_s": fit.host_step_s,
            "host_seq_s": fit.host_seq_s, "allreduce_link_share": fit.link_share,
            "fit": {"method": "grid over the roofline's achievable fractions, then a multiplicative pattern search "
                              "(with the host terms: additive moves too), on kvledger.calibration.fit's statistics "
                              "summed over the runs under a Cauchy loss of scale "
                              f"{ROBUST_SCALE} (kvledger.calibration.gpu_fit)",
                    "gemm_note": "gemm_efficiency 'measured': the weight matmuls run at flops_fraction × the GPU's "
                                 "measured efficiency against tokens and GEMM size (kvledger.accounting."
                                 "gemm_efficiency; 1.0: as measured); 'flat': at flops_fraction alone",
                    "host_note": "host_step_s + host_seq_s × sequences: host time in series with every step (0 "
                                 "unless fitted with --fit-host), priced for every model on this GPU",
                    "link_note": "allreduce_link_share: the share of the link's one-direction bandwidth the TP "
                                 "all-reduces achieved, fitted where a run has TP > 1 over PCIe (kvledger.calibration."
                                 f"link_fit) unless given; null: the default rule (over PCIe "
                                 f"{PCIE_ALLREDUCE_SHARE:g} of the host link)",
                    "allreduce_link_share_given": fit.link_given,
                    "objective_start": fit.objective_start, "objective": fit.objective, "flops_seen": fit.flops_seen,
                    "frontend_s": fit.frontend_s,
                    "frontend_note": "the set-up's per-request latency outside the engine (calibrate --fit-frontend; 0 "
                                     "when not fitted): the client's, not the GPU's, so a GPU profile never adds it",
                    "start": {"flops_fraction": 0.7, "bandwidth_fraction": 0.8}, "num_replays": fit.num_replays,
                    "objective_default": fit.objective_default,
                    "default_note": "objective_default: the same objective with every run priced as without a "
                                    "profile (FLOP fraction 1.0 × the measured curve, or the flat 0.7; bandwidth 0.8; "
                                    "no host terms); beats_default false: the fit does not price its own runs better "
                                    "than that (kvledger.calibration.gpu_fit.default_objective)"},
            "runs": per_run, "data_files": list(paths)}


def _refuse_carried(args) -> None:
    """--gemm-efficiency carried prices a GPU as if nobody had profiled it: a profile stores flat or measured
    (``gpu_profile.py``), so none is fitted with it. Raises InputError."""
    if getattr(args, "gemm_efficiency", None) == "carried":
        raise InputError("--gemm-efficiency carried prices a GPU as if nobody had profiled it, so no GPU profile is "
                         "fitted with it: use flat or measured with --scope gpu")


def calibrate_gpu_files(paths: list[str], args, *, client_concurrency: int | None = None,
                        fit_frontend: bool = False, fit_host: bool = False,
                        leave_one_out: bool = False, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The GPU profile fitted on the measured runs in ``paths`` (any models, one GPU), with each run's errors (with
    ``fit_frontend``, the set-up's frontend latency fitted too and added to each run's TTFT and E2E; with
    ``fit_host``, the host's per-step and per-sequence time, which the profile then adds to every step); ``notes``:
    validate's notes on the same runs (a stage's client prompt pool and closed-loop cap, the TPOT compared), once each;
    with ``leave_one_out`` and several runs, each run's errors under a fit on the others (``gpu_loo``).
    ``progress(text)``: told as each fit moves on (``fit_gpu_fractions``), each line naming the fit. Raises
    InputError / FormatError: no run, runs on several GPUs, unreadable files."""
    from kvledger.calibration.engine_assumptions import engine_notes, launch_given, launch_recorded
    from kvledger.calibration.gpu_loo import gpu_leave_one_out, gpu_setups, run_row

    if not paths:
        raise InputError("calibrate needs at least one measured run file")
    if args.kv_pool_source:
        raise InputError("--startup-log sets one server's KV pool, but --scope gpu fits runs of several models and "
                         "servers: give it with --scope model (one model's runs)")
    _refuse_carried(args)
    staged, model_notes = gpu_setups(paths, args, client_concurrency)
    folds = iter(range(len(staged) + 1))

    def gpu_fit(items):  # the fit with the command's options, on all runs or all but one
        i = next(folds)
        name = f"fit on all {len(items)} runs" if i == 0 else f"leave-one-out fit {i}/{len(staged)}"
        say = None if progress is None else (lambda text: progress(f"{name}: {text}"))
        return fit_gpu_fractions(items, fit_frontend=fit_frontend, fit_host=fit_host, progress=say,
                                 with_default=i == 0)  # a fold's comparison with the default is never read

    def price(s, f):
        return roofline_with(s, *f.terms)

    fit = gpu_fit([(run, s) for run, s, _ in staged])
    per_run, notes = [], list(model_notes) + engine_notes([s for _, s, _ in staged], args)
    notes += mixed_families_note([s.plan.model for _, s, _ in staged])
    for run, s, st in staged:
        row, c = run_row(run, s, st, price(s, fit), fit.frontend_s)
        notes += c.notes  # validate's notes on the same run: the client's prompt pool and loop, the TPOT compared
        per_run.append(row)
    from kvledger.ledgers.profile_band import rows_fit_quality

    prof = gpu_profile_dict(fit, per_run, paths)
    prof["fit"]["frontend_fitted"] = fit_frontend  # frontend_s 0 unfitted, told from a fitted 0 (client_latency.py)
    prof["fit_quality"] = rows_fit_quality(per_run, any(st is not None for _, _, st in staged), fit_frontend,
                                           launch_given([s for _, s, _ in staged], args),
                                           recorded=launch_recorded([run for run, _, _ in staged]))
    prof["fit_quality"]["beats_default"] = fit.beats_default  # false: keep the default, the profile not recommended
    alone = flops_from_ttft_alone([(run, s) for run, s, _ in staged], fit, fit_frontend)  # fit_identify.py
    prof["fit_quality"]["flops_from_ttft_alone"] = alone
    prof["recommended"] = fit.beats_default and alone is None
    if alone is not None:
        prof["recommended_note"] = ttft_alone_note(alone)
    prof["notes"] = list(dict.fromkeys(notes))  # each once, in the order of the runs
    if leave_one_out:
        prof["leave_one_out"] = gpu_leave_one_out(staged, gpu_fit, price)
    from kvledger.calibration.fit_spread import gpu_spread

    prof["fit"]["spread"] = gpu_spread(prof, fit_frontend)  # each constant's folds' range, and its bounds
    return prof


def mixed_families_note(models: list[Any]) -> list[str]:
    """A warning when the runs mix dense and MoE models (ModelSpecs): one pair of fractions then serves two kernel
    families. An MoE model's routed experts run in their own fused kernels, whose share of the peak is not the dense
    GEMMs': on the RTX PRO 6000, the fit on Qwen3-32B that prices Llama-3.1-8B (0.63/0.72 of FLOP/s and bandwidth,
    throughput −6.9%) moved to 1.00/0.40 with a DeepSeek-V3.2-Exp-16L64E (FP8 MoE) run beside it, and priced the Llama
    run's throughput −33% (docs/validation.md §2.18)."""
    moe = sorted({m.name for m in models if m.is_moe})
    dense = sorted({m.name for m in models if not m.is_moe})
    if not moe or not dense:
        return []
    return [f"WARNING: the runs mix dense models ({', '.join(dense)}) and MoE models ({', '.join(moe)}): one pair of "
            "fractions is fitted for both kernel families, though routed experts run in their own fused kernels; "
            "check each run's errors below, and for dense models prefer a profile fitted on dense runs alone"]
