"""``kvledger plan``: the KV-cache ledger for a model on a GPU under an engine's rules."""

from __future__ import annotations

import dataclasses

import typer

from kvledger import strict_json
from kvledger.cli.flag_groups import SIM_ONLY, EngineFlags, GroupUse, TierFlags, option, with_groups

__all__ = ["register"]


def _bytes_opt(v: str | None, what: str) -> int | None:
    from kvledger.units import parse_memory_flag

    return None if v is None else parse_memory_flag(v, what=what)


#: the tier flags plan takes: all but the simulated rules (a plan sizes the tiers, it runs no store or eviction rule)
_TIERS = GroupUse(TierFlags, only=tuple(f.name for f in dataclasses.fields(TierFlags) if f.name not in SIM_ONLY))


@with_groups(tiers=_TIERS)
def plan(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias; see `kvledger models`), a config.json path "
                                          "or folder, or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a .json/.toml GPU file."),
    engine: str = typer.Option("vllm", "--engine", help="vllm, sglang or trtllm (also tensorrt-llm, trt-llm)."),
    engine_version: str | None = option(EngineFlags, "engine_version", help="vLLM version whose rules to apply "
                                                                            "(default: newest read, 0.33.0); with "
                                                                            "--engine trtllm, a version before 1.0 "
                                                                            "selects the TensorRT-engine executor; "
                                                                            "with --engine sglang, the release's "
                                                                            "mem_fraction_static default (0.4.0 on)."),
    tp: int = option(EngineFlags, "tp", 1, help="Tensor-parallel degree."),
    pp: int = typer.Option(1, "--pp", "--pipeline-parallel-size", help="Pipeline-parallel degree (vLLM): the stage "
                                                                       "with the fewest KV blocks binds."),
    max_model_len: str | None = option(EngineFlags, "max_model_len", help="Tokens (8192, 8K, 128K); default: from the "
                                                                          "config."),
    context: list[str] | None = typer.Option(None, "--context", help="Context length(s) to report concurrency at; "
                                                                     "repeat or comma-separate (8K,128K)."),
    gpu_memory_utilization: float | None = option(EngineFlags, "gpu_memory_utilization", help="vLLM fraction of the "
        "device total (default by version)."),
    mem_fraction_static: float | None = option(EngineFlags, "mem_fraction_static", help="SGLang fraction (default "
        "computed as SGLang does)."),
    free_gpu_memory_fraction: float | None = typer.Option(None, "--free-gpu-memory-fraction", help="TensorRT-LLM "
        "fraction of free memory (default 0.9)."),
    kv_cache_dtype: str = option(EngineFlags, "kv_cache_dtype", "auto", help="auto, bf16, fp16, fp8, fp8_e4m3, "
                                                                             "fp8_e5m2."),
    dtype: str = typer.Option("auto", "--dtype", help="vLLM --dtype: auto, bfloat16, float16, float32 (weights, "
                                                      "activations, auto KV)."),
    quantization: str | None = typer.Option(None, "--quantization", "-q", help="vLLM --quantization fp8: quantize an "
                                                                               "unquantized checkpoint on load."),
    max_num_batched_tokens: str | None = option(EngineFlags, "max_num_batched_tokens", help="Token budget per step "
        "(default by GPU and version)."),
    max_num_seqs: int | None = option(EngineFlags, "max_num_seqs", help="Running requests cap (default by GPU and "
                                                                        "version)."),
    block_size: int | None = option(EngineFlags, "block_size", help="Tokens per KV block (default 16, or the "
                                                                    "backend's)."),
    available_kv_memory: str | None = typer.Option(None, "--available-kv-memory", help="Your engine's printed "
        "'Available KV cache memory' (e.g. 51.38GiB; a bare number is GiB, as for every size flag)."),
    num_gpu_blocks_override: int | None = option(EngineFlags, "num_gpu_blocks_override", help="vLLM's flag: fix the "
        "block count."),
    weights_memory: str | None = typer.Option(None, "--weights-memory", help="Measured weight memory (e.g. 14.99GiB; "
                                                                             "bare: GiB) instead of the computed one."),
    activation_peak: str | None = typer.Option(None, "--activation-peak", help="Measured activation peak instead of "
                                                                               "the model."),
    non_torch_memory: str | None = typer.Option(None, "--non-torch-memory", help="Measured non-torch memory instead of "
        "the model (by vLLM version, TP and PP)."),
    cudagraph_memory: str | None = typer.Option(None, "--cudagraph-memory", help="Your log's 'Estimated CUDA graph "
        "memory'."),
    gpu_memory: str | None = typer.Option(None, "--gpu-memory", help="Device total as CUDA reports it (e.g. 79.18GiB; "
                                                                     "a bare number is GiB), overriding the catalog; "
                                                                     "at most the largest catalog GPU's."),
    gpu_bandwidth: float | None = typer.Option(None, "--gpu-bandwidth", help="HBM bandwidth, TB/s (10^12 B/s), "
                                                                             "overriding the catalog."),
    gpu_bf16_tflops: float | None = typer.Option(None, "--gpu-bf16-tflops", help="Dense BF16 tensor peak, TFLOP/s, "
        "overriding the catalog."),
    achievable_flops_fraction: float | None = option(EngineFlags, "achievable_flops_fraction", help="Roofline: share "
        "of peak FLOP/s matmuls reach (default: the GPU profile's, else 0.7, an assumption)."),
    achievable_bandwidth_fraction: float | None = option(EngineFlags, "achievable_bandwidth_fraction", help="Roofline: "
        "share of peak HBM bandwidth kernels reach (default: the GPU profile's, else 0.8, an assumption)."),
    gpu_profile: str | None = option(EngineFlags, "gpu_profile", help="Roofline view priced by a GPU-scope "
        "calibration: a FILE from `kvledger calibrate --scope gpu` fitted on this GPU, or none (default: the GPU's "
        "bundled profile if it has one, else the assumed 0.7 / 0.8)."),
    disable_hybrid_kv_cache_manager: bool = typer.Option(False, "--disable-hybrid-kv-cache-manager", help="vLLM flag: "
        "allocate sliding/chunked layers as full."),
    enable_prefix_caching: bool | None = option(EngineFlags, "prefix_caching", help="vLLM flag (default: the "
        "version's; on for hybrid models from 0.26): sets the Mamba cache mode, hence state pages per request."),
    tiers: TierFlags = TierFlags(),
    link_fraction: float = typer.Option(0.8, "--link-fraction",
        help="Achievable share of the host link's per-direction peak."),
    suffix_tokens: int = typer.Option(1, "--suffix-tokens",
        help="New tokens after the cached prefix in the break-even (≥ 1)."),
    disable_custom_all_reduce: bool = typer.Option(False, "--disable-custom-all-reduce", help="vLLM flag: no custom "
        "all-reduce buffers (off the non-torch term as far as the version's profile counts them: none from 0.11)."),
    enforce_eager: bool = typer.Option(False, "--enforce-eager", help="vLLM flag: no CUDA graphs (no 0.20+ estimate; "
        "from 0.18 the pre-0.18 non-torch term, graph profiling skipped)."),
    distributed_executor_backend: str | None = typer.Option(None, "--distributed-executor-backend", help="vLLM: mp or "
        "ray (no memory term changes in the code read; the plan's notes say why)."),
    nnodes: int = typer.Option(1, "--nnodes", help="Nodes the TP×PP group spans (custom all-reduce is off when a "
                                                   "TP group spans nodes, ceil(nnodes / pp) > 1, and under vLLM's own "
                                                   "--nnodes: mp across nodes from 0.11.1)."),
    sampler_backend: str = typer.Option("auto", "--sampler-backend",
                                        help="auto (the version's), flashinfer (not on ROCm; from vLLM 0.5.5), "
                                             "pytorch, or aiter (ROCm from vLLM 0.12, VLLM_ROCM_USE_AITER=1)."),
    model_runner: str = typer.Option("auto", "--model-runner", help="vLLM model runner: auto (the version's default "
                                     "for the model; V2 for some from 0.22, all from 0.29), v1 or v2 "
                                     "(VLLM_USE_V2_MODEL_RUNNER=0/1)."),
    cuda_graph_max_batch_size: int | None = typer.Option(None, "--cuda-graph-max-batch-size", help="TensorRT-LLM "
        "cuda_graph_config.max_batch_size (default 128; trtllm-bench sets its max batch size)."),
    no_cuda_graph: bool = typer.Option(False, "--no-cuda-graph", help="TensorRT-LLM PyTorch backend run without CUDA "
        "graphs (cuda_graph_config: null; 0.x use_cuda_graph false): no graph pool. Default: graphs on."),
    wddm: bool = typer.Option(False, "--wddm", help="Windows or WSL2 (any engine): CUDA reports the whole board and "
                              "the display driver's hold is in use; vLLM plans say whether they start."),
    logits_dtype: str | None = typer.Option(None, "--logits-dtype", help="TensorRT-LLM TensorRT engine's logits "
        "dtype, float32 (default) or float16 (ModelOpt/quantize.py checkpoints of bfloat16 models)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Print the whole ledger (every term with its source, "
                                                                "the waterfall, the roofline tables, every note) after "
                                                                "the summary."),
) -> None:
    """The KV-cache ledger: KV bytes per token, the engine's memory split, blocks, concurrency and the roofline."""
    from rich.console import Console

    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import engine_name, make_settings
    from kvledger.catalog.gpu_file import check_device_memory, resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.cli.analysis_opts import list_items
    from kvledger.report.plan_view import render_plan
    from kvledger.units import parse_tokens

    ctxs = (
        tuple(parse_tokens(c, what="--context") for c in list_items(context, "--context"))
        or None
    )
    spec = load_model(model)
    g = resolve_gpu(gpu, memory_bytes=check_device_memory(_bytes_opt(gpu_memory, "--gpu-memory"), "--gpu-memory"),
                    bandwidth_bytes_per_s=gpu_bandwidth * 1e12 if gpu_bandwidth is not None else None,
                    bf16_flops_per_s=gpu_bf16_tflops * 1e12 if gpu_bf16_tflops is not None else None)
    prof = None  # as simulate (step_cost_choice.gpu_profile_of): the GPU's bundled profile unless both fractions given
    if achievable_flops_fraction is None or achievable_bandwidth_fraction is None:
        from kvledger.accounting.gpu_profile import resolve_gpu_profile

        prof = resolve_gpu_profile(gpu_profile, g.name)
    if achievable_flops_fraction is None:
        achievable_flops_fraction = prof.flops_fraction if prof is not None else 0.7
    if achievable_bandwidth_fraction is None:
        achievable_bandwidth_fraction = prof.bandwidth_fraction if prof is not None else 0.8
    settings = make_settings(
        engine=engine_name(engine), engine_version=engine_version, tp=tp, pp=pp,
        max_model_len=parse_tokens(max_model_len, what="--max-model-len") if max_model_len else None, contexts=ctxs,
        gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
        free_gpu_memory_fraction=free_gpu_memory_fraction, kv_cache_dtype=kv_cache_dtype, dtype=dtype.lower(),
        quantization=quantization.lower() if quantization else None,
        max_num_batched_tokens=parse_tokens(max_num_batched_tokens,
                                            what="--max-num-batched-tokens") if max_num_batched_tokens else None,
        max_num_seqs=max_num_seqs, block_size=block_size,
        available_kv_memory_bytes=_bytes_opt(available_kv_memory, "--available-kv-memory"),
        num_gpu_blocks_override=num_gpu_blocks_override, weights_bytes=_bytes_opt(weights_memory, "--weights-memory"),
        activation_peak_bytes=_bytes_opt(activation_peak, "--activation-peak"),
        non_torch_bytes=_bytes_opt(non_torch_memory, "--non-torch-memory"),
        cudagraph_bytes=_bytes_opt(cudagraph_memory, "--cudagraph-memory"),
        disable_hybrid_kv_cache_manager=disable_hybrid_kv_cache_manager, enable_prefix_caching=enable_prefix_caching,
        achievable_flops_fraction=achievable_flops_fraction,
            achievable_bandwidth_fraction=achievable_bandwidth_fraction,
        disable_custom_all_reduce=disable_custom_all_reduce, enforce_eager=enforce_eager, nnodes=nnodes,
        distributed_executor_backend=distributed_executor_backend.lower() if distributed_executor_backend else None,
        sampler_backend=sampler_backend.lower(), model_runner=model_runner.lower(),
        cuda_graph_max_batch_size=cuda_graph_max_batch_size,
        no_cuda_graph=no_cuda_graph, wddm=wddm, trtllm_logits_dtype=logits_dtype.lower() if logits_dtype else None)
    p = build_plan(spec, g, settings)
    priced_by = f"gpu: {prof.label}" if prof is not None else None
    from kvledger.cli.tier_opts import tier_settings, tiers_given

    settings_t = tier_settings(tiers, link_fraction=link_fraction)
    tier_plan = None
    if tiers_given(tiers) or settings_t.any_set:
        from kvledger.accounting.kv_tiers import build_tier_plan

        tier_plan = build_tier_plan(p, settings_t, suffix_tokens=suffix_tokens)
    if as_json:
        d = p.to_dict()
        if priced_by is not None and d.get("roofline") is not None:
            d["roofline"]["priced_by"] = priced_by
        if tier_plan is not None:
            d["kv_tiers"] = tier_plan.to_dict()
        typer.echo(strict_json.dumps(d, indent=2))
    else:
        render_plan(p, Console(emoji=False), verbose=verbose)
        from kvledger.catalog.gpus import gpu_alias_note

        if (alias := gpu_alias_note(gpu)) is not None:
            Console(emoji=False).print(f"note: {alias}", markup=False, highlight=False)
        if priced_by is not None:
            Console(emoji=False).print(f"roofline priced by: {priced_by} (achievable "
                                       f"{p.settings.achievable_flops_fraction:.0%} FLOP/s, "
                                       f"{p.settings.achievable_bandwidth_fraction:.0%} bandwidth)")
        if tier_plan is not None:
            from kvledger.report.kv_tiers_view import render_kv_tiers

            render_kv_tiers(tier_plan, Console(emoji=False))
    if p.advice and p.advice.verdict != "fits":
        raise typer.Exit(code=3)
    startup = p.memory.startup
    if startup is not None and startup.verdict in ("refuses", "runs_out"):  # --wddm: the engine would not start
        raise typer.Exit(code=3)


def register(app: typer.Typer) -> None:
    """Add ``plan`` to the app."""
    app.command("plan")(plan)
