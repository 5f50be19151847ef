"""The Python API's ``search``: which GPU, TP and engine settings serve the traffic at the lowest cost, through the same
inputs (``cli.search_flags.search_inputs``), candidate run (``cli.search_run``) and document
(``cli.search_document``) as ``kvledger search``, so the dict returned is the command's ``--json`` for the same
inputs. Each parameter is the command's flag of the same name with underscores; the axes take sequences."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from kvledger.api.results import check_ranges, in_python_terms
from kvledger.argtypes import checked

__all__ = ["search"]


@checked
def search(model: str, *, slo: str, target: float = 0.9, gpus: Sequence[str] | None = None,
           tp: Sequence[int] | None = None, kv_cache_dtype: Sequence[str] | None = None,
           max_num_seqs: Sequence[int] | None = None, max_num_batched_tokens: Sequence[int | str] | None = None,
           prefix_caching: Sequence[bool] | None = None, rate: float | None = None,
           monthly_tokens: float | str | None = None, monthly_input_tokens: float | str | None = None,
           monthly_output_tokens: float | str | None = None, peak_to_mean: float = 1.0, api: str | None = None,
           trace: str | None = None, prompt_lengths: str | None = None, output_lengths: str | None = None,
           arrival_cv: float | None = None, num_requests: int = 2000, seed: int = 0,
           shared_prefix_tokens: int | None = None, max_model_len: int | str | None = None,
           gpu_memory_utilization: float | None = None, quantization: str | None = None,
           engine_version: str | None = None, step_cost: str = "roofline", cpu_overhead: str | None = None,
           gpu_profile: str | None = None, gemm_efficiency: str | None = None, client_latency: str | None = None,
           gpu_provider: str | None = None, gpu_usd_per_hour: float | str | None = None,
           utilization: float | None = None, max_utilization: float = 0.8, batch_share: float = 0.0,
           cache_hit_rate: float = 0.0, cache_write_rate: float = 0.0, data_parallel_size: Sequence[int] | None = None,
           all2all_backend: str | None = None, prefix_cache_retention_interval: int | None = None,
           exhaustive: bool = False, seeds: int = 1, workers: int | None = None, cache: bool = True) -> dict[str, Any]:
    """Plan, simulate and price every candidate (the product of ``gpus``, ``tp``, ``kv_cache_dtype``,
    ``max_num_seqs``, ``max_num_batched_tokens``, ``prefix_caching`` and, for a MoE model, ``data_parallel_size``;
    None: the command's default axis) against ``slo`` at ``target``, as ``kvledger search MODEL --slo SLO`` does;
    ``rate`` or a monthly volume sizes replicas and bills, ``api`` adds an API's bill; ``all2all_backend`` (the DP
    candidates') and ``prefix_cache_retention_interval`` (vLLM ≥ 0.23) as the flags, refused before any candidate.
    ``cache``: read and keep each simulation in the on-disk store, as ``kvledger.goodput``'s ``cache``.

    Returns:
        The command's ``--json`` document where the command exits 0: ``ranking``, ``winner``, ``cost_frontier``,
        ``candidates``, ``api``, …

    Raises:
        InputError, UnknownNameError: a wrong type, an unknown name, a bad SLO or setting, or every candidate refused
            as an invalid setting (the command's exit 2);
        NoAnswerError: no candidate meets the SLO (``winner`` None, ``no_winner_reason`` says why) or a candidate
            could not be evaluated (the command's exit 1, as ``kvledger.cost`` raises it for its exit 1); ``.payload``
            is the document the command prints. A failed candidate raises even where the others have a winner: the
            ranking has a hole where the failed one may have been cheaper, so it is not returned as the answer (a
            script reading the command's exit status is stopped the same way); ``.payload["failed_candidates"]``
            names them (each entry's ``detail`` says why) and ``.payload["winner"]`` is the winner among the rest;
        DoesNotFitError: no candidate can start, one or more rejected for memory, the others refused by the engine
            release on their GPU (the command's exit 3).
        EngineRefusalError: no candidate can start, every one refused by the engine release on its GPU (exit 3).
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.cli.search_document import search_document
    from kvledger.cli.search_flags import search_inputs, with_all2all
    from kvledger.cli.search_run import check_gpus, run_candidates

    values = {k: v for k, v in locals().items() if k in _PARAMS}
    with in_python_terms("search", _PARAMS), sim_cache.using(cache):
        check_ranges("search", {k: v for k, v in values.items() if not isinstance(v, (list, tuple))})
        w, sessions, e, p, vol, axes, run, dp = _groups(values)
        spec, ax, load_notes = search_inputs(model, slo, target, w, sessions, e, p,
                                             (rate, _count("monthly_tokens", monthly_tokens), vol), axes, api,
                                             dp.data_parallel_size)
        spec = with_all2all(spec, dp.all2all_backend)  # the DP candidates' vLLM all2all backend, checked as the command
        check_gpus(ax.gpus, e)
        result, variants = run_candidates(spec, ax, run)
        result.notes[:0] = load_notes
        return _answer(result, search_document(result, variants))


def _answer(result: Any, doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` where the command exits 0 with it; else the error whose exit status is the command's
    (``cli.search_status.answer_status``), saying what its stderr says."""
    from kvledger.cli.search_status import answer_status
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


def _joined(v: Sequence[Any] | None) -> str | None:
    """An axis as the command's comma-separated flag ("1,2"; booleans on/off), None left to the command's default."""
    if v is None:
        return None
    return ",".join(("on" if x else "off") if isinstance(x, bool) else str(x) for x in v)


def _count(name: str, v: float | str | None) -> float | None:
    """A monthly volume through the flag's own parser (3e9, "3B"; more than 0 for --monthly-tokens)."""
    from kvledger.units import count_option

    return None if v is None else count_option("--" + name.replace("_", "-"), positive=name == "monthly_tokens")(str(v))


def _groups(v: dict[str, Any]) -> tuple[Any, ...]:
    """The command's flag groups (workload, sessions, engine, pricing, volume, axes, run, DP) from the call's values."""
    from kvledger.cli.dp_flags import SearchDataParallelFlags
    from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags
    from kvledger.cli.pricing_flags import PricingFlags
    from kvledger.cli.search_flags import SearchAxesFlags, SearchRunFlags, SearchVolumeFlags
    from kvledger.cli.session_flags import SessionFlags

    mml = v["max_model_len"]
    price = v["gpu_usd_per_hour"]
    return (WorkloadFlags(trace=v["trace"], prompt_lengths=v["prompt_lengths"], output_lengths=v["output_lengths"],
                          arrival_cv=v["arrival_cv"], num_requests=v["num_requests"], seed=v["seed"],
                          shared_prefix_tokens=v["shared_prefix_tokens"]),
            SessionFlags(),
            EngineFlags(max_model_len=None if mml is None else str(mml),
                        gpu_memory_utilization=v["gpu_memory_utilization"], quantization=v["quantization"],
                        engine_version=v["engine_version"], step_cost=v["step_cost"], cpu_overhead=v["cpu_overhead"],
                        gpu_profile=v["gpu_profile"], gemm_efficiency=v["gemm_efficiency"],
                        client_latency=v["client_latency"],
                        prefix_cache_retention_interval=v["prefix_cache_retention_interval"]),
            PricingFlags(gpu_provider=v["gpu_provider"], gpu_usd_per_hour=None if price is None else str(price),
                         utilization=v["utilization"], max_utilization=v["max_utilization"],
                         batch_share=v["batch_share"], cache_hit_rate=v["cache_hit_rate"],
                         cache_write_rate=v["cache_write_rate"]),
            SearchVolumeFlags(monthly_input_tokens=_count("monthly_input_tokens", v["monthly_input_tokens"]),
                              monthly_output_tokens=_count("monthly_output_tokens", v["monthly_output_tokens"]),
                              peak_to_mean=v["peak_to_mean"]),
            SearchAxesFlags(gpus=_joined(v["gpus"]), tp=_joined(v["tp"]), kv_cache_dtype=_joined(v["kv_cache_dtype"]),
                            max_num_seqs=_joined(v["max_num_seqs"]),
                            max_num_batched_tokens=_joined(v["max_num_batched_tokens"]),
                            prefix_caching=_joined(v["prefix_caching"])),
            SearchRunFlags(api=v["api"], workers=v["workers"], exhaustive=v["exhaustive"], seeds=v["seeds"],
                           as_json=True),
            SearchDataParallelFlags(data_parallel_size=_joined(v["data_parallel_size"]),
                                    all2all_backend=v["all2all_backend"]))
