"""``kvledger simulate``: serve a real or synthetic trace on a simulated engine sized by the memory plan (vLLM's; SGLang's
for ``--policy sglang``)."""

from __future__ import annotations

from pathlib import Path

import typer

from kvledger import strict_json

__all__ = ["register"]

OUT_FILES = ("records.parquet", "steps.parquet", "trace.json", "summary.json")


def simulate(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a GPU file."),
    trace: str = typer.Option("azure-conv", "--trace", help="azure-conv, azure-code, mooncake, mooncake-synthetic, arxiv, or a CSV/JSONL path with columns arrival_s (s), num_prompt_tokens, num_output_tokens (Azure, Vidur and Mooncake layouts are detected too); times are shifted to start at 0."),
    rate: float | None = typer.Option(None, "--rate", help="Target mean arrival rate, req/s (gaps rescaled, burstiness kept); 'inf' sends all at t=0."),
    rate_scale: float | None = typer.Option(None, "--rate-scale", help="Multiply the trace's own rate by this factor."),
    num_requests: int | None = typer.Option(None, "--num-requests", help="Replay only the first N requests."),
    seed: int = typer.Option(0, "--seed", help="RNG seed (Poisson arrivals for a lengths-only trace)."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Closed loop: N users, each sends its next request when the last one ends (trace arrival times ignored)."),
    think_time: float | None = typer.Option(None, "--think-time", help="Closed loop: seconds a user waits before its next request (default 0).", show_default=False),
    engine_version: str | None = typer.Option(None, "--engine-version", help="vLLM version whose defaults to apply."),
    tp: int = typer.Option(1, "--tp", "--tensor-parallel-size", help="Tensor-parallel degree."),
    max_model_len: str | None = typer.Option(None, "--max-model-len", help="Tokens (8192, 8K); default: from the config."),
    gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="vLLM fraction of device memory (not with --policy sglang)."),
    mem_fraction_static: float | None = typer.Option(None, "--mem-fraction-static", help="With --policy sglang: SGLang's fraction (default computed as SGLang does; the pool is SGLang's, as `kvledger plan --engine sglang`)."),
    kv_cache_dtype: str = typer.Option("auto", "--kv-cache-dtype", help="auto, bf16, fp16, fp8, fp8_e4m3, fp8_e5m2."),
    block_size: int | None = typer.Option(None, "--block-size", help="Tokens per KV block (vLLM default 16); with --policy sglang, SGLang's page size (default 1)."),
    max_num_batched_tokens: str | None = typer.Option(None, "--max-num-batched-tokens", help="Token budget per step."),
    max_num_seqs: int | None = typer.Option(None, "--max-num-seqs", help="Most running requests."),
    num_gpu_blocks_override: int | None = typer.Option(None, "--num-gpu-blocks-override", help="Fix the KV block count."),
    prefix_caching: bool | None = typer.Option(None, "--enable-prefix-caching/--no-enable-prefix-caching", help="Automatic prefix caching (default on, as vLLM v1)."),
    chunked_prefill: bool | None = typer.Option(None, "--enable-chunked-prefill/--no-enable-chunked-prefill", help="Chunked prefill (default on, as vLLM v1)."),
    policy: str | None = typer.Option(None, "--policy", help="Preset: vllm (hash cache, FCFS), sglang (SGLang's scheduler and radix cache, FCFS: its default schedule_policy; the KV pool, page size, chunked_prefill_size and max_running_requests from SGLang's memory plan), static (static batching), contiguous (max_model_len reserved per request)."),
    prefix_caching_policy: str | None = typer.Option(None, "--prefix-caching-policy", help="vllm or sglang."),
    scheduling_policy: str | None = typer.Option(None, "--scheduling-policy", help="fcfs or lpm."),
    batching: str | None = typer.Option(None, "--batching", help="continuous (vLLM v1, default), static, vllm_v0 (V0 prefill-first; with --no-enable-chunked-prefill --no-enable-prefix-caching) or sglang (SGLang's scheduler)."),
    kv_allocation: str | None = typer.Option(None, "--kv-allocation", help="paged or contiguous."),
    prompt_lengths: str | None = typer.Option(None, "--prompt-lengths", help="Synthetic workload instead of a trace: prompt lengths, e.g. fixed:512, uniform:1:512, exp:128:1536, lognormal:1000:0.8 (with --output-lengths, --rate or --concurrency, --num-requests)."),
    output_lengths: str | None = typer.Option(None, "--output-lengths", help="Synthetic workload: output lengths (same forms as --prompt-lengths)."),
    arrival_cv: float | None = typer.Option(None, "--arrival-cv", help="Synthetic workload: CV of inter-arrival gaps (default 1 = Poisson)."),
    replicas: int = typer.Option(1, "--replicas", help="Identical engine replicas behind a router."),
    router: str = typer.Option("round_robin", "--router", help="round_robin, least_loaded or prefix_aware."),
    step_cost: str = typer.Option("roofline", "--step-cost", help="roofline (from the plan); calibrated (bundled measurements for this model, GPU and TP, when they exist); or calibrated:SOURCE:MODEL@GPU/tpN to pick a bundled table by key (e.g. calibrated:vidur:meta-llama/Llama-2-7b-hf@h100-80gb/tp1; 'calibrated' without one lists them); or PROFILE.json, a step cost fitted by kvledger calibrate."),
    cpu_overhead: str | None = typer.Option(None, "--cpu-overhead", help="Per-step CPU time added to the roofline (e.g. 2ms)."),
    achievable_flops_fraction: float | None = typer.Option(None, "--achievable-flops-fraction", help="Roofline: share of peak FLOP/s matmuls reach (default 0.7, an assumption).", show_default=False),
    achievable_bandwidth_fraction: float | None = typer.Option(None, "--achievable-bandwidth-fraction", help="Roofline: share of peak HBM bandwidth kernels reach (default 0.8, an assumption).", show_default=False),
    async_scheduling: bool | None = typer.Option(None, "--async-scheduling/--no-async-scheduling", help="vLLM v1 async scheduling (default: as --engine-version does it; on in 0.33)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    out: Path | None = typer.Option(None, "--out", help="Write records.parquet (every request, token times included; goodput and cost read it), steps.parquet (every engine step) and summary.json here."),
    force: bool = typer.Option(False, "--force", help="Allow --out to overwrite existing files."),
    chrome_trace: bool = typer.Option(False, "--chrome-trace", help="With --out, also write trace.json (chrome://tracing / Perfetto; one JSON document, large for long runs)."),
    record_token_times: bool = typer.Option(False, "--record-token-times", help="Keep every token time of every request (on with --out: the records file carries them for ITL SLOs). Off, memory follows the active requests and the ITL distribution is still exact."),
) -> None:
    """Simulate serving a trace: TTFT/ITL/TPOT/E2E distributions, throughput, KV usage, preemptions, prefix-cache hits."""
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec, prepare_run
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.cli.sim_opts import check_loop_flags
    from kvledger.errors import InputError

    check_loop_flags(rate, rate_scale, concurrency, think_time)
    if out is not None:
        from kvledger.cli.outputs import prepare_output_dir

        prepare_output_dir(out, OUT_FILES, force=force, inputs=[trace, step_cost])
    args = SimRequestArgs(
        model=model, gpu=gpu, trace=trace, rate=rate, rate_scale=rate_scale, num_requests=num_requests, seed=seed,
        concurrency=concurrency, think_time_s=think_time or 0.0, engine_version=engine_version, tp=tp,
        max_model_len=max_model_len, gpu_memory_utilization=gpu_memory_utilization,
        mem_fraction_static=mem_fraction_static, kv_cache_dtype=kv_cache_dtype,
        block_size=block_size, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        num_gpu_blocks_override=num_gpu_blocks_override, enable_prefix_caching=prefix_caching,
        enable_chunked_prefill=chunked_prefill, policy=policy, prefix_caching_policy=prefix_caching_policy,
        scheduling_policy=scheduling_policy, batching=batching, kv_allocation=kv_allocation, replicas=replicas,
        router=router, step_cost=step_cost, cpu_overhead=cpu_overhead, async_scheduling=async_scheduling,
        achievable_flops_fraction=achievable_flops_fraction, achievable_bandwidth_fraction=achievable_bandwidth_fraction)
    synthetic = None
    if prompt_lengths is not None or output_lengths is not None or arrival_cv is not None:
        if prompt_lengths is None or output_lengths is None:
            raise InputError("a synthetic workload needs both --prompt-lengths and --output-lengths")
        if trace != "azure-conv":
            raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
        synthetic = SyntheticSpec(prompt_lengths, output_lengths, 1.0 if arrival_cv is None else arrival_cv)
    setup = prepare_run(args, synthetic)
    result = _run(setup, args, record_steps=out is not None, show_progress=not as_json,
                  record_token_times=record_token_times or out is not None)
    from kvledger.analyses.serving.prediction_bands import prediction_bands
    from kvledger.analyses.serving.queue_growth import queue_growth
    from kvledger.invariants import check_sim_summary

    overload = queue_growth(result.records) if setup.workload_info.get("mode", "").startswith("open loop") else None
    payload = {"summary": check_sim_summary(result.summary.to_dict()), "replicas": setup.replicas,
               "router": setup.router if setup.replicas > 1 else None, "engine": result.config, "workload": setup.workload_info,
               "step_cost": setup.cost_info, "overload": overload,
               "error_bands": prediction_bands(setup, result.summary.to_dict()),
               "notes": list(setup.notes) + ([overload["note"]] if overload else [])}
    if out is not None:
        _write_outputs(out, result, payload, chrome_trace)
    if as_json:
        typer.echo(strict_json.dumps(payload, indent=2))
    else:
        from rich.console import Console

        from kvledger.report.simulate_view import render_summary

        render_summary(payload, Console(), out)


def _run(setup, args, record_steps: bool, show_progress: bool, record_token_times: bool):
    """The simulator's result; its records carry the GPU count, offered rate and max_num_seqs (for `kvledger cost`)."""
    from kvledger.analyses.serving.sim_ledgers import run_prepared

    if not show_progress or setup.num_requests < 5000:
        return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times).result
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} requests"),
                  TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task("sim", total=setup.num_requests)
        return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times,
                            progress=lambda done, total: bar.update(task, completed=done, total=total)).result


def _write_outputs(out: Path, result, payload: dict, chrome_trace: bool) -> None:
    """Write the files, each atomically (temporary file + rename): a failure leaves no half-written file."""
    from kvledger.dynamics.outputs.steps_parquet import write_steps_parquet
    from kvledger.evidence.records_parquet import write_parquet
    from kvledger.outputs import write_atomic, write_text_atomic

    write_atomic(out / "records.parquet", lambda tmp: write_parquet(result.records, tmp))
    write_atomic(out / "steps.parquet", lambda tmp: write_steps_parquet(result.steps, tmp))
    if chrome_trace:
        write_text_atomic(out / "trace.json", strict_json.dumps(result.chrome_trace()))
    elif (out / "trace.json").is_file() and not (out / "trace.json").is_symlink():
        # an earlier run's trace (an input there was refused before the work): the folder holds one run only
        (out / "trace.json").unlink()
    write_text_atomic(out / "summary.json", strict_json.dumps(payload, indent=2))


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
