"""``kvledger validate FILE [--model M] [--gpu G] [--step-cost …] [--slo …]``: replay a measured run and print predicted
vs measured with the error of each figure (the model and GPU: the flags, else the run's record)."""

from __future__ import annotations

from typing import Annotated

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
    ExpertParallel,
    FlopsFraction,
    GemmEfficiency,
    GpuMemUtil,
    GpuProfile,
    KvCacheDtype,
    LinkShare,
    MaxModelLen,
    MaxNumBatchedTokens,
    MaxNumSeqs,
    MaxPaddings,
    MemFractionStatic,
    NumGpuBlocksOverride,
    Policy,
    PrefixCaching,
    StartupLog,
    Tp,
    Wddm,
    engine_args,
)

__all__ = ["register"]


#: validate's --gpu: optional, the run's record or the --gpu-profile naming it otherwise
#: (``calibration.gpu_source.with_record_gpu``)
RecordGpu = Annotated[str | None, typer.Option("--gpu", help="The GPU it ran on: catalog name (see `kvledger gpus`) or "
                                               "a GPU file (default: the run's record, as a Kubernetes Deployment's "
                                               "accelerator or meta.json's hardware names it, else the GPU a "
                                               "--gpu-profile FILE was fitted on).")]


Verbose = Annotated[bool, typer.Option("--verbose", help="A sweep: every stage's notes whole, each with its own "
                                        "figures (default: a note several stages give, said once with the levels it "
                                        "applies to).")]


_FILES = ("A measured run with per-request times (as for `kvledger calibrate`), an inference-perf stage report, or an "
          "aggregate-only benchmark file (vLLM/SGLang bench_serving); a file of several runs at several rates (the "
          "lines of a bench_serving JSONL file, per-request or aggregate) is a sweep; with --sweep, the stage files "
          "of one load sweep, or per-request runs at several rates.")


def validate(
    ctx: typer.Context,
    files: list[str] = typer.Argument(..., help=_FILES),
    model: str | None = typer.Option(None, "--model", help="The served model: bundled HF id or alias, a config.json "
                                     "path or a Hub id (default: the run's record, as calibrate reads it; needed for "
                                     "files that name none)."),
    gpu: RecordGpu = None, engine_version: EngineVersion = None, tp: Tp = None,
    max_model_len: MaxModelLen = None, gpu_memory_utilization: GpuMemUtil = None, kv_cache_dtype: KvCacheDtype = "auto",
    block_size: BlockSize = None, max_num_batched_tokens: MaxNumBatchedTokens = None, max_num_seqs: MaxNumSeqs = None,
    num_gpu_blocks_override: NumGpuBlocksOverride = None, startup_log: StartupLog = None,
    prefix_caching: PrefixCaching = None,
    chunked_prefill: ChunkedPrefill = None, batching: Batching = None, policy: Policy = None,
    mem_fraction_static: MemFractionStatic = None, max_paddings: MaxPaddings = None,
    cpu_overhead: CpuOverhead = None, async_scheduling: AsyncScheduling = None, gpu_profile: GpuProfile = None,
    enforce_eager: EnforceEager = None, wddm: Wddm = None, enable_expert_parallel: ExpertParallel = None,
    achievable_flops_fraction: FlopsFraction = None, achievable_bandwidth_fraction: BandwidthFraction = None,
    gemm_efficiency: GemmEfficiency = None, allreduce_link_share: LinkShare = None,
    client_latency_spec: str | None = typer.Option(None, "--client-latency", help="The client's and front end's "
        "latency added to every simulated TTFT and E2E (not TPOT/ITL): a duration such as 21ms (default 0), or "
        "profile:NAME, the set-up NAME's latency fitted in the GPU profile (fit.set_up_frontend_s), or "
        "profile:FILE.json, the fit.frontend_s of your own `kvledger calibrate --scope gpu --fit-frontend --out "
        "FILE.json`."),
    sweep: bool = typer.Option(False, "--sweep", help="The files are one load sweep (over rates, or clients at rate "
                                                      "inf): per-stage errors, knees, saturation throughput, bands."),
    step_cost: str = typer.Option("roofline", "--step-cost", help="roofline, calibrated, calibrated:KEY, or a "
                                                                  "PROFILE.json from `kvledger calibrate`."),
    client_concurrency: int | None = typer.Option(None, "--client-concurrency", help="Aggregate-only files: the "
        "client's cap N on requests in flight (vllm bench serve / SGLang --max-concurrency, AIPerf --concurrency): a "
        "run at rate inf is a closed loop of N clients, one at a rate paced under N; the file's max_concurrency wins. "
        "An inference-perf stage whose client fell behind its rate is paced under this flag, else its config.yaml's "
        "num_workers × worker_max_concurrency."),
    run: int | None = typer.Option(None, "--run", min=0, help="A file of several runs (vllm bench sweep's "
                                   "summary.json, bench_serving JSONL lines, aggregate or per-request): validate run "
                                   "N alone (0 = the first); without it the runs are one sweep."),
    seed: int = typer.Option(0, "--seed", help="Aggregate-only stage files: seed of the synthetic workload."),
    slo: str | None = typer.Option(None, "--slo", help="Also compare goodput under these SLOs: ttft=200ms,tpot=50ms."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    verbose: Verbose = False,
) -> None:
    """Replay a measured run through the simulator: TTFT, ITL, TPOT, E2E (mean, p50, p90, p99), throughput and goodput,
    predicted vs measured, with the 80% error band of the figures the run is judged on."""
    from kvledger.calibration.validate import validate_file, validate_sweep
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo

    args = engine_args(model, gpu, ctx.params, step_cost=step_cost)
    if sweep or len(files) > 1:
        if run is not None or slo:
            raise InputError("--run picks one run of one file: give one file, without --sweep" if run is not None else
                             "--slo compares goodput request by request: give one per-request file without --sweep")
        result = validate_sweep(files, args, max_paddings, client_concurrency=client_concurrency, seed=seed)
    else:
        result = validate_file(files[0], args, parse_slo(slo) if slo else None, max_paddings=max_paddings,
                               client_concurrency=client_concurrency, seed=seed, run=run)
    if as_json:
        from kvledger.accounting.calibration_profile import dump_profile

        typer.echo(dump_profile(result.to_dict()), nl=False)
        return
    _show(result, gpu, verbose)


def _show(result, gpu: str | None, verbose: bool = False) -> None:
    """The validation as tables, then the GPU alias note (as plan and simulate print it)."""
    from rich.console import Console

    from kvledger.report.calibration_view import render_validation
    from kvledger.report.tables import print_gpu_alias_note

    render_validation(result, Console(emoji=False), verbose)
    if gpu is not None:  # a GPU from the run's record is named in the notes, by its catalog row
        print_gpu_alias_note(Console(emoji=False), gpu)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
