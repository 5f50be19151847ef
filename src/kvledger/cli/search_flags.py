"""``kvledger search``'s own flags as two groups (``flag_groups.with_groups``): the candidate axes
(:class:`SearchAxesFlags`) and how the search runs and what it writes (:class:`SearchRunFlags`); and the
``SearchSpec`` and ``Axes`` the flags give (:func:`search_inputs`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.analyses.search.unit_cap import DEFAULT_MAX_GPUS_PER_REPLICA
from kvledger.cli import bill_opts as bo
from kvledger.cli.flag_groups import flag
from kvledger.cli.link_flags import inter_node_link
from kvledger.cli.search_axes import axes_of, refuse_empty, splits_of, workload_of
from kvledger.cli.sglang_names import SEARCH_WORDS, resolve_sglang_names, sglang_flag

__all__ = ["SearchAxesFlags", "SearchRunFlags", "SearchVolumeFlags", "search_inputs", "session_cap"]


@dataclass(frozen=True, slots=True)
class SearchAxesFlags:
    """The axes the candidates are the product of: GPUs, TPs, KV dtypes, the two scheduler limits, prefix caching,
    and the disaggregated units."""

    gpus: str | None = flag("--gpus", help="GPUs to try, comma-separated (default: every catalog GPU with a price row)")
    gpu: list[str] | None = flag("--gpu", help=(
        "the same as --gpus, as the other commands take it: repeat it or comma-separate (--gpu H100 --gpu H200, "
        "--gpu H100,H200)"))
    tp: str | None = flag("--tp", "--tensor-parallel-size", help=(
        "TPs to try, e.g. 1,2,4,8 (default: those of 1, 2, 4, 8 that divide the KV heads or that they divide, "
        "as vLLM replicates them)"))
    kv_cache_dtype: str | None = flag("--kv-cache-dtype", help="KV dtypes to try, e.g. auto,fp8 (default auto)")
    max_num_seqs: str | None = flag("--max-num-seqs", help="max_num_seqs values to try (default: vLLM's)")
    max_num_batched_tokens: str | None = flag("--max-num-batched-tokens", help=(
        "token budgets to try, e.g. 2048,8192 (default: vLLM's)"))
    prefix_caching: str | None = flag("--prefix-caching", help="on, off or on,off (default: vLLM's, on)")
    disagg: bool = flag("--disagg", default=False, help=(
        "also try prefill/decode-disaggregated units: every prefill TP × decode TP on the --tp axis × "
        "--disagg-splits"))
    disagg_splits: str = flag("--disagg-splits", default="1:1,1:2,2:1", help=(
        "with --disagg: prefill:decode replica counts per unit"))
    tp_size: str | None = sglang_flag("tp_size", SEARCH_WORDS)  # the SGLang launch lines' spellings of three axes
    max_running_requests: str | None = sglang_flag("max_running_requests", SEARCH_WORDS)
    chunked_prefill_size: str | None = sglang_flag("chunked_prefill_size", SEARCH_WORDS)

    def __post_init__(self) -> None:  # search writes a vLLM and an SGLang line per candidate: either name is taken
        resolve_sglang_names(self, "")


@dataclass(frozen=True, slots=True)
class SearchVolumeFlags:
    """The monthly volume as input and output tokens and its peak, as ``cost`` and ``report`` take them (``bill_opts``
    declares each flag): replicas sized for the peak, the month priced at the mean."""

    monthly_input_tokens: bo.MonthlyIn = None
    monthly_output_tokens: bo.MonthlyOut = None
    peak_to_mean: bo.PeakToMean = 1.0


@dataclass(frozen=True, slots=True)
class SearchRunFlags:
    """The API row to compare with, where the capacity searches run, the ledger, the outputs and the tier axis."""

    api: str | None = flag("--api", help="API price row to compare with, e.g. OpenAI:gpt-4.1")
    engine_name: str | None = flag("--engine", help=(
        "vllm (default) or sglang: the engine every candidate is planned (its memory rules), simulated (its scheduler "
        "and cache) and launched as; --engine-version then names its release. With sglang the axes are SGLang's "
        "knobs (--tp-size, --kv-cache-dtype, --max-running-requests, --chunked-prefill-size, --prefix-caching as "
        "its radix cache) and vLLM-only flags are refused"))
    workers: int | None = flag("--workers", help=(
        "parallel capacity searches: a local Ray with N CPUs when Ray is installed, else a process pool [default: "
        "one process per usable core, in a process pool, when 8 or more candidates are simulated; else in process]"))
    ray_address: str | None = flag("--ray-address", help=(
        "run on an existing Ray cluster: auto or HOST:PORT (kvledger must be installed on its nodes)"))
    backend: str = flag("--backend", default="auto", help="auto, serial, pool or ray")
    ledger: Path | None = flag("--ledger", help="write the candidate ledger (JSON lines) here as candidates finish")
    resume: Path | None = flag("--resume", help=(
        "continue the search whose ledger is FILE: keep its finished candidates, run the rest"))
    top: int = flag("--top", default=10, help="rows in the table")
    verbose: bool = flag("--verbose", default=False, help="list each rejected and each cost-dominated candidate")
    show_command: str | None = flag("--show-command", help=(
        "print the launch commands of one candidate and exit: its id (nvidia_h100_sxm:tp4:kv-fp8) or its name in "
        "the table (h100_sxm tp4 fp8), planned without simulating; or its rank number in the table (3), which runs "
        "the search first"))
    as_json: bool = flag("--json", default=False, help="print the whole result as JSON")
    csv_out: Path | None = flag("--csv", help="write the candidate ledger as CSV")
    plot: Path | None = flag("--plot", help="write the frontier figure (.png or .svg)")
    force: bool = flag("--force", default=False, help="allow --ledger, --csv and --plot to overwrite files")
    offload: str | None = flag("--offload", help=(
        "KV tiers to add to each colocated candidate (feasible, or meeting the SLO at no rate), each variant "
        "ranked with the rest: none,cpu:256GiB,disk:1TiB (default none). SIZE is per replica, summed over its GPUs, "
        "as vLLM's --kv-offloading-size is summed over the TP ranks: cpu:256GiB at TP 4 is 64 GiB per GPU"))
    host_memory_usd_per_gib_month: float | None = flag("--host-memory-usd-per-gib-month", help=(
        "[--offload cpu] your price, USD/GiB-month (default: tier_prices.csv's cheapest dated row, named in the "
        "output)"))
    nvme_usd_per_gib_month: float | None = flag("--nvme-usd-per-gib-month", help=(
        "[--offload disk] your price, USD/GiB-month (default: tier_prices.csv's dated row, named in the output)"))
    exhaustive: bool = flag("--exhaustive", default=False, help=(
        "simulate every planned candidate; by default one whose analytic bounds prove it cannot win, be the "
        "runner-up or reach a frontier is decided by bound, unsimulated"))
    max_gpus_per_replica: int = flag("--max-gpus-per-replica", default=DEFAULT_MAX_GPUS_PER_REPLICA, help=(
        "prune candidates of more GPUs per replica (TP × DP ranks, or a disaggregated unit's) before planning; the "
        "default is 2 nodes of the catalog's largest instance (8 GPUs)"))
    seeds: int = flag("--seeds", default=1, help=(
        "re-check the winner and the runner-up with seeds --seed to --seed+N−1 (1 to 64; 2(N−1) more capacity "
        "searches): their capacity and cost range and whether the winner stays first; the ranking is the first "
        "seed's"))


def search_inputs(model: str, slo: str, target: float, w: Any, sessions: Any, e: Any, p: Any, load: tuple,
                  ax: SearchAxesFlags, api: str | None, dp: str | None = None,
                  engine: str | None = None) -> tuple[Any, Any, list[str]]:
    """(SearchSpec, Axes, the notes on how a session rate became req/s) of the flags: ``w``, ``sessions``, ``e``, ``p``
    the workload, session, engine and pricing groups, ``load`` (--rate, --monthly-tokens, the ``SearchVolumeFlags``),
    ``dp`` --data-parallel-size's sizes, ``engine`` search --engine's (None: vLLM)."""
    from kvledger.accounting.vllm_auto_len import search_max_model_len
    from kvledger.accounting.vllm_ssm_dtype import check_ssm_dtype
    from kvledger.analyses.search import SearchSpec
    from kvledger.analyses.serving.retention_flag import check_release
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo
    parse_slo(slo)  # a bad SLO is refused here, before any candidate is planned (as goodput and cost refuse it)
    rate, monthly_tokens, vol = load
    split = next((v for v in (vol.monthly_input_tokens, vol.monthly_output_tokens) if v is not None), None)
    if p.utilization is not None and (rate is not None or monthly_tokens is not None or split is not None
                                      or sessions.session_rate):
        raise InputError(f"--utilization {p.utilization:g} cannot be given with a load (--rate, --monthly-tokens, "
                         "--monthly-input-tokens/--monthly-output-tokens or --session-rate): the load sets each "
                         "candidate's replicas and the utilization they realize, and its bill is those whole "
                         "replicas, so an assumed utilization would price the tokens at "
                         "a load they do not carry (as cost refuses it with a volume). Drop --utilization to price at "
                         "the realized utilization (--max-utilization caps it), or drop the load to price one replica "
                         "at the utilization given.")
    mml = search_max_model_len(e.max_model_len, e.engine_version, engine or "vllm")
    if e.quantization:  # refused as plan refuses it (fp8 only), before any candidate is planned
        from kvledger.accounting.settings import make_settings

        make_settings(quantization=e.quantization.lower())
    mml, cap_source = session_cap(model, mml, e.engine_version, engine) if sessions.session_workload else (mml, "")
    wl, rate, load_notes = workload_of(w, sessions.session_workload, sessions.sessions, sessions.session_rate,
                                       rate, split if monthly_tokens is None else monthly_tokens, model, mml,
                                       w.seed, ax.disagg, cap_source)
    spec = SearchSpec(model=model, slo=slo, target=target, trace=w.trace or "azure-conv",
                      num_requests=w.num_requests, shared_prefix_tokens=w.shared_prefix_tokens,
                      document_pool=w.document_pool, seed=w.seed, synthetic=wl, step_cost=e.step_cost,
                      cpu_overhead=e.cpu_overhead, gpu_profile=e.gpu_profile, gemm_efficiency=e.gemm_efficiency,
                      allreduce_link_share=e.allreduce_link_share, engine_version=e.engine_version, max_model_len=mml,
                      gpu_memory_utilization=e.gpu_memory_utilization, gpu_provider=p.gpu_provider,
                      mem_fraction_static=e.mem_fraction_static,
                      quantization=e.quantization.lower() if e.quantization else None,
                      utilization=p.utilization, max_utilization=p.max_utilization, rate_req_per_s=rate,
                      monthly_tokens=monthly_tokens, monthly_input_tokens=vol.monthly_input_tokens,
                      monthly_output_tokens=vol.monthly_output_tokens, peak_to_mean=vol.peak_to_mean,
                      api=api, batch_share=p.batch_share, cache_hit_rate=p.cache_hit_rate,
                      cache_write_rate=p.cache_write_rate, gpu_usd_per_hour=p.gpu_usd_per_hour, wddm=bool(e.wddm),
                      client_latency=e.client_latency, inter_node_link=e.inter_node_link,
                      prefix_cache_retention_interval=e.prefix_cache_retention_interval,
                      mamba_ssm_cache_dtype=None if e.mamba_ssm_cache_dtype is None else check_ssm_dtype(
                          e.mamba_ssm_cache_dtype), engine=engine)
    inter_node_link(e.inter_node_link)  # an unreadable one refused before any candidate is planned
    check_release(e.prefix_cache_retention_interval, e.engine_version)  # vLLM < 0.29: before any candidate
    from kvledger.analyses.search.evaluate import check_volume
    from kvledger.analyses.search.load import load_problems

    if bad := load_problems(spec, priced=False):  # the load's flags together, refused before any candidate is planned
        raise InputError(bad[0] if len(bad) == 1 else f"{len(bad)} problems with the load:\n"
                         + "\n".join(f"  - {b}" for b in bad))
    check_volume(spec)  # a volume cost would refuse, refused before any candidate is planned
    return spec, _axes(ax, e.enable_expert_parallel, dp, e.engine_version, engine or "vllm"), load_notes


def with_all2all(spec: Any, all2all: str | None, dp_attention: tuple[str, Any] | None = None) -> Any:
    """``spec`` with the DP candidates' --all2all-backend, refused in vLLM's words (a choice its release does not take)
    before any candidate is planned; ``spec`` itself when not given; ``dp_attention`` (the model and the ``Axes``)
    where --enable-dp-attention is given with --engine sglang (``search_engine.with_dp_attention``)."""
    if dp_attention is not None:
        from kvledger.cli.search_engine import with_dp_attention

        spec = with_dp_attention(spec, *dp_attention)
    if all2all is None:
        return spec
    import dataclasses

    from kvledger.accounting.vllm_all2all import settings_choice

    settings_choice(spec.engine_version, all2all)
    return dataclasses.replace(spec, all2all_backend=all2all)


def session_cap(model: str, given_tokens: int | None, engine_version: str | None = None,
                engine: str | None = None) -> tuple[int, str]:
    """(max_model_len of every candidate on a session workload, where it came from): the rule ``offload`` and
    ``simulate`` apply (``judgments/offload.py : session_context_cap``), so the same flags draw the same sessions; the
    model's context by the rule of the vLLM version the search simulates (its candidates are vLLM's)."""
    from kvledger.accounting.max_model_len import default_max_model_len
    from kvledger.analyses.judgments.offload import session_context_cap
    from kvledger.catalog.models import load_model

    ctx = None if given_tokens else default_max_model_len(load_model(model), engine or "vllm", engine_version)
    return session_context_cap(given_tokens, ctx)


def _axes(ax: SearchAxesFlags, expert_parallel: bool | None, dp: str | None = None,
          engine_version: str | None = None, engine: str = "vllm") -> Any:
    """The ``Axes`` of the axis flags, each list given with at least one value (``search_axes.refuse_empty``), the
    KV dtypes in vLLM's names for ``engine_version`` (search plans and simulates vLLM only)."""
    from kvledger.cli.kv_dtype_flag import check_kv_dtype_for_engine

    refuse_empty({"--gpus": ax.gpus, "--gpu": ",".join(ax.gpu) if ax.gpu else None, "--tp": ax.tp,
                  "--kv-cache-dtype": ax.kv_cache_dtype, "--max-num-seqs": ax.max_num_seqs,
                  "--max-num-batched-tokens": ax.max_num_batched_tokens, "--prefix-caching": ax.prefix_caching,
                  "--disagg-splits": ax.disagg_splits if ax.disagg else None, "--data-parallel-size": dp})
    check_kv_dtype_for_engine([v.strip() for v in (ax.kv_cache_dtype or "").split(",")], engine, engine_version)
    return axes_of(",".join([ax.gpus or "", *(ax.gpu or [])]), ax.tp, ax.kv_cache_dtype, ax.max_num_seqs,
                   ax.max_num_batched_tokens, ax.prefix_caching, splits_of(ax.disagg_splits) if ax.disagg else (),
                   expert_parallel if engine == "vllm" else False, dp, engine_version, engine)
