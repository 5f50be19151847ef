"""Flag groups several commands take (workload, engine, pricing), each declared once, and the decorator adding one.

A group is a frozen dataclass whose fields carry their flag names and help (:func:`flag`). A command asks for a group
by a parameter annotated with its type, listed in :func:`with_groups`, which replaces it by one typer option per field
(in the group's order) and hands the command the filled dataclass; a command may take a subset (``only``), other
defaults, a help prefix such as ``[--simulate]`` or its own help for a field. Ranges: :mod:`kvledger.cli.limits`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from kvledger.cli.flag_field import flag
from kvledger.cli.link_flags import INTER_NODE_LINK_HELP
from kvledger.cli.sglang_names import SglangNames
from kvledger.cli.tier_flags import SIM_ONLY, TierFlags  # kept importable from here, as the other groups

__all__ = ["flag", "flag_like", "flag_of", "given_flags", "option", "option_info", "GroupUse", "with_groups",
           "WorkloadFlags", "EngineFlags", "TierFlags", "SIM_ONLY"]  # pricing_flags.py, session_flags.py: two more


def flag_like(cls: type, name: str, default: Any = None, *, help: str | None = None,  # noqa: A002
              also: tuple[str, ...] = ()) -> Any:
    """A field of another group that takes field ``name`` of group ``cls``: its spellings (``also`` added after them)
    and its help unless the command gives its own."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return flag(*f.metadata["decls"], *also, help=help or f.metadata["help"], default=default)


def flag_of(cls: type, name: str) -> str:
    """The long flag of field ``name`` of group ``cls`` (``--enable-prefix-caching`` for ``prefix_caching``)."""
    return {f.name: f.metadata["decls"] for f in dataclasses.fields(cls)}[name][0].split("/")[0]


def option(cls: type, name: str, default: Any = None, *, help: str | None = None, also: tuple[str, ...] = ()) -> Any:
    """A default-style ``typer.Option`` for one field of a group, for a command that takes that flag alone (its
    spelling from the group; ``also``: older spellings kept as aliases; ``help``: the command's own text)."""
    import typer  # here, not at the top: the simulate quick path (quick_argv.py) reads the groups without typer

    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return typer.Option(default, *f.metadata["decls"], *also, help=help or f.metadata["help"])


def option_info(cls: type, name: str, *, help: str | None = None, show_default: bool = False) -> Any:  # noqa: A002
    """A ``typer.Option`` without a default, for ``Annotated[type, ...]`` aliases of one field of a group (spelling
    from the group; ``help``: the command's own text)."""
    import typer

    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return typer.Option(*f.metadata["decls"], help=help or f.metadata["help"], show_default=show_default)


def given_flags(*groups: Any) -> list[str]:
    """The flags of every field left not None in ``groups``, in declaration order."""
    return [flag_of(type(g), f.name) for g in groups for f in dataclasses.fields(g) if getattr(g, f.name) is not None]


@dataclass(frozen=True, slots=True)
class WorkloadFlags:
    """The workload: a trace or a synthetic one, its length, and how requests arrive (open or closed loop)."""

    trace: str | None = flag("--trace", help=(
        "azure-conv (default), azure-code, mooncake, mooncake-synthetic, arxiv, or a CSV/JSONL path with "
        "columns arrival_s (s), num_prompt_tokens, num_output_tokens (Azure 2023/2024, BurstGPT, Vidur and "
        "Mooncake layouts are detected too); times are shifted to start at 0."))
    rate: float | None = flag("--rate", help=(
        "Target mean arrival rate, req/s (gaps rescaled, burstiness kept); 'inf' sends all at t=0."))
    rate_scale: float | None = flag("--rate-scale", help="Multiply the trace's own rate by this factor.")
    num_requests: int | None = flag("--num-requests", help=(
        "Replay only the first N requests (default: the whole trace; 2,000 per probe of a --target search or "
        "of cost's capacity search)."))
    seed: int | None = flag("--seed", help="RNG seed for synthetic or Poisson arrivals (default 0).")
    concurrency: int | None = flag("--concurrency", help=(
        "Closed loop: N users, each sends its next request when the last one ends (trace arrival times "
        "ignored); with --rate or --rate-scale, paced like `vllm bench serve --request-rate R --max-concurrency N`: "
        "each request at its arrival time, or when one of the N frees."))
    think_time: float | None = flag("--think-time", help="Closed loop: seconds a user waits for its next request.")
    prompt_lengths: str | None = flag("--prompt-lengths", help=(
        "Synthetic workload instead of a trace: prompt lengths in tokens, N or fixed:N (every prompt N tokens), "
        "uniform:LOW:HIGH, "
        "exp:MEAN:CAP (exponential, cut at CAP), lognormal:MEDIAN:SIGMA[:LOW[:HIGH]] (MEDIAN is the median, not the "
        "mean: the mean is MEDIAN × e^(SIGMA²/2)), trace:NAME:prompt|output (a trace's own lengths) or a mixture "
        "mix:W*DIST,W*DIST (weights divided by their sum), e.g. lognormal:1000:0.8 or mix:0.9*fixed:2K,0.1*fixed:100K "
        "(with --output-lengths, --rate or --concurrency, --num-requests)."))
    output_lengths: str | None = flag("--output-lengths", help="Synthetic: output lengths, as --prompt-lengths.")
    arrival_cv: float | None = flag("--arrival-cv", help=(
        "Synthetic workload: CV of inter-arrival gaps (default 1 = Poisson; 0 = a fixed interval of exactly 1/rate, "
        "as a fixed-interval benchmark timer sends; >1 bursty)."))
    shared_prefix_tokens: int | None = flag("--shared-prefix-tokens", help=(
        "Every prompt starts with the same N-token system prompt (a prompt shorter than N is left unshared), which "
        "prefix caching reuses; part of the prompt lengths, not added. Not with hash ids (mooncake) or sessions."))
    document_pool: str | None = flag("--document-pool", help=(
        "RAG over a set of documents: K:L[:zipf=S] (or :uniform, the default), e.g. 200:60000:zipf=1.0 — K "
        "documents of L tokens (a count or a length distribution as --prompt-lengths), one drawn per request "
        "(Zipf: P(rank k) ∝ k^-S); each prompt is the shared prefix (if given), the document, then a question of "
        "--prompt-lengths tokens. Prefix caching reuses the documents; the output sets the expected hit rate (LRU "
        "formula) beside the simulated one per KV tier."))


@dataclass(frozen=True, slots=True)
class EngineFlags(SglangNames):
    """The simulated engine: vLLM's (or SGLang's) settings, the replicas behind a router, and the step-cost model."""

    engine_version: str | None = flag("--engine-version", help=(
        "vLLM version whose defaults to apply; with --policy sglang, the SGLang release's (0.4.0 on)."))
    tp: int | None = flag("--tp", "--tensor-parallel-size", help=(
        "Tensor-parallel degree (default 1); GPUs = replicas × TP."))
    enable_expert_parallel: bool | None = flag("--enable-expert-parallel/--no-enable-expert-parallel", help=(
        "vLLM --enable-expert-parallel (data parallel 1): a MoE model's experts whole over the TP ranks instead of "
        "sliced; the busiest rank's weights and expert work (load imbalance), no all-to-all. vLLM only."))
    max_model_len: str | None = flag("--max-model-len", help=(
        "Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config."))
    gpu_memory_utilization: float | None = flag("--gpu-memory-utilization", help=(
        "vLLM fraction of device memory (not with --policy sglang)."))
    mem_fraction_static: float | None = flag("--mem-fraction-static", help=(
        "With --policy sglang: SGLang's fraction (default computed as SGLang does; the pool is SGLang's, as "
        "`kvledger plan --engine sglang`)."))
    kv_cache_dtype: str | None = flag("--kv-cache-dtype", help=(
        "vLLM's names: auto (default), bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc; with --policy sglang "
        "SGLang's: auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2 (0.5.23; fewer in older releases)."))
    quantization: str | None = flag("--quantization", "-q", help=(
        "vLLM --quantization fp8 (or bitsandbytes to vLLM 0.27; refused from 0.28): an unquantized checkpoint's "
        "linear weights quantized on load, as `kvledger plan -q fp8` plans them: the bytes freed go to the KV pool, "
        "and every step "
        "reads the quantized weights; a quantized checkpoint's own method plans as auto. vLLM only: not with "
        "--policy sglang."))
    block_size: int | None = flag("--block-size", help=(
        "Tokens per KV block (vLLM default 16); with --policy sglang, SGLang's page size (default 1)."))
    max_num_batched_tokens: str | None = flag("--max-num-batched-tokens", help="Token budget per step.")
    max_num_seqs: int | None = flag("--max-num-seqs", help="Most running requests per replica.")
    num_gpu_blocks_override: int | None = flag("--num-gpu-blocks-override", help="Fix the KV block count.")
    prefix_caching: bool | None = flag("--enable-prefix-caching/--no-enable-prefix-caching", help=(
        "Automatic prefix caching (default on, as vLLM v1)."))
    chunked_prefill: bool | None = flag("--enable-chunked-prefill/--no-enable-chunked-prefill", help=(
        "Chunked prefill (default on, as vLLM v1)."))
    policy: str | None = flag("--policy", "--engine", help=(
        "Preset: vllm (hash cache, FCFS), sglang (SGLang's scheduler and radix cache, FCFS: its default "
        "schedule_policy; the KV pool, page size, chunked_prefill_size and max_running_requests from SGLang's"
        " memory plan), static (static batching), contiguous (max_model_len reserved per request); alias --engine."))
    prefix_caching_policy: str | None = flag("--prefix-caching-policy", help="vllm or sglang.")
    scheduling_policy: str | None = flag("--scheduling-policy", help="fcfs or lpm.")
    batching: str | None = flag("--batching", help=(
        "continuous (vLLM v1, default), static, vllm_v0 (V0 prefill-first; with --no-enable-chunked-prefill "
        "--no-enable-prefix-caching) or sglang (SGLang's scheduler)."))
    kv_allocation: str | None = flag("--kv-allocation", help="paged or contiguous.")
    async_scheduling: bool | None = flag("--async-scheduling/--no-async-scheduling", help=(
        "vLLM v1 async scheduling (default: as --engine-version does it; on from 0.14)."))
    long_prefill_token_threshold: int | None = flag("--long-prefill-token-threshold", help=(
        "vLLM: cap one request's prefill chunk per step at N tokens, so short prompts share the step with a long one "
        "(default 0: no cap; V1 reads it from 0.8.5; from 0.31 not while a request is alone). vLLM only."))
    long_prefill_token_threshold_adaptive: bool | None = flag(
        "--long-prefill-token-threshold-adaptive/--no-long-prefill-token-threshold-adaptive", help=(
            "vLLM ≥ 0.31: floor --long-prefill-token-threshold at max_num_batched_tokens ÷ (running + waiting "
            "requests) each step (default off; no effect without a threshold)."))
    max_num_partial_prefills: int | None = flag("--max-num-partial-prefills", help=(
        "vLLM V0's concurrent partial prefills (≤ 0.26): V1 never runs them; 1 (default) accepted, others refused."))
    max_long_partial_prefills: int | None = flag("--max-long-partial-prefills", help=(
        "vLLM V0's limit on long prompts prefilled at once (≤ 0.26): as --max-num-partial-prefills."))
    prefix_cache_retention_interval: int | None = flag("--prefix-cache-retention-interval", help=(
        "vLLM ≥ 0.29: besides the replay boundary and shared-prefix junction (the default 0), keep sliding-window "
        "blocks and Mamba states at every multiple of N tokens in the prefix cache (a multiple of the block size); "
        "0.23–0.28: as VLLM_PREFIX_CACHE_RETENTION_INTERVAL=N set, N > 0."))
    enforce_eager: bool | None = flag("--enforce-eager/--no-enforce-eager", help=(
        "vLLM --enforce-eager: no CUDA graphs; the step cost adds the eager launch time "
        "(accounting/host_overhead.py)."))
    wddm: bool | None = flag("--wddm/--no-wddm", help=(
        "Windows or WSL2: CUDA reports the whole board and the display driver's hold is in use; the pool is planned "
        "as `kvledger plan --wddm` plans it (a vLLM plan says whether it starts; not on server-module GPUs)."))
    mxfp4_backend: str | None = flag("--mxfp4-backend", help=(
        "vLLM's backend for MXFP4 experts (gpt-oss), as `kvledger plan --mxfp4-backend`: auto (default; what pip "
        "install vllm==VERSION runs on the GPU), marlin, triton, flashinfer_trtllm or flashinfer_cutlass."))
    replicas: int | None = flag("--replicas", help="Identical engine replicas behind a router (default 1).")
    router: str | None = flag("--router", help=(
        "round_robin (default), least_loaded, prefix_aware (sgl-router's cache-aware rule) or session_affinity "
        "(a session's requests stay on one replica: a trace's client ids, e.g. Bailian conversations, or "
        "--workload sessions)."))
    step_cost: str | None = flag("--step-cost", help=(
        "roofline (default; from the plan); calibrated (bundled measurements for this model, GPU and TP, when they "
        "exist); or calibrated:SOURCE:MODEL@GPU/tpN to pick a bundled table by key (e.g. calibrated:vidur:meta-llama/"
        "Llama-2-7b-hf@h100-80gb/tp1; 'calibrated' without one lists them); or PROFILE.json, from kvledger calibrate."))
    disable_hybrid_kv_cache_manager: bool | None = flag("--disable-hybrid-kv-cache-manager", help=(
        "vLLM flag: sliding/chunked layers allocated as full: the plan's pool and the simulated blocks per request."))
    mamba_ssm_cache_dtype: str | None = flag("--mamba-ssm-cache-dtype", help=(
        "vLLM flag: the Mamba / linear-attention SSM state dtype: auto (default), float32, float16, bfloat16."))
    cpu_overhead: str | None = flag("--cpu-overhead", help="Per-step CPU time added to the roofline, e.g. 2ms.")
    client_latency: str | None = flag("--client-latency", help=(
        "The client's and server front end's latency (HTTP, gateway, tokenisation, SSE), e.g. 21ms: added to every "
        "request's TTFT and E2E, not TPOT/ITL (default 0; the engine simulator does not model it; fit it with "
        "`kvledger calibrate --scope gpu --fit-frontend`)."))
    achievable_flops_fraction: float | None = flag("--achievable-flops-fraction", help=(
        "Roofline: share of peak FLOP/s matmuls reach, flat (an assumption); with --gemm-efficiency measured, the "
        "scale on the GPU's measured efficiency instead. Default: 1.0 × the measured efficiency for dense BF16 "
        "models on the H100/A100 SXM that Vidur profiled and the GPUs on their dies (H200 SXM, GH200, A100 40GB "
        "SXM), 0.7 elsewhere."))
    achievable_bandwidth_fraction: float | None = flag("--achievable-bandwidth-fraction", help="Roofline: share of "
                                                       "peak HBM bandwidth kernels reach (default 0.8, an assumption).")
    allreduce_link_share: float | None = flag("--allreduce-link-share", help=(
        "TP all-reduces: the share of the link's one-direction bandwidth they achieve, in (0, 1] (default: a GPU "
        "profile's fitted share, else 0.35 over PCIe (measured 0.20–0.65; e.g. 0.6 with peer access behind PCIe "
        "switches) and the catalog link over NVLink)."))
    inter_node_link: str | None = flag("--inter-node-link", help=INTER_NODE_LINK_HELP)
    gpu_profile: str | None = flag("--gpu-profile", help=(
        "GPU-scope calibration pricing the roofline: a FILE from `kvledger calibrate --scope gpu` (fitted on this GPU; "
        "any model), 'none', a bundled one by name (bundled:h100-sxm: opt-in, not the H100 default), or (default) "
        "the GPU's default bundled one where the data has runs."))
    gemm_efficiency: str | None = flag("--gemm-efficiency", help=(
        "Roofline weight matmuls: measured (the fraction scales the GPU's measured efficiency against tokens in the "
        "step and GEMM size, from operator profiles of the A100, H100 and RTX PRO 6000; without a fraction or "
        "profile, as measured; each layer's norm, RoPE, activation and add kernels priced too; flat on other GPUs) "
        "or flat (one FLOP fraction, no kernel term), or carried (as a GPU nobody profiled: flat, with the kernel "
        "floors and bandwidth share carried from the other profiled GPUs; with --gpu-profile none). Default: the GPU "
        "profile's, else measured."))
    ep_size: int | None = flag("--ep-size", "--expert-parallel-size", help=(
        "SGLang's expert-parallel size (--engine sglang): --ep-size equal to --tp runs a MoE model's routed experts "
        "whole, E/ep on each GPU (each step waits for the busiest); 1 simulates as without it; sizes SGLang refuses "
        "are refused."))
    enable_ep_moe: bool | None = flag("--enable-ep-moe", help=(  # None, not False: sim_request drops Nones
        "SGLang 0.4.x's EP = TP flag: not modelled; refused, naming --enable-expert-parallel."))


@dataclass(frozen=True)
class GroupUse:
    """How one command takes a group: which fields, other defaults, a help prefix, its own help for some fields, and
    which spelling a range error names (``first_spelling``: the first, as for a plain ``typer.Option`` parameter, so a
    command whose options became a group keeps its messages; else the last long one, or the field's name)."""

    cls: type
    only: tuple[str, ...] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    prefix: str = ""
    help: Mapping[str, str] = field(default_factory=dict)
    first_spelling: bool = False

    def fields(self) -> list[dataclasses.Field]:
        fs = dataclasses.fields(self.cls)
        return fs if self.only is None else [f for f in fs if f.name in self.only]

    def parameters(self) -> list[inspect.Parameter]:
        """One typer option per field, typed as the field, default and help as this command takes it."""
        import typer

        hints, extras = typing.get_type_hints(self.cls), typing.get_type_hints(self.cls, include_extras=True)
        out = []
        for f in self.fields():
            default = self.defaults.get(f.name, f.default)
            if "decls" not in f.metadata:  # a field typed Annotated[type, typer.Option(...)] (bill_opts.py) keeps it
                out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                             annotation=extras[f.name]))
                continue
            text = self.prefix + self.help.get(f.name, f.metadata["help"])
            decls = (..., *f.metadata["decls"]) if self.first_spelling else f.metadata["decls"]  # limits._flag_of
            option = typer.Option(*decls, help=text, show_default=default is not None)
            out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                         annotation=Annotated[hints[f.name], option]))
        return out

    def build(self, values: dict[str, Any]) -> Any:
        """The group from the command's parsed values (popped); fields the command does not take keep their default."""
        return self.cls(**{f.name: values.pop(f.name) for f in self.fields()})


def with_groups(**uses: type | GroupUse) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: each parameter named in ``uses`` becomes its group's options, and the command receives the group."""
    groups = {name: u if isinstance(u, GroupUse) else GroupUse(u) for name, u in uses.items()}

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        params: list[inspect.Parameter] = []
        for p in sig.parameters.values():
            if p.name in groups:
                params += groups[p.name].parameters()
            elif params and params[-1].kind is inspect.Parameter.KEYWORD_ONLY:  # nothing positional after a group
                params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            else:
                params.append(p)

        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            for name, use in groups.items():
                kwargs[name] = use.build(kwargs)
            return fn(*args, **kwargs)

        command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty}
        return command

    return decorate
