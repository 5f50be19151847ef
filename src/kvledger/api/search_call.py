"""The Python API's ``search``: which GPU, TP and engine settings serve the traffic at the lowest cost, through the same
inputs (``cli.search_flags.search_inputs``), run path (``analyses.search.search_run``) and document
(``report.search_document``) as ``kvledger search``, so the ``SearchDocument`` returned is the command's ``--json``
for the same inputs. Each parameter is the command's flag of the same name with underscores (vLLM's spellings); the
axes take sequences; ``tests/api/test_api_search_flags.py`` holds them to the command's flags."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

from kvledger.analyses.search.unit_cap import DEFAULT_MAX_GPUS_PER_REPLICA
from kvledger.api.results import check_ranges, in_python_terms, python_document
from kvledger.api.search_result import SearchDocument
from kvledger.argtypes import checked

__all__ = ["search", "SearchDocument"]


@checked
def search(model: str, *, slo: str, target: float = 0.9, gpus: Sequence[str] | None = None,
           gpu: Sequence[str] | None = None, tp: Sequence[int] | None = None,
           kv_cache_dtype: Sequence[str] | None = None, max_num_seqs: Sequence[int] | None = None,
           max_num_batched_tokens: Sequence[int | str] | None = None, prefix_caching: Sequence[bool] | None = None,
           disagg: bool = False, disagg_splits: Sequence[str] = ("1:1", "1:2", "2:1"), rate: float | None = None,
           monthly_tokens: float | str | None = None, monthly_input_tokens: float | str | None = None,
           monthly_output_tokens: float | str | None = None, peak_to_mean: float = 1.0, api: str | None = None,
           trace: str | None = None, prompt_lengths: str | None = None, output_lengths: str | None = None,
           arrival_cv: float | None = None, num_requests: int = 2000, seed: int = 0,
           shared_prefix_tokens: int | None = None, document_pool: str | None = None, workload: str | None = None,
           sessions: int | None = None,
           session_rate: float | None = None, max_model_len: int | str | None = None,
           gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
           quantization: str | None = None, engine: str | None = None, engine_version: str | None = None,
           enable_expert_parallel: bool | None = None, wddm: bool | None = None,
           step_cost: str = "roofline", mamba_ssm_cache_dtype: str | None = None, cpu_overhead: str | None = None,
           gpu_profile: str | None = None, gemm_efficiency: str | None = None, client_latency: str | None = None,
           allreduce_link_share: float | None = None, inter_node_link: str | None = None,
           gpu_provider: str | None = None, gpu_usd_per_hour: float | str | None = None,
           utilization: float | None = None, max_utilization: float = 0.8, batch_share: float = 0.0,
           cache_hit_rate: float = 0.0, cache_write_rate: float = 0.0, data_parallel_size: Sequence[int] | None = None,
           enable_dp_attention: bool = False, attn_dp_size: int | None = None, all2all_backend: str | None = None,
           prefix_cache_retention_interval: int | None = None, offload: Sequence[str] | None = None,
           host_memory_usd_per_gib_month: float | None = None, nvme_usd_per_gib_month: float | None = None,
           exhaustive: bool = False, max_gpus_per_replica: int = DEFAULT_MAX_GPUS_PER_REPLICA, seeds: int = 1,
           workers: int | None = None, ray_address: str | None = None, backend: str = "auto", cache: bool = True,
           ledger: str | os.PathLike | None = None, resume: str | os.PathLike | None = None) -> SearchDocument:
    """Plan, simulate and price every candidate (the product of ``gpus``/``gpu``, ``tp``, ``kv_cache_dtype``,
    ``max_num_seqs``, ``max_num_batched_tokens``, ``prefix_caching``, ``enable_expert_parallel`` and, for a MoE model,
    ``data_parallel_size``; ``disagg``: also prefill/decode units of ``disagg_splits``, "P:D"; None: the command's
    default axis) against ``slo`` at ``target``, as ``kvledger search MODEL --slo SLO``; ``engine`` "sglang" plans,
    simulates and launches them as SGLang (None: vLLM), its pool sized by ``mem_fraction_static`` (None: SGLang's
    default; ``gpu_memory_utilization`` is vLLM's). The workload is a trace, a
    synthetic one or ``workload`` "chat"/"agent" sessions (``sessions``, ``session_rate``); ``rate``, a monthly
    volume or ``session_rate`` sizes replicas and bills; ``api`` adds an API's bill; ``offload`` (["none",
    "cpu:256GiB"]) adds KV tier variants, priced at ``host_memory_usd_per_gib_month`` / ``nvme_usd_per_gib_month``
    (USD per GiB-month; None: tier_prices.csv's); ``max_gpus_per_replica`` prunes wider units before planning (16 by
    default: ``analyses.search.unit_cap``). Each parameter is the flag of that name; ``cache``: read and keep
    each simulation in the on-disk store, as ``kvledger.goodput``'s; ``ledger``: a new file each finished candidate
    is written to as it finishes, ``resume``: such a file, continued (its candidates not run again), as the command's
    --ledger and --resume, checked as it checks them (``cli.search_files``) but never replacing a file (no --force).

    Returns:
        SearchDocument: ``.to_dict()`` (and its keys, ``["winner"]``) the command's ``--json`` where it exits 0;
        ``.offload`` the tier variants (``OffloadVariant``), ``.sessions`` the session workload, ``.result``.

    Raises:
        InputError, UnknownNameError: a wrong type, an unknown name, a bad SLO or setting, or every candidate refused
            as an invalid setting (the command's exit 2);
        NoAnswerError: no candidate meets the SLO or a candidate could not be evaluated (exit 1; ``.payload`` is the
            document the command prints, its ``failed_candidates`` and the ``winner`` among the rest);
        DoesNotFitError, EngineRefusalError: no candidate can start (exit 3).
    """
    values = {k: v for k, v in locals().items() if k in _PARAMS}
    return _search(values)


def _search(values: dict[str, Any]) -> SearchDocument:
    """The command's run of the call's ``values``: its inputs (``cli.search_flags.search_inputs``), its run path
    (``analyses.search.search_run``) and its document (``report.search_document``)."""
    from kvledger.analyses.search.search_run import check_gpus, run_candidates
    from kvledger.analyses.serving import sim_cache
    from kvledger.cli.outputs import paths_in
    from kvledger.cli.search_engine import checked_engine
    from kvledger.cli.search_flags import search_inputs, with_all2all
    from kvledger.report.search_document import search_document

    with in_python_terms("search", _PARAMS), sim_cache.using(values["cache"]):
        check_ranges("search", {k: v for k, v in values.items() if not isinstance(v, (list, tuple)) and k != "cache"})
        w, sessions, e, p, vol, axes, run, dp = _groups(values)
        load = (values["rate"], _count("monthly_tokens", values["monthly_tokens"]), vol)
        name, axes, dp = checked_engine(values["engine"], e, axes, run, dp)  # vLLM-only refused; attn_dp_size
        spec, ax, load_notes = search_inputs(values["model"], values["slo"], values["target"], w, sessions, e, p, load,
                                             axes, values["api"], dp.data_parallel_size, name)
        spec = with_all2all(spec, dp.all2all_backend, (values["model"], ax) if dp.enable_dp_attention else None)
        check_gpus(ax.gpus, e.gpu_profile, bool(e.wddm))
        run = _ledger_run(run, values, [values["model"], *paths_in(w, sessions, e, p, axes)])
        result, variants = run_candidates(spec, ax, run)
        result.notes[:0] = load_notes  # how a session_rate became the req/s the sizing uses
        doc = _answer(result, python_document(search_document(result, variants), _PARAMS))  # its notes: parameters
    from kvledger.analyses.search.offload_report import OffloadVariant

    tiers = None if variants is None else tuple(OffloadVariant.from_json(r) for r in doc["offload"])
    return SearchDocument(doc, result, tiers)


def _answer(result: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` where the command exits 0 with it; else the error whose exit status is the command's
    (``analyses.search.search_run.answer_status``), saying what its stderr says."""
    from kvledger.analyses.search.search_run import answer_status
    from kvledger.errors import DoesNotFitError, InputError, NoAnswerError

    status = answer_status(result)
    failed, w = doc["failed_candidates"], doc.get("winner")
    if status == 1:
        among = (f"; the winner among the others, {w['id']}, is in .payload['winner'], but a failed candidate may "
                 "have been cheaper" if w else "")
        why = (f"{len(failed)} candidate(s) could not be evaluated ({', '.join(failed)}; each entry's detail says "
               f"why){among}" if failed
               else doc["no_winner_reason"])
        raise NoAnswerError(why, doc)
    if status == 2:
        first = result.entries[0]
        raise InputError(f"every candidate was refused as an invalid setting (e.g. {first['id']}: "
                         f"{first.get('detail', '')}); change the settings that every candidate shares")
    if status == 3:  # every one refused by the engine release: that error; any rejected for memory: DoesNotFitError
        from kvledger.analyses.search.reasons import ENGINE_REFUSES
        from kvledger.errors import EngineRefusalError

        refused = all(e.get("reason") == ENGINE_REFUSES for e in result.entries)
        raise (EngineRefusalError if refused else DoesNotFitError)(doc["no_winner_reason"])
    return doc


_PARAMS = frozenset(inspect.signature(search).parameters)


def _ledger_run(run: Any, values: dict[str, Any], given: list[Any]) -> Any:
    """``run`` writing ``ledger`` (a new file) or continuing ``resume``, checked as the command checks --ledger and
    --resume (``cli.search_files.check_search_files``, with no --force: a file is never replaced)."""
    import dataclasses
    from pathlib import Path

    from kvledger.cli.search_files import check_search_files

    ledger, resume = (None if values[k] is None else Path(values[k]) for k in ("ledger", "resume"))
    check_search_files(ledger, resume, {}, None, given)
    return dataclasses.replace(run, ledger=resume if resume is not None else ledger, resume=resume is not None)


def _joined(v: Sequence[Any] | None) -> str | None:
    """An axis as the command's comma-separated flag ("1,2"; booleans on/off), None left to the command's default."""
    if v is None:
        return None
    return ",".join(("on" if x else "off") if isinstance(x, bool) else str(x) for x in v)


def _count(name: str, v: float | str | None) -> float | None:
    """A monthly volume through the flag's own parser (3e9, "3B"; more than 0 for --monthly-tokens)."""
    from kvledger.ledgers.volume_rate import volume_option

    flag = "--" + name.replace("_", "-")
    return None if v is None else volume_option(flag, positive=name == "monthly_tokens")(str(v))


def _groups(v: dict[str, Any]) -> tuple[Any, ...]:
    """The command's flag groups (workload, sessions, engine, pricing, volume, axes, run, DP) from the call's values."""
    from kvledger.analyses.search.search_run import SearchRun
    from kvledger.cli.dp_flags import SearchDataParallelFlags
    from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags
    from kvledger.cli.pricing_flags import PricingFlags
    from kvledger.cli.search_flags import SearchAxesFlags, SearchVolumeFlags
    from kvledger.cli.session_flags import SessionFlags

    mml, price = v["max_model_len"], v["gpu_usd_per_hour"]
    return (WorkloadFlags(**_of(WorkloadFlags, v)),
            SessionFlags(session_workload=v["workload"], sessions=v["sessions"], session_rate=v["session_rate"]),
            EngineFlags(**_of(EngineFlags, v), max_model_len=None if mml is None else str(mml)),
            PricingFlags(**_of(PricingFlags, v), gpu_usd_per_hour=None if price is None else str(price)),
            SearchVolumeFlags(monthly_input_tokens=_count("monthly_input_tokens", v["monthly_input_tokens"]),
                              monthly_output_tokens=_count("monthly_output_tokens", v["monthly_output_tokens"]),
                              peak_to_mean=v["peak_to_mean"]),
            SearchAxesFlags(gpus=_joined(v["gpus"]), gpu=None if v["gpu"] is None else list(v["gpu"]),
                            **{k: _joined(v[k]) for k in ("tp", "kv_cache_dtype", "max_num_seqs",
                                                          "max_num_batched_tokens", "prefix_caching")},
                            disagg=v["disagg"], disagg_splits=_joined(v["disagg_splits"])),
            SearchRun(workers=v["workers"], backend=v["backend"], ray_address=v["ray_address"],
                      exhaustive=v["exhaustive"], seeds=v["seeds"], offload=_joined(v["offload"]),
                      max_gpus_per_replica=v["max_gpus_per_replica"],
                      host_memory_usd_per_gib_month=v["host_memory_usd_per_gib_month"],
                      nvme_usd_per_gib_month=v["nvme_usd_per_gib_month"]),
            SearchDataParallelFlags(data_parallel_size=_joined(v["data_parallel_size"]),
                                    enable_dp_attention=v["enable_dp_attention"], attn_dp_size=v["attn_dp_size"],
                                    all2all_backend=v["all2all_backend"]))


#: the group fields a call's value fills as it is (max_model_len and gpu_usd_per_hour: as their text, in _groups)
_AS_GIVEN = ("trace", "prompt_lengths", "output_lengths", "arrival_cv", "num_requests", "seed", "shared_prefix_tokens",
             "document_pool", "gpu_memory_utilization", "mem_fraction_static", "quantization", "engine_version",
             "step_cost", "cpu_overhead", "gpu_profile",
             "gemm_efficiency", "client_latency", "prefix_cache_retention_interval", "enable_expert_parallel", "wddm",
             "mamba_ssm_cache_dtype", "allreduce_link_share", "inter_node_link", "gpu_provider", "utilization",
             "max_utilization", "batch_share", "cache_hit_rate", "cache_write_rate")


def _of(cls: type, v: dict[str, Any]) -> dict[str, Any]:
    """The fields of group ``cls`` the call gives as they are."""
    import dataclasses

    return {f.name: v[f.name] for f in dataclasses.fields(cls) if f.name in _AS_GIVEN}
