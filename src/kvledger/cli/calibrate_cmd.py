"""``kvledger calibrate FILE... [--model M] [--gpu G] [engine flags] --out PROFILE.json``: fit the step cost (or, with
``--scope gpu``, the GPU's efficiency) to measured runs and write a profile (the model and GPU: the flags, else the
runs' records)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import typer

from kvledger.cli.calib_opts import (
    CalibEngineFlags,
    EngineVersion,
    Gpu,
    engine_args,
)
from kvledger.cli.flag_groups import EngineFlags, GroupUse, flag, option, with_groups

__all__ = ["register"]


@dataclass(frozen=True, slots=True)
class CalibFitFlags:
    """What is fitted and how (scope, the client's cap, regimes, front end, host, start, leave-one-out, workers), and
    the outputs."""

    scope: str = flag("--scope", default="model", help=(
        "gpu: fit the GPU's achieved efficiency (the roofline's fractions) on runs of any models, carried to every "
        "model (write with --out, use with --gpu-profile); model: fit one model's step cost at one TP (use with "
        "--step-cost)."))
    client_concurrency: int | None = flag("--client-concurrency", help=(
        "Aggregate-only files: the client's cap on requests in flight, replayed as a closed loop of that many "
        "clients (a run at request rate inf: the file's max_concurrency, this flag only where the file states none; "
        "an inference-perf stage: this flag, else its config.yaml's num_workers × worker_max_concurrency)."))
    split_regimes: bool = flag("--split-regimes/--no-split-regimes", default=False, help=(
        "--scope model: fit the prefill steps' own fixed time apart from the decode steps' (low-load TTFT and the "
        "knee together)."))
    fit_frontend: bool = flag("--fit-frontend/--no-fit-frontend", default=False, help=(
        "Also fit a per-request latency outside the engine (HTTP, tokenisation), added to TTFT and E2E: for "
        "client-side measurements. With --scope gpu it is the set-up's, fitted apart from the GPU fractions and not "
        "part of the GPU profile's pricing."))
    fit_host: bool = flag("--fit-host/--no-fit-host", default=False, help=(
        "--scope gpu: also fit the host's time per step and per sequence in series with the GPU (scheduling, input "
        "preparation, sampling); it separates from the fractions only on runs of models of different sizes."))
    start: str = flag("--start", default="roofline", help=(
        "Step cost the fit starts from (its least-squares linear form): roofline, calibrated, calibrated:KEY or a "
        "PROFILE.json."))
    leave_one_out: bool = flag("--leave-one-out/--no-leave-one-out", default=True, help=(
        "With several runs, also fit without each run and report its error under the others' fit (one extra fit per "
        "run; --scope gpu: the fractions fitted on the other runs, which about doubles the time with two runs)."))
    two_starts: bool = flag("--regime-start/--no-regime-start", default=False, help=(
        "--scope model: also fit from a start read off the runs regime by regime (prefill from low-load TTFT, "
        "decode from TPOT against concurrency) and keep the better fit (twice the time)."))
    workers: int = flag("--workers", default=0, help=(
        "Processes for the fit and the leave-one-out fits (0: one per CPU, at most one per fit); the profile is "
        "the same with any number."))
    out: Path | None = flag("--out", help="Write the profile here (JSON): a --scope gpu profile is used with "
                                          "--gpu-profile FILE, a --scope model one with --step-cost FILE.")
    force: bool = flag("--force", default=False, help="Allow --out to overwrite an existing file.")
    as_json: bool = flag("--json", default=False, help="Print the profile as JSON instead of tables.")



@with_groups(engine=CalibEngineFlags, fit=GroupUse(CalibFitFlags, first_spelling=True))
def calibrate(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., help="Measured runs with per-request times: any benchmark file `kvledger "
                                                "goodput` reads, an LLMServingSim requests.jsonl (or its folder), or a "
                                                "bundled DistServe run (distserve:vllm-100-1)."),
    model: str | None = typer.Option(None, "--model", help="The served model (default: the run's record; needed for "
                                                           "files that name none)."),
    gpu: Gpu = None, engine_version: EngineVersion = None,
    # default-style: a range error names --tp, as before the engine flags became a group (limits._flag_of)
    tp: int | None = option(EngineFlags, "tp", help="Tensor-parallel degree (default: the run's record, else 1)."),
    engine: CalibEngineFlags = CalibEngineFlags(),
    fit: CalibFitFlags = CalibFitFlags(),
) -> None:
    """Fit the simulator's step cost to measured runs: replays their arrivals and lengths, minimises the TTFT/TPOT/E2E
    error, reports fit and leave-one-out errors.

    Time: a fit replays each run some 60-80 times, about 0.05-0.08 s per 1,000 replayed requests, so 3-5 s per 1,000
    requests in the files, times (runs + 1) with leave-one-out (2-core Intel Xeon: 3 load stages, 16,593 requests,
    --scope model 55 s; 2 stages, 7,415 requests, --scope gpu 37 s). On a terminal, progress goes to stderr, a line
    per fit step or fold."""
    from kvledger.accounting.calibration_profile import dump_profile
    from kvledger.calibration.api import calibrate_files
    from kvledger.cli.outputs import prepare_json_out, refuse_lone_force, write_text_atomic
    from kvledger.errors import InputError

    f = fit
    refuse_lone_force(f.force, {"--out": f.out})
    if f.out is not None:
        prepare_json_out(f.out, "the fitted profile", force=f.force, inputs=[*files, f.start, model, gpu])
    if f.scope not in ("gpu", "model"):
        raise InputError(f"--scope {f.scope}: use gpu or model")
    args = engine_args(model, gpu, ctx.params, step_cost=f.start)
    if f.scope == "gpu":
        from kvledger.calibration.gpu_profile_file import calibrate_gpu_files

        profile = calibrate_gpu_files(files, args, client_concurrency=f.client_concurrency,
                                      fit_frontend=f.fit_frontend, fit_host=f.fit_host, leave_one_out=f.leave_one_out,
                                      progress=_progress())
    else:
        profile = calibrate_files(files, args, max_paddings=engine.max_paddings, leave_one_out=f.leave_one_out,
                                  fit_frontend=f.fit_frontend, client_concurrency=f.client_concurrency,
                                  split_regimes=f.split_regimes, workers=f.workers or _cpus(),
                                  two_starts=f.two_starts, progress=_progress())
    text = dump_profile(profile)
    if f.out is not None:
        write_text_atomic(f.out, text)
    if f.as_json:
        typer.echo(text, nl=False)
        return
    from rich.console import Console

    from kvledger.report.calibration_view import render_gpu_profile, render_profile
    from kvledger.report.tables import print_gpu_alias_note

    if f.scope == "gpu":
        render_gpu_profile(json.loads(text), Console(emoji=False), f.out, fit_frontend=f.fit_frontend)
    else:
        render_profile(json.loads(text), Console(emoji=False), f.out)
    if gpu is not None:  # a GPU from the runs' records is named in the profile's notes, by its catalog row
        print_gpu_alias_note(Console(emoji=False), gpu)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


def _progress():
    """A printer of the fit's progress, one line each with the seconds since calibrate began, on standard error and
    only when it is a terminal (as ``report.progress.working``: --json, pipes and tests see none of it); None
    otherwise."""
    import time

    from rich.console import Console

    con = Console(stderr=True, emoji=False)
    if not con.is_terminal:
        return None
    t0 = time.monotonic()
    return lambda text: con.print(f"[dim]calibrate: {text} ({time.monotonic() - t0:.0f} s)[/]", highlight=False)


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
