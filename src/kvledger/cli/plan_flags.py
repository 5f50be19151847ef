"""``kvledger plan``'s flags as two groups (``flag_groups.with_groups``), and the model, GPU and plan settings they
give: the engine's memory and scheduler settings with the measured terms and GPU overrides (:class:`PlanFlags`), and the
tier, collective, sampler, runner and TensorRT-LLM flags after the tier group (:class:`PlanMoreFlags`)."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_groups import EngineFlags, flag, flag_like
from kvledger.cli.link_flags import INTER_NODE_LINK_HELP, inter_node_link
from kvledger.cli.sglang_names import SglangNames

__all__ = ["PlanFlags", "PlanMoreFlags", "plan_inputs"]


@dataclass(frozen=True, slots=True)
class PlanFlags(SglangNames):
    """The engine, its memory and scheduler settings, measured terms, GPU overrides and the roofline's fractions."""

    engine: str = flag("--engine", default="vllm", help="vllm, sglang or trtllm (also tensorrt-llm, trt-llm).")
    engine_version: str | None = flag_like(EngineFlags, "engine_version", help=(
        "vLLM version whose rules to apply (default: newest read, 0.33.0); with --engine trtllm, a version before "
        "1.0 selects the TensorRT-engine executor; with --engine sglang, the release's mem_fraction_static default "
        "(0.4.0 on)."))
    tp: int = flag_like(EngineFlags, "tp", 1, help="Tensor-parallel degree.")
    enable_expert_parallel: bool = flag("--enable-expert-parallel", default=False, help=(
        "vLLM flag (data parallel 1): a MoE model's experts whole over the TP ranks (rank 0 holds ceil(E/TP)) instead "
        "of a 1/TP slice of each; the step cost waits for the busiest rank. vLLM only; refused for dense models."))
    ep_size: int | None = flag("--ep-size", "--expert-parallel-size", help=(
        "SGLang's expert-parallel size (--engine sglang): --ep-size equal to --tp plans a MoE model's routed experts "
        "whole, E/ep on each GPU; 1 plans as without it; sizes SGLang refuses (not dividing --tp or the experts) are "
        "refused. TensorRT-LLM's --ep_size is not modelled."))
    moe_a2a_backend: str | None = flag("--moe-a2a-backend", help=(
        "SGLang's MoE all-to-all backend (--engine sglang): none (default: TP all-reduce) or deepep (EP = TP, shared "
        "experts whole on every GPU, DeepEP's reserve); simulate takes it with DP attention (--attn-dp-size)."))
    enable_ep_moe: bool = flag("--enable-ep-moe", default=False, help=(
        "SGLang 0.4.x's EP = TP flag: not modelled; refused, naming kvledger's equivalent "
        "(--enable-expert-parallel)."))
    data_parallel_size: int | None = flag("--data-parallel-size", "--dp-size", "-dp", help=(
        "DP ranks: vLLM's --data-parallel-size (a MoE model needs --enable-expert-parallel: one engine core and KV "
        "pool per rank, experts whole over DP × TP GPUs) or SGLang's --dp-size with --enable-dp-attention (dp "
        "divides --tp). `simulate` runs vLLM's DP ranks too, and SGLang's DP attention at --dp-size = --ep-size "
        "= --tp."))
    all2all_backend: str | None = flag("--all2all-backend", help=(
        "vLLM's expert-parallel all-to-all backend (VLLM_ALL2ALL_BACKEND before 0.11.1), with --data-parallel-size and "
        "--enable-expert-parallel: the rows each GPU's MoE layers run in the profile (default: the version's, "
        "allgather_reducescatter from 0.11); the release's own choices, others refused."))
    enable_dp_attention: bool = flag("--enable-dp-attention", default=False, help=(
        "SGLang flag, with --dp-size N: attention data-parallel inside the TP group (attention TP = tp/N per rank, "
        "each rank its own KV pool; MLP and experts still over all TP GPUs); simulate runs it at --dp-size = --tp. "
        "Deprecated in SGLang 0.5.22 for --attn-dp-size N."))
    attn_dp_size: int | None = flag("--attn-dp-size", help=(
        "SGLang's attention DP size (0.5.22 on): --attn-dp-size N is --enable-dp-attention --dp-size N, the spelling "
        "SGLang deprecates; 1 (its default) is no DP attention."))
    pp: int = flag("--pp", "--pipeline-parallel-size", default=1, help=(
        "Pipeline-parallel degree (vLLM): the stage with the fewest KV blocks binds."))
    max_model_len: str | None = flag_like(EngineFlags, "max_model_len", help=(
        "Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config."))
    context: list[str] | None = flag("--context", help=(
        "Context length(s) to report concurrency at; repeat or comma-separate (8K,128K)."))
    gpu_memory_utilization: float | None = flag_like(EngineFlags, "gpu_memory_utilization", help=(
        "vLLM fraction of the device total (default by version)."))
    mem_fraction_static: float | None = flag_like(EngineFlags, "mem_fraction_static", help=(
        "SGLang fraction (default computed as SGLang does)."))
    free_gpu_memory_fraction: float | None = flag("--free-gpu-memory-fraction", help=(
        "TensorRT-LLM fraction of free memory (default 0.9)."))
    kv_cache_dtype: str = flag_like(EngineFlags, "kv_cache_dtype", "auto", help=(
        "vLLM's names: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc; with --engine sglang SGLang's: "
        "auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2 (0.5.23; fewer in older releases)."))
    dtype: str = flag("--dtype", default="auto", help=(
        "vLLM --dtype: auto, bfloat16, float16, float32 (weights, activations, auto KV)."))
    quantization: str | None = flag_like(EngineFlags, "quantization", help=(
        "vLLM --quantization: fp8 or bitsandbytes (to vLLM 0.27; removed in 0.28) quantize an unquantized "
        "checkpoint on load; a quantized checkpoint's own method (awq, awq_marlin, gptq, …) plans as auto, another "
        "is refused as vLLM refuses it."))
    max_num_batched_tokens: str | None = flag_like(EngineFlags, "max_num_batched_tokens", help=(
        "Token budget per step (default by GPU and version)."))
    max_num_seqs: int | None = flag_like(EngineFlags, "max_num_seqs", help=(
        "Running requests cap (default by GPU and version)."))
    enable_chunked_prefill: bool | None = flag_like(EngineFlags, "chunked_prefill", help=(
        "vLLM flag (default on): off, with no --max-num-batched-tokens, vLLM sets the budget to max(max_model_len, "
        "default) and profiles that many tokens, so the KV pool shrinks (a 128K prompt in one step)."))
    block_size: int | None = flag_like(EngineFlags, "block_size", help=(
        "Tokens per KV block (default 16, or the backend's)."))
    available_kv_memory: str | None = flag("--available-kv-memory", help=(
        "Your engine's printed 'Available KV cache memory' (e.g. 51.38GiB; a bare number is GiB, as for every size "
        "flag)."))
    num_gpu_blocks_override: int | None = flag_like(EngineFlags, "num_gpu_blocks_override", help=(
        "vLLM's flag: fix the block count."))
    weights_memory: str | None = flag("--weights-memory", help=(
        "Measured weight memory (e.g. 14.99GiB; bare: GiB) instead of the computed one."))
    activation_peak: str | None = flag("--activation-peak", help="Measured activation peak instead of the model.")
    non_torch_memory: str | None = flag("--non-torch-memory", help=(
        "Measured non-torch memory instead of the model (by vLLM version, TP and PP)."))
    cudagraph_memory: str | None = flag("--cudagraph-memory", help="Your log's 'Estimated CUDA graph memory'.")
    gpu_memory: str | None = flag("--gpu-memory", help=(
        "Device total as CUDA reports it (e.g. 79.18GiB; a bare number is GiB), overriding the catalog; at most "
        "the largest catalog GPU's."))
    gpu_bandwidth: float | None = flag("--gpu-bandwidth", help=(
        "HBM bandwidth, TB/s (10^12 B/s), overriding the catalog."))
    gpu_bf16_tflops: float | None = flag("--gpu-bf16-tflops", help=(
        "Dense BF16 tensor peak, TFLOP/s, overriding the catalog."))
    achievable_flops_fraction: float | None = flag_like(EngineFlags, "achievable_flops_fraction", help=(
        "Roofline: share of peak FLOP/s matmuls reach (default: the GPU profile's, else 0.7, an assumption)."))
    achievable_bandwidth_fraction: float | None = flag_like(EngineFlags, "achievable_bandwidth_fraction", help=(
        "Roofline: share of peak HBM bandwidth kernels reach (default: the GPU profile's, else 0.8, an assumption)."))
    allreduce_link_share: float | None = flag_like(EngineFlags, "allreduce_link_share")
    gpu_profile: str | None = flag_like(EngineFlags, "gpu_profile", help=(
        "Roofline view priced by a GPU-scope calibration: a FILE from `kvledger calibrate --scope gpu` fitted on "
        "this GPU, or none (default: the GPU's bundled profile if it has one, else the assumed 0.7 / 0.8)."))
    disable_hybrid_kv_cache_manager: bool = flag("--disable-hybrid-kv-cache-manager", default=False, help=(
        "vLLM flag: allocate sliding/chunked layers as full."))
    enable_prefix_caching: bool | None = flag_like(EngineFlags, "prefix_caching", help=(
        "vLLM flag (default: the version's; on for hybrid models from 0.26): sets the Mamba cache mode, hence "
        "state pages per request."))
    mamba_ssm_cache_dtype: str = flag("--mamba-ssm-cache-dtype", default="auto", help=(
        "vLLM flag: the Mamba / linear-attention SSM state dtype: auto (the model dtype, or the model's config hook: "
        "float32 for Nemotron-H), float32, float16 or bfloat16 (config/cache.py MambaDType); conv state stays in "
        "the model dtype."))


@dataclass(frozen=True, slots=True)
class PlanMoreFlags:
    """The flags after the tier group: the tiers' link share and break-even suffix, collectives, executor, sampler,
    model runner and the TensorRT-LLM graph and logits settings."""

    link_fraction: float = flag("--link-fraction", default=0.8, help=(
        "Achievable share of the host link's per-direction peak."))
    suffix_tokens: int = flag("--suffix-tokens", default=1, help=(
        "New tokens after the cached prefix in the break-even (≥ 1)."))
    disable_custom_all_reduce: bool = flag("--disable-custom-all-reduce", default=False, help=(
        "vLLM flag: no custom all-reduce buffers (off the non-torch term as far as the version's profile counts "
        "them: none from 0.11)."))
    enforce_eager: bool = flag("--enforce-eager", default=False, help=(
        "vLLM flag: no CUDA graphs (no 0.20+ estimate; from 0.18 the pre-0.18 non-torch term, graph profiling "
        "skipped)."))
    distributed_executor_backend: str | None = flag("--distributed-executor-backend", help=(
        "vLLM: mp or ray (no memory term changes in the code read; the plan's notes say why)."))
    nnodes: int = flag("--nnodes", default=1, help=(
        "Nodes the TP×PP group spans (vLLM's and SGLang's --nnodes; custom all-reduce is off when a TP group spans "
        "nodes, ceil(nnodes / pp) > 1, "
        "and under vLLM's own --nnodes: mp across nodes from 0.11.1); more ranks than a node of the GPU holds (8 on "
        "an SXM/HGX/OAM board) are planned on the nodes they need, with a warning."))
    inter_node_link: str | None = flag("--inter-node-link", help=INTER_NODE_LINK_HELP)
    sampler_backend: str = flag("--sampler-backend", default="auto", help=(
        "auto (the version's), flashinfer (not on ROCm; from vLLM 0.5.5), pytorch, or aiter (ROCm from vLLM 0.12, "
        "VLLM_ROCM_USE_AITER=1)."))
    model_runner: str = flag("--model-runner", default="auto", help=(
        "vLLM model runner: auto (the version's default for the model; V2 for some from 0.22, all from 0.29), v1 "
        "or v2 (VLLM_USE_V2_MODEL_RUNNER=0/1)."))
    mxfp4_backend: str = flag("--mxfp4-backend", default="auto", help=(
        "vLLM's backend for MXFP4 experts (gpt-oss): auto (what pip install vllm==VERSION runs on the GPU: Marlin on "
        "Hopper up to 0.11.x, whose wheels ship no triton_kernels), marlin, triton, flashinfer_trtllm or "
        "flashinfer_cutlass (vLLM's --moe-backend names); sets the experts' padding and the MoE GEMMs' cost."))
    allow_long_max_model_len: bool = flag("--allow-long-max-model-len", default=False, help=(
        "vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a --max-model-len above the config's own is planned, not refused."))
    max_cudagraph_capture_size: int | None = flag("--max-cudagraph-capture-size", help=(
        "vLLM's largest CUDA-graph batch (default min(2 × max_num_seqs, 512)): fewer graphs, a smaller 0.20+ "
        "estimate."))
    cuda_graph_max_batch_size: int | None = flag("--cuda-graph-max-batch-size", "--cuda-graph-max-bs", help=(
        "TensorRT-LLM cuda_graph_config.max_batch_size (default 128; trtllm-bench sets its max batch size); SGLang's "
        "--cuda-graph-max-bs: the largest decode CUDA graph (default by GPU memory and TP), 2 MiB each in the "
        "default mem_fraction_static's reserve."))
    no_cuda_graph: bool = flag("--no-cuda-graph", "--disable-cuda-graph", default=False, help=(
        "TensorRT-LLM PyTorch backend run without CUDA graphs (cuda_graph_config: null; 0.x use_cuda_graph false): "
        "no graph pool. Default: graphs on. SGLang's --disable-cuda-graph: no decode graphs, whose 2 × max_bs MiB "
        "leave the default fraction's reserve (and, from 0.5.14, no prefill graphs)."))
    disable_prefill_cuda_graph: bool = flag("--disable-prefill-cuda-graph", "--disable-piecewise-cuda-graph",
                                            default=False, help=(
        "SGLang flag (0.5.10 on; --disable-piecewise-cuda-graph before 0.5.14): no prefill CUDA graphs, whose 8 MiB "
        "per captured prefill size (1.5 GiB with MLA) leave the default mem_fraction_static's reserve."))
    wddm: bool = flag("--wddm", default=False, help=(
        "Windows or WSL2 (any engine): CUDA reports the whole board and the display driver's hold is in use; vLLM "
        "plans say whether they start."))
    logits_dtype: str | None = flag("--logits-dtype", help=(
        "TensorRT-LLM TensorRT engine's logits dtype, float32 (default) or float16 (ModelOpt/quantize.py "
        "checkpoints of bfloat16 models)."))


def _bytes_opt(v: str | None, what: str, positive: bool = False) -> int | None:
    from kvledger.units import parse_memory_flag

    return None if v is None else parse_memory_flag(v, what=what, positive=positive)


def _model(model: str, f: PlanFlags):
    """The ModelSpec ``model`` names, once its EP-size flags are refused in words that fit it (a dense model has no
    experts: analyses/ep_flags.py)."""
    from kvledger.analyses.ep_flags import refuse_ep_flags
    from kvledger.catalog.models import load_model

    spec = load_model(model)
    refuse_ep_flags(str(f.engine).lower(), f.tp, f.ep_size, f.enable_ep_moe, spec)
    return spec


def plan_inputs(model: str, gpu: str, f: PlanFlags, m: PlanMoreFlags):
    """(ModelSpec, GpuSpec, PlanSettings, the GPU profile pricing the roofline or None) of ``plan``'s flags; the TP
    all-reduces' link share is ``--allreduce-link-share``, else the profile's fitted one (as ``simulate``'s). Raises
    KvLedgerError subclasses: an unreadable value, an unknown model or GPU, impossible settings."""
    from kvledger.accounting.attn_dp import resolve_attn_dp_size
    from kvledger.accounting.settings import engine_name, make_settings
    from kvledger.accounting.vllm_auto_len import engine_token_flags
    from kvledger.accounting.vllm_ssm_dtype import check_ssm_dtype
    from kvledger.catalog.gpu_file import check_device_memory, resolve_gpu
    from kvledger.cli.analysis_opts import list_items
    from kvledger.cli.kv_dtype_flag import check_kv_dtype_for_engine
    from kvledger.units import parse_tokens

    ctxs = tuple(parse_tokens(c, what="--context") for c in list_items(f.context, "--context")) or None
    spec = _model(model, f)
    g = resolve_gpu(gpu, memory_bytes=check_device_memory(_bytes_opt(f.gpu_memory, "--gpu-memory"), "--gpu-memory"),
                    bandwidth_bytes_per_s=f.gpu_bandwidth * 1e12 if f.gpu_bandwidth is not None else None,
                    bf16_flops_per_s=f.gpu_bf16_tflops * 1e12 if f.gpu_bf16_tflops is not None else None)
    from kvledger.accounting.profile_fractions import plan_view_fractions

    flops, bandwidth, share, prof = plan_view_fractions(f.gpu_profile, g, f.achievable_flops_fraction,
                                                        f.achievable_bandwidth_fraction, f.allreduce_link_share)
    mml, auto, mnbt = engine_token_flags(f.max_model_len, f.max_num_batched_tokens, f.engine, f.engine_version)
    check_kv_dtype_for_engine(f.kv_cache_dtype, engine_name(f.engine), f.engine_version)  # the engine's own names
    dpa, dps = resolve_attn_dp_size(f.attn_dp_size, f.enable_dp_attention, f.data_parallel_size,
                                    engine=engine_name(f.engine), engine_version=f.engine_version, tp=f.tp)
    settings = make_settings(
        engine=engine_name(f.engine), engine_version=f.engine_version, tp=f.tp, pp=f.pp,
        max_model_len=mml, auto_max_model_len=auto,
        contexts=ctxs, gpu_memory_utilization=f.gpu_memory_utilization, mem_fraction_static=f.mem_fraction_static,
        free_gpu_memory_fraction=f.free_gpu_memory_fraction, kv_cache_dtype=f.kv_cache_dtype, dtype=f.dtype.lower(),
        quantization=f.quantization.lower() if f.quantization else None,
        max_num_batched_tokens=mnbt, max_num_seqs=f.max_num_seqs, block_size=f.block_size,
        available_kv_memory_bytes=_bytes_opt(f.available_kv_memory, "--available-kv-memory", positive=True),
        num_gpu_blocks_override=f.num_gpu_blocks_override,
        weights_bytes=_bytes_opt(f.weights_memory, "--weights-memory"),
        activation_peak_bytes=_bytes_opt(f.activation_peak, "--activation-peak"),
        non_torch_bytes=_bytes_opt(f.non_torch_memory, "--non-torch-memory"),
        cudagraph_bytes=_bytes_opt(f.cudagraph_memory, "--cudagraph-memory"),
        disable_hybrid_kv_cache_manager=f.disable_hybrid_kv_cache_manager,
        enable_prefix_caching=f.enable_prefix_caching, mamba_ssm_cache_dtype=check_ssm_dtype(f.mamba_ssm_cache_dtype),
        achievable_flops_fraction=flops, achievable_bandwidth_fraction=bandwidth, allreduce_link_share=share,
        disable_custom_all_reduce=m.disable_custom_all_reduce,
        enforce_eager=m.enforce_eager, nnodes=m.nnodes, enable_expert_parallel=f.enable_expert_parallel,
        inter_node_link_bytes_per_s=inter_node_link(m.inter_node_link),
        data_parallel_size=dps, enable_dp_attention=dpa or None,
        all2all_backend=f.all2all_backend, moe_a2a_backend=f.moe_a2a_backend.lower() if f.moe_a2a_backend else None,
        ep_size=f.ep_size if engine_name(f.engine) == "sglang" and f.ep_size != 1 else None,  # SGLang's; 1: its default
        distributed_executor_backend=m.distributed_executor_backend.lower() if m.distributed_executor_backend else None,
        sampler_backend=m.sampler_backend.lower(), model_runner=m.model_runner.lower(),
        mxfp4_backend=m.mxfp4_backend.lower().replace("-", "_"),
        allow_long_max_model_len=m.allow_long_max_model_len, max_cudagraph_capture_size=m.max_cudagraph_capture_size,
        cuda_graph_max_batch_size=m.cuda_graph_max_batch_size, no_cuda_graph=m.no_cuda_graph, wddm=m.wddm,
        disable_prefill_cuda_graph=m.disable_prefill_cuda_graph or None,
        trtllm_logits_dtype=m.logits_dtype.lower() if m.logits_dtype else None)
    return spec, g, settings, prof
