"""``kvledger report``'s flags as four groups (``flag_groups.with_groups``): the API row and the workload
(:class:`ReportRunFlags`), the engine (:class:`ReportEngineFlags`), the bill, volume and decision factors
(:class:`ReportBillFlags`, the shared ones typed by ``bill_opts``) and the outputs (:class:`ReportOutFlags`); and the
``ReportRequest`` they make (:func:`report_request`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.cli import bill_opts as bo
from kvledger.cli.cost_flags import CostFlags
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags, flag, flag_like
from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY

__all__ = ["ReportRunFlags", "ReportEngineFlags", "ReportBillFlags", "ReportOutFlags", "report_request",
           "report_policy", "DEFAULT_OUT", "html_out", "refuse_out_suffix", "HTML_SUFFIXES"]

DEFAULT_OUT = Path("kvledger-report.html")
HTML_SUFFIXES = (".html", ".htm")
"""The names --out may take: the report writes one self-contained HTML file and no other format."""


@dataclass(frozen=True, slots=True)
class ReportRunFlags:
    """The API row to compare with, the workload (a trace, or cost's synthetic one), requests per simulation, the seed
    and the attainment target."""

    api: str | None = flag("--api", help=(
        "API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1' (default: the catalog rows serving the same "
        "model)."))
    trace: str | None = flag("--trace", help=(
        "azure-conv (the default without a synthetic workload), azure-code, mooncake, mooncake-synthetic, or a "
        "CSV/JSONL path with arrival times (the capacity search scales them); arxiv, lengths only: --prompt-lengths "
        "trace:arxiv:prompt --output-lengths trace:arxiv:output."))
    prompt_lengths: str | None = flag_like(WorkloadFlags, "prompt_lengths", help=(
        "Synthetic workload instead of a trace, as cost --simulate takes it: prompt lengths in tokens, N or fixed:N, "
        "uniform:LOW:HIGH, exp:MEAN:CAP, lognormal:MEDIAN:SIGMA[:LOW[:HIGH]], trace:NAME:prompt|output or "
        "mix:W*DIST,W*DIST (with --output-lengths; --num-requests per simulation)."))
    output_lengths: str | None = flag_like(WorkloadFlags, "output_lengths")
    arrival_cv: float | None = flag_like(WorkloadFlags, "arrival_cv")
    num_requests: int = flag("--num-requests", default=2000, help=(
        "Requests per simulation (each probe of the capacity search, each sweep point)."))
    seed: int = flag("--seed", default=0, help="RNG seed of the workload.")
    shared_prefix_tokens: int | None = flag_like(WorkloadFlags, "shared_prefix_tokens")
    document_pool: str | None = flag_like(WorkloadFlags, "document_pool")  # simulate's RAG workload: K:L[:zipf=S]
    target: float = flag("--target", default=0.9, help="Share of requests within the SLO at the capacity, (0, 1].")


@dataclass(frozen=True, slots=True)
class ReportEngineFlags:
    """The engine settings every plan and simulation of the report uses (None: the engine's default)."""

    engine: str | None = flag("--engine", "--policy", help=(
        "vllm (default) or sglang: the engine whose memory plan, scheduler and KV pool the report's plan, capacity "
        "search, latency sweep and cost use (as `plan --engine sglang` and `cost --simulate --policy sglang`); with "
        "sglang the comparison with static batching and contiguous KV, vLLM's presets, is left out. trtllm: "
        "`kvledger plan --engine trtllm` plans it; the simulator has no rules for it."))
    tp: int | None = flag("--tp", "--tensor-parallel-size", help="Tensor-parallel degree (default 1).")
    engine_version: str | None = flag("--engine-version", help="vLLM version whose rules and defaults to apply.")
    max_model_len: str | None = flag("--max-model-len", help=(
        "Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config."))
    gpu_memory_utilization: float | None = flag("--gpu-memory-utilization", help=(
        "vLLM fraction of device memory (not with --engine sglang: --mem-fraction-static)."))
    mem_fraction_static: float | None = flag_like(EngineFlags, "mem_fraction_static", help=(
        "With --engine sglang: SGLang's fraction (default computed as SGLang does), in the report's plan, capacity "
        "search, latency sweep and cost (as `plan --engine sglang --mem-fraction-static F`)."))
    kv_cache_dtype: str | None = flag("--kv-cache-dtype", help=(
        "vLLM's names: auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, fp8_inc; with --engine sglang SGLang's: "
        "auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2 (0.5.23; fewer in older releases)."))
    quantization: str | None = flag_like(EngineFlags, "quantization", help=(
        "vLLM --quantization fp8: weights quantized on load, in every plan and simulation of the report."))
    max_num_seqs: int | None = flag("--max-num-seqs", help="Most running requests per replica.")
    replicas: int | None = flag_like(EngineFlags, "replicas", help=(
        "Engine replicas behind a round_robin router priced as one deployment unit, as `cost --simulate --replicas "
        "N`: every simulation of the report runs N replicas, the capacity is the unit's, GPUs = N × TP (default 1)."))
    enable_expert_parallel: bool | None = flag_like(EngineFlags, "enable_expert_parallel", help=(
        "vLLM --enable-expert-parallel (data parallel 1), in every plan and simulation of the report: a MoE model's "
        "experts whole over the TP ranks instead of sliced (cost --simulate's flag); refused for a dense model."))
    ep_size: int | None = flag_like(EngineFlags, "ep_size", help=(
        "SGLang's expert-parallel size (--engine sglang), in every plan and simulation of the report: --ep-size "
        "equal to --tp runs a MoE model's routed experts whole (as cost --simulate); with --attn-dp-size N "
        "(or --enable-dp-attention --dp-size N) the DP ranks are simulated at --ep-size N = --tp."))
    step_cost: str | None = flag("--step-cost", help="roofline (default) or calibrated (see kvledger simulate --help).")
    gpu_profile: str | None = flag_like(EngineFlags, "gpu_profile")
    gemm_efficiency: str | None = flag_like(EngineFlags, "gemm_efficiency")
    allreduce_link_share: float | None = flag_like(EngineFlags, "allreduce_link_share")
    wddm: bool = flag_like(EngineFlags, "wddm", False)
    client_latency: str | None = flag_like(EngineFlags, "client_latency")


@dataclass(frozen=True, slots=True)
class ReportBillFlags:
    """Sizing, volume, the GPU's price, the API mix, people and the decision factors."""

    utilization: float | None = flag("--utilization", help=(
        "Without a monthly volume: average load ÷ capacity over the billed hours, (0, 1], one replica (default: "
        "--max-utilization); refused with a volume, whose realized utilization is priced."))
    monthly_tokens: bo.MonthlyTokens = None
    monthly_requests: bo.MonthlyRequests = None
    monthly_input_tokens: bo.MonthlyIn = None
    monthly_output_tokens: bo.MonthlyOut = None
    peak_to_mean: bo.PeakToMean = 1.0
    max_utilization: float = flag("--max-utilization", default=0.8, help=(
        "Highest utilization per replica when sizing for a monthly volume."))
    gpu_provider: str | None = flag("--gpu-provider", help=(
        "Rental provider (default: the cheapest row listed for the GPU, stated in the report)."))
    instance: str | None = flag_like(CostFlags, "instance")  # cost's option: the same spelling, help and row
    gpu_usd_per_hour: str | None = flag("--gpu-usd-per-hour", help=bo.ONE_GPU_PRICE_HELP)
    batch_share: float = flag("--batch-share", default=0.0, help=(
        "Share of requests sent through the API's batch endpoint."))
    cache_hit_rate: float = flag("--cache-hit-rate", default=0.0, help=(
        "Share of API input tokens that are prompt-cache reads."))
    cache_write_rate: float = flag("--cache-write-rate", default=0.0, help=(
        "Share of API input tokens written to the prompt cache."))
    engineer_months: bo.EngMonths = None
    engineer_usd: bo.EngUsd = None
    data_sovereignty: str = flag("--data-sovereignty", default="not_required", help=(
        "required, preferred or not_required."))
    model_control: str = flag("--model-control", default="any", help="custom_weights, open_weights or any.")
    team_capability: str = flag("--team-capability", default=DEFAULT_TEAM_CAPABILITY, help="experienced, some or none.")


@dataclass(frozen=True, slots=True)
class ReportOutFlags:
    """Benchmark files to draw, and what the report writes and prints."""

    bench: list[Path] | None = flag("--bench", help=(
        "Benchmark output(s) to draw as measured points on the simulation's axes (repeat)."))
    out: Path | None = flag("--out", "-o", help=(
        f"The HTML file to write (default {DEFAULT_OUT}; with --json, none unless given)."))
    png: Path | None = flag("--png", help="Also write each figure as DIR/<figure>.png.")
    as_json: bool = flag("--json", default=False, help=(
        "Print the data behind the figures as JSON (strict: no NaN/Infinity)."))
    force: bool = flag("--force", default=False, help="Allow overwriting --out and the PNG files.")


def html_out(o: ReportOutFlags) -> Path | None:
    """The HTML file to write: --out, else the default one, except with --json (which prints the data and writes
    only the files asked for)."""
    if o.out is not None:
        return o.out
    return None if o.as_json else DEFAULT_OUT


def refuse_out_suffix(out: Path) -> None:
    """Refuse an --out whose suffix is not HTML's (``HTML_SUFFIXES``), before any work: the report writes HTML only,
    and HTML under ``r.pdf`` is a file no PDF reader opens (a fresh-user trial).

    Raises:
        InputError: one paragraph naming what the report writes.
    """
    from kvledger.cli.outputs import refuse_suffix

    refuse_suffix(out, HTML_SUFFIXES, "the report writes one self-contained HTML file (--png DIR adds each figure as a "
                  "PNG file, --json prints the data on stdout)", hint=" (a browser's print dialog makes a PDF of it)")


def report_request(model: str, gpu: str, slo: str, r: ReportRunFlags, e: ReportEngineFlags, b: ReportBillFlags,
                   bench: list[Path] | None, dp: Any = None, tier: Any = None) -> Any:
    """The ``decision_data.ReportRequest`` of the flags (the engine settings given, by name); ``dp``
    (``SimDataParallelFlags``): vLLM's DP ranks of a MoE model, checked on the path cost --simulate takes
    (``report_parallel.check_report_dp``) and set in every plan and simulation; ``tier``: the KV tiers'
    ``TierSettings`` or None."""
    from kvledger.analyses.serving.decision_data import ReportRequest
    from kvledger.analyses.serving.report_parallel import check_report_dp, parallel_engine
    from kvledger.catalog.given_prices import one_gpu_usd
    from kvledger.errors import InputError

    synthetic = {"prompt_lengths": r.prompt_lengths, "output_lengths": r.output_lengths, "arrival_cv": r.arrival_cv}
    if r.trace is not None and any(v is not None for v in synthetic.values()):  # cost's refusal (sim_opts)
        raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
    if r.trace is not None:  # a missing file refused before any planning
        from kvledger.dynamics.workload.traces import check_trace

        check_trace(r.trace)

    from kvledger.accounting.plan_checks import check_memory_fraction
    from kvledger.cli.kv_dtype_flag import sim_kv_dtype_check

    sim_kv_dtype_check(e.kv_cache_dtype, report_policy(e.engine), e.engine_version)  # the engine's own names
    check_memory_fraction(report_policy(e.engine) or "vllm", {"gpu_memory_utilization": e.gpu_memory_utilization,
                                                              "mem_fraction_static": e.mem_fraction_static})
    engine = {k: v for k, v in (("policy", report_policy(e.engine)), ("tp", e.tp),
                                ("engine_version", e.engine_version), ("max_model_len", e.max_model_len),
                                ("gpu_memory_utilization", e.gpu_memory_utilization),
                                ("mem_fraction_static", e.mem_fraction_static),
                                ("kv_cache_dtype", e.kv_cache_dtype),
                                ("quantization", e.quantization.lower() if e.quantization else None),
                                ("max_num_seqs", e.max_num_seqs), ("replicas", e.replicas),
                                ("enable_expert_parallel", e.enable_expert_parallel or None),
                                ("step_cost", e.step_cost), ("gpu_profile", e.gpu_profile),
                                ("gemm_efficiency", e.gemm_efficiency),
                                ("allreduce_link_share", e.allreduce_link_share), ("wddm", e.wddm or None),
                                ("client_latency", e.client_latency),
                                # the workload's system prompt and document pool: SimRequestArgs fields too
                                ("shared_prefix_tokens", r.shared_prefix_tokens),
                                ("document_pool", r.document_pool)) if v is not None}
    engine |= parallel_engine(model, report_policy(e.engine), e.tp, e.ep_size, dp, e.engine_version)
    req = ReportRequest(model=model, gpu=gpu, slo=slo, api=r.api, trace=r.trace or "azure-conv", **synthetic,
                         num_requests=r.num_requests,
                         seed=r.seed, target=r.target, engine=engine, utilization=b.utilization,
                         max_utilization=b.max_utilization, gpu_provider=b.gpu_provider, instance=b.instance,
                         gpu_usd_per_hour=one_gpu_usd(b.gpu_usd_per_hour, gpu, "report"), batch_share=b.batch_share,
                         cache_hit_rate=b.cache_hit_rate, cache_write_rate=b.cache_write_rate,
                         data_sovereignty=b.data_sovereignty, model_control=b.model_control,
                         team_capability=b.team_capability, engineer_months_per_month=b.engineer_months,
                         engineer_usd_per_month=b.engineer_usd, bench_files=tuple(str(x) for x in bench or ()),
                         monthly_tokens=b.monthly_tokens, monthly_requests=b.monthly_requests,
                         monthly_input_tokens=b.monthly_input_tokens, monthly_output_tokens=b.monthly_output_tokens,
                         peak_to_mean=b.peak_to_mean,
                         # static batching and contiguous KV are not simulated under --pp (sim_pp.check_pp_request)
                         with_engine_savings=engine.get("policy") is None and "pp" not in engine, tier=tier)
    check_report_dp(req, dp)
    return req


def report_policy(engine: str | None) -> str | None:
    """``--engine`` → the simulator's policy: None for vLLM (its default rule, as the report ran before the flag),
    ``"sglang"``; any other engine refused (InputError) before any work."""
    from kvledger.accounting.settings import engine_name
    from kvledger.errors import InputError

    if engine is None:
        return None
    name = engine_name(engine)
    if name == "vllm":
        return None
    if name == "sglang":
        return "sglang"
    if name == "trtllm":
        raise InputError("--engine trtllm: the report simulates serving, and the simulator has vLLM's and SGLang's "
                         "rules only; `kvledger plan --engine trtllm` gives TensorRT-LLM's KV-cache plan")
    raise InputError(f"--engine {engine[:40]!r}: the report's engine is vllm or sglang (static and contiguous, "
                     "`simulate --policy`'s baselines, are compared in the report's engine-savings section)")
