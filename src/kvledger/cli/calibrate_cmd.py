"""``kvledger calibrate FILE... --model M --gpu G [engine flags] --out PROFILE.json``: fit the step cost to measured
runs and write a calibration profile."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from kvledger.cli.calib_opts import (
    AsyncScheduling,
    BandwidthFraction,
    Batching,
    BlockSize,
    ChunkedPrefill,
    CpuOverhead,
    EnforceEager,
    EngineVersion,
    FlopsFraction,
    GemmEfficiency,
    Gpu,
    GpuMemUtil,
    GpuProfile,
    KvCacheDtype,
    MaxModelLen,
    MaxNumBatchedTokens,
    MaxNumSeqs,
    MaxPaddings,
    NumGpuBlocksOverride,
    PrefixCaching,
    Tp,
    Wddm,
    engine_args,
)

__all__ = ["register"]


def calibrate(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., help="Measured runs with per-request times: any benchmark file `kvledger "
                                                "goodput` reads, an LLMServingSim requests.jsonl (or its folder), or a "
                                                "bundled DistServe run (distserve:vllm-100-1)."),
    model: str | None = typer.Option(None, "--model", help="The served model (default: the run's record; needed for "
                                                           "files that name none)."),
    gpu: Gpu = ..., engine_version: EngineVersion = None, tp: Tp = None,
    max_model_len: MaxModelLen = None, gpu_memory_utilization: GpuMemUtil = None, kv_cache_dtype: KvCacheDtype = "auto",
    block_size: BlockSize = None, max_num_batched_tokens: MaxNumBatchedTokens = None, max_num_seqs: MaxNumSeqs = None,
    num_gpu_blocks_override: NumGpuBlocksOverride = None, prefix_caching: PrefixCaching = None,
    chunked_prefill: ChunkedPrefill = None, batching: Batching = None, max_paddings: MaxPaddings = None,
    cpu_overhead: CpuOverhead = None, async_scheduling: AsyncScheduling = None, gpu_profile: GpuProfile = None,
    enforce_eager: EnforceEager = None, wddm: Wddm = None,
    achievable_flops_fraction: FlopsFraction = None, achievable_bandwidth_fraction: BandwidthFraction = None,
    gemm_efficiency: GemmEfficiency = None,
    scope: str = typer.Option("model", "--scope", help="gpu: fit the GPU's achieved efficiency (the roofline's "
                                                       "fractions) on runs of any models, carried to every model "
                                                       "(write with --out, use with --gpu-profile); model: fit one "
                                                       "model's step cost at one TP (use with --step-cost)."),
    client_concurrency: int | None = typer.Option(None, "--client-concurrency", help="Aggregate-only stage files: the "
        "client's cap on requests in flight (default: as its config.yaml states, inference-perf's num_workers × "
        "worker_max_concurrency)."),
    split_regimes: bool = typer.Option(False, "--split-regimes/--no-split-regimes", help="--scope model: fit the "
        "prefill steps' own fixed time apart from the decode steps' (low-load TTFT and the knee together)."),
    fit_frontend: bool = typer.Option(False, "--fit-frontend/--no-fit-frontend", help="Also fit a per-request latency "
        "outside the engine (HTTP, tokenisation), added to TTFT and E2E: for client-side measurements. With --scope "
        "gpu it is the set-up's, fitted apart from the GPU fractions and not part of the GPU profile's pricing."),
    fit_host: bool = typer.Option(False, "--fit-host/--no-fit-host", help="--scope gpu: also fit the host's time per "
        "step and per sequence in series with the GPU (scheduling, input preparation, sampling); it separates from the "
        "fractions only on runs of models of different sizes."),
    start: str = typer.Option("roofline", "--start", help="Step cost the fit starts from (its least-squares linear "
                                                          "form): roofline, calibrated, calibrated:KEY or a "
                                                          "PROFILE.json."),
    leave_one_out: bool = typer.Option(True, "--leave-one-out/--no-leave-one-out", help="With several runs, also fit "
        "without each run and report its error (one extra fit per run)."),
    two_starts: bool = typer.Option(False, "--regime-start/--no-regime-start", help="--scope model: also fit from a "
        "start read off the runs regime by regime (prefill from low-load TTFT, decode from TPOT against concurrency) "
        "and keep the better fit (twice the time)."),
    workers: int = typer.Option(0, "--workers", help="Processes for the fit and the leave-one-out fits "
        "(0: one per CPU, at most one per fit); the profile is the same with any number."),
    out: Path | None = typer.Option(None, "--out", help="Write the calibration profile here (JSON); use it with "
                                                        "--step-cost FILE."),
    force: bool = typer.Option(False, "--force", help="Allow --out to overwrite an existing file."),
    as_json: bool = typer.Option(False, "--json", help="Print the profile as JSON instead of tables."),
) -> None:
    """Fit the simulator's step cost to measured runs: replays their arrivals and lengths, minimises the TTFT/TPOT/E2E
    error, reports fit and leave-one-out errors."""
    from kvledger.accounting.calibration_profile import dump_profile
    from kvledger.calibration.api import calibrate_files
    from kvledger.errors import InputError
    from kvledger.outputs import prepare_output_file, write_text_atomic

    if out is not None:
        prepare_output_file(out, force=force, inputs=[*files, start])
    if scope not in ("gpu", "model"):
        raise InputError(f"--scope {scope}: use gpu or model")
    args = engine_args(model, gpu, ctx.params, step_cost=start)
    if scope == "gpu":
        from kvledger.calibration.gpu_fit import calibrate_gpu_files

        profile = calibrate_gpu_files(files, args, client_concurrency=client_concurrency, fit_frontend=fit_frontend,
                                      fit_host=fit_host)
    else:
        profile = calibrate_files(files, args, max_paddings=max_paddings, leave_one_out=leave_one_out,
                                  fit_frontend=fit_frontend, client_concurrency=client_concurrency,
                                  split_regimes=split_regimes, workers=workers or _cpus(),
                                  two_starts=two_starts)
    text = dump_profile(profile)
    if out is not None:
        write_text_atomic(out, text)
    if as_json:
        typer.echo(text, nl=False)
        return
    from rich.console import Console

    from kvledger.report.calibration_view import render_profile

    if scope == "gpu":
        from kvledger.report.calibration_view import render_gpu_profile

        render_gpu_profile(json.loads(text), Console(emoji=False), out, fit_frontend=fit_frontend)
        return
    render_profile(json.loads(text), Console(emoji=False), out)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate)


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
