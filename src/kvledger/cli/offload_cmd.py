"""``kvledger offload``: what a host KV tier buys on multi-turn sessions (tiers, break-even, simulated hit rates)."""

from __future__ import annotations

from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli.bill_opts import ONE_GPU_PRICE_HELP
from kvledger.cli.flag_groups import EngineFlags, GroupUse, TierFlags, flag_of, option, with_groups

__all__ = ["register"]

_QUANT_HELP = ("vLLM --quantization fp8: weights quantized on load, in the plan and every run (as `kvledger plan -q "
               "fp8`; not with --engine sglang).")


_WORKLOAD_HELP = ("Session shape: chat or agent (sessions.py presets). Prompts that re-read a set of documents "
                  "(RAG): simulate --document-pool with --kv-offloading-size.")
_REPLICAS_HELP = ("Also serve the sessions on N replicas without the tier (N × TP GPUs, session affinity, as simulate "
                  "--replicas N --router session_affinity).")
#: the plan flags ``simulate`` takes (EngineFlags) that size the KV pool and the scheduler of the runs here
PLAN = GroupUse(EngineFlags, only=("gpu_memory_utilization", "mem_fraction_static", "kv_cache_dtype", "block_size",
                                   "max_num_batched_tokens", "max_num_seqs", "num_gpu_blocks_override",
                                   "enable_expert_parallel", "disable_hybrid_kv_cache_manager"),
                help={"gpu_memory_utilization": "vLLM fraction of device memory (not with --engine sglang).",
                      "mem_fraction_static": "With --engine sglang: SGLang's fraction (default computed as SGLang "
                                             "does)."})


def _refuse_documents(workload: str) -> None:
    """``--workload`` other than a session shape: the message names where a document pool is simulated."""
    from kvledger.analyses.judgments.offload import SESSION_SHAPES
    from kvledger.errors import InputError

    if workload.strip().lower() not in SESSION_SHAPES:
        raise InputError(f"--workload {workload!r}: offload simulates multi-turn sessions only "
                         f"({', '.join(SESSION_SHAPES)}); for prompts that re-read a set of documents (RAG) use "
                         "`kvledger simulate MODEL --gpu GPU --document-pool K:L[:zipf=S] --prompt-lengths Q "
                         "--output-lengths O --kv-offloading-size GiB`: its tiers table and hit rates per tier answer "
                         "the same question for that workload")


def _session_cap(max_model_len: str | None, model: str, engine: str,
                 engine_version: str | None) -> tuple[int | None, str]:
    """(the session run's max_model_len, None for vLLM's auto-fit; where it came from): ``sim_tiers.session_cap_of``,
    the reader ``simulate``'s sessions use (--max-model-len as the engine's release reads it, else the session rule
    with the model's context by this engine and version's rule)."""
    from kvledger.analyses.serving.sim_tiers import session_cap_of
    from kvledger.catalog.models import load_model

    return session_cap_of(max_model_len, engine, engine_version, lambda: load_model(model))


@with_groups(tiers=TierFlags, plan=PLAN)
def offload(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU or a GPU file."),
    engine: str = typer.Option("vllm", "--engine", help="vllm or sglang."),
    engine_version: str | None = option(EngineFlags, "engine_version", help="vLLM version whose rules apply."),
    tp: int = typer.Option(1, flag_of(EngineFlags, "tp"), help="Tensor-parallel degree."),  # without vLLM's alias
    max_model_len: str | None = option(EngineFlags, "max_model_len", help=(
        "Tokens (default 32K, as simulate's for --workload sessions: the cap sessions grow to).")),
    quantization: str | None = option(EngineFlags, "quantization", help=_QUANT_HELP),
    mamba_ssm_cache_dtype: str | None = option(EngineFlags, "mamba_ssm_cache_dtype"),
    tiers: TierFlags = TierFlags(), plan: EngineFlags = EngineFlags(),
    link_fraction: float = typer.Option(0.8, "--link-fraction", help=(
        "Achievable share of the host link's per-direction peak (as `plan`'s).")),
    suffix_tokens: int = typer.Option(1, "--suffix-tokens", help=(
        "New tokens after the cached prefix in the break-even (≥ 1; as `plan`'s).")),
    workload: str = typer.Option("chat", "--workload", help=_WORKLOAD_HELP),
    sessions: int = typer.Option(200, "--sessions", help="Sessions to simulate, count."),
    session_rate: float = typer.Option(0.2, "--session-rate", help="Session starts per second (Poisson)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the session draw."),
    compare_replicas: int | None = typer.Option(None, "--compare-replicas", help=_REPLICAS_HELP),
    compare_gpus: int | None = typer.Option(None, "--compare-gpus", hidden=True),  # the old name of --compare-replicas
    gpu_usd_per_hour: str | None = typer.Option(None, "--gpu-usd-per-hour", help=ONE_GPU_PRICE_HELP),
    host_memory_usd_per_gib_month: float | None = typer.Option(
        None, "--host-memory-usd-per-gib-month", help="Host-memory price, USD/GiB-month, as `cost` and `search` take "
                                                      "it (with the GPU price: the tier's cost lines)."),
    old_host_price: str | None = typer.Option(None, "--host-usd-per-gib-hour", hidden=True),
    gpu_profile: str | None = option(EngineFlags, "gpu_profile"),
    gemm_efficiency: str | None = option(EngineFlags, "gemm_efficiency"),
    allreduce_link_share: float | None = option(EngineFlags, "allreduce_link_share"),
    enforce_eager: bool | None = option(EngineFlags, "enforce_eager"), wddm: bool | None = option(EngineFlags, "wddm"),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
) -> None:
    """Host KV tier on multi-turn sessions: capacity, break-even, hit rate per tier and TTFT with and without it."""
    from rich.console import Console

    from kvledger.analyses.judgments.offload import analyse_offload
    from kvledger.catalog.given_prices import one_gpu_usd
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.cli.analysis_opts import pricing_flags
    from kvledger.report.offload_view import render_offload

    _refuse_old_price(old_host_price)
    _refuse_documents(workload)
    cap, cap_source = _session_cap(max_model_len, model, engine, engine_version)
    settings = _settings(engine, quantization, mamba_ssm_cache_dtype, engine_version=engine_version, tp=tp,
                         max_model_len=cap, auto_max_model_len=True if cap is None else None,
                         enforce_eager=bool(enforce_eager), wddm=bool(wddm),
                         **_plan_given(plan, engine, engine_version))
    tier = _checked_tier(tiers, link_fraction, gpu, tp)
    rep = _cap_said(cap, max_model_len, lambda: analyse_offload(
        load_model(model), resolve_gpu(gpu), settings, tier, workload=workload, num_sessions=sessions,
        session_rate=session_rate, seed=seed, compare_gpus=_replicas(compare_replicas, compare_gpus),
        suffix_tokens=suffix_tokens, gpu_usd_per_hour=one_gpu_usd(gpu_usd_per_hour, gpu, "offload"),
        host_usd_per_gib_month=host_memory_usd_per_gib_month, context_cap_source=cap_source,
        pricing=pricing_flags(gpu_profile, gemm_efficiency, allreduce_link_share=allreduce_link_share)))
    if as_json:
        typer.echo(strict_json.dumps(rep.to_dict(), indent=2))
    else:
        render_offload(rep, Console(emoji=False))


def _settings(engine: str, quantization: str | None, ssm_dtype: str | None, **kw: Any) -> Any:
    """The plan settings of offload's flags, --quantization and --mamba-ssm-cache-dtype read as ``plan`` reads them."""
    from kvledger.accounting.settings import engine_name, make_settings
    from kvledger.accounting.vllm_ssm_dtype import check_ssm_dtype
    from kvledger.cli.kv_dtype_flag import check_kv_dtype_for_engine

    check_kv_dtype_for_engine(kw.get("kv_cache_dtype"), engine_name(engine), kw.get("engine_version"))
    return make_settings(engine=engine.lower(), quantization=quantization.lower() if quantization else None,
                         mamba_ssm_cache_dtype=check_ssm_dtype(ssm_dtype), **kw)


def _plan_given(f: EngineFlags, engine: str, engine_version: str | None) -> dict[str, Any]:
    """The plan settings of the ``PLAN`` flags given (None left out), named as ``make_settings`` takes them;
    --max-num-batched-tokens as the engine's release reads it (``vllm_auto_len.read_engine_tokens``, as ``plan``)."""
    from kvledger.accounting.vllm_auto_len import read_engine_tokens

    given = {k: getattr(f, k) for k in PLAN.only if k != "max_num_batched_tokens"}
    given["max_num_batched_tokens"] = read_engine_tokens(f.max_num_batched_tokens, "--max-num-batched-tokens", engine,
                                                         engine_version)
    return {k: v for k, v in given.items() if v is not None}


def _replicas(replicas: int | None, old: int | None) -> int | None:
    """--compare-replicas, or its old name --compare-gpus (N meant N replicas, not N GPUs); not both."""
    from kvledger.errors import InputError

    if replicas is not None and old is not None:
        raise InputError("--compare-gpus is the old name of --compare-replicas: give one")
    return replicas if replicas is not None else old


def _refuse_old_price(old_host_price: str | None) -> None:
    """Refuse the old ``--host-usd-per-gib-hour``, saying what it became."""
    from kvledger.errors import InputError

    if old_host_price is not None:
        raise InputError("--host-usd-per-gib-hour was renamed: give the host-memory price as "
                         "--host-memory-usd-per-gib-month (USD per GiB-month, as `cost` and `search` take it; "
                         "× 730 h/month: 0.005 USD/GiB-h is 3.65 USD/GiB-month)")


def _cap_said(cap_tokens: int | None, given: str | None, analyse: Any) -> Any:
    """``analyse()``, with the engine's refusal of max_model_len restated as kvledger's session default when
    --max-model-len was not ``given`` (``analyses.serving.session_notes.session_default_cap``)."""
    from kvledger.analyses.serving.from_plan import refuses_max_model_len
    from kvledger.analyses.serving.session_notes import session_default_cap
    from kvledger.errors import DoesNotFitError, InputError

    try:
        return analyse()
    except InputError as err:
        if given or not refuses_max_model_len(err):
            raise
        raise DoesNotFitError(session_default_cap(cap_tokens, str(err))) from err


def register(app: typer.Typer) -> None:
    """Add ``offload`` to the app."""
    app.command("offload")(offload)


def _checked_tier(tiers: TierFlags, link_fraction: float, gpu: str, tp: int) -> Any:
    """The host KV tier's settings from its flags, its sizes checked against the GPU's host (``tier_opts``)."""
    from kvledger.cli.tier_opts import check_tier_sizes, tier_settings

    tier = tier_settings(tiers, link_fraction=link_fraction)
    check_tier_sizes(tier, gpu, tp)
    return tier
