"""The Python API's calls: ``plan``, ``simulate`` and ``goodput`` by model and GPU name, each through the same functions
as its command (``plan_inputs`` and ``build_plan``; ``sim_request`` and ``simulate_run``; ``simulated_goodput``), so
``to_dict()`` is the command's ``--json`` for the same inputs. Arguments are checked against their annotations first
(``argtypes.checked``); an error names the parameters, not the flags."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

from kvledger.analyses.serving.sim_document import SimDocument
from kvledger.api.results import GoodputResult, PlanResult, check_ranges, goodput_document, in_python_terms
from kvledger.argtypes import checked

__all__ = ["plan", "simulate", "goodput"]


@checked
def plan(model: str, gpu: str, *, engine: str = "vllm", engine_version: str | None = None, tp: int = 1, pp: int = 1,
         max_model_len: int | str | None = None, contexts: Sequence[int | str] | None = None,
         gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
         kv_cache_dtype: str = "auto", quantization: str | None = None, max_num_batched_tokens: int | str | None = None,
         max_num_seqs: int | None = None, block_size: int | None = None, enable_prefix_caching: bool | None = None,
         gpu_profile: str | None = None) -> PlanResult:
    """The KV-cache ledger, as ``kvledger plan MODEL --gpu GPU`` computes it.

    Args:
        model: a bundled model (HF id or alias), a config.json path or a Hub id. gpu: a catalog GPU name or a GPU file.
        engine: "vllm", "sglang" or "trtllm"; the others are the engines' own settings by their flag names
            (``contexts``: the context lengths to report concurrency at, tokens: 8192 or "8K").

    Returns:
        PlanResult: ``.plan`` (the Plan: ``kv``, ``memory``, ``concurrency``, ``row_at(ctx)``), ``.fits``, ``.advice``
        and ``.to_dict()``, equal to ``kvledger plan … --json``.

    Raises:
        InputError, UnknownNameError, ConfigError: a wrong type, an unknown name, impossible settings.
    """
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.plans import plan_document
    from kvledger.cli.plan_flags import PlanFlags, PlanMoreFlags, plan_inputs
    from kvledger.errors import InputError

    if contexts is not None and not contexts:  # as the command refuses --context ''
        raise InputError("kvledger.plan: contexts is empty; give one context length or more (8192 or \"8K\"), or "
                         "leave it None for the default contexts")
    text = {"max_model_len": max_model_len, "max_num_batched_tokens": max_num_batched_tokens}
    flags = PlanFlags(engine=engine, engine_version=engine_version, tp=tp, pp=pp,
                      context=[str(c) for c in contexts] if contexts is not None else None,
                      gpu_memory_utilization=gpu_memory_utilization, mem_fraction_static=mem_fraction_static,
                      kv_cache_dtype=kv_cache_dtype, quantization=quantization, max_num_seqs=max_num_seqs,
                      block_size=block_size, enable_prefix_caching=enable_prefix_caching, gpu_profile=gpu_profile,
                      **{k: None if v is None else str(v) for k, v in text.items()})
    with in_python_terms("plan", _PLAN_PARAMS):
        check_ranges("plan", {k: v for k, v in locals().items() if k in _PLAN_PARAMS})
        spec, g, settings, prof = plan_inputs(model, gpu, flags, PlanMoreFlags())
        p = build_plan(spec, g, settings)
    return PlanResult(p, plan_document(p, prof, False))


_PLAN_PARAMS = frozenset(inspect.signature(plan).parameters)


@checked
def simulate(model: str, gpu: str, *, trace: str | None = None, prompt_lengths: str | None = None,
             output_lengths: str | None = None, arrival_cv: float | None = None, rate: float | None = None,
             rate_scale: float | None = None, num_requests: int | None = None, seed: int | None = None,
             concurrency: int | None = None, shared_prefix_tokens: int | None = None, policy: str | None = None,
             engine_version: str | None = None, tp: int | None = None, max_model_len: int | str | None = None,
             gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
             kv_cache_dtype: str | None = None, quantization: str | None = None, block_size: int | None = None,
             max_num_batched_tokens: int | str | None = None, max_num_seqs: int | None = None,
             enable_prefix_caching: bool | None = None, enable_chunked_prefill: bool | None = None,
             long_prefill_token_threshold: int | None = None, long_prefill_token_threshold_adaptive: bool | None = None,
             prefix_cache_retention_interval: int | None = None, replicas: int | None = None,
             router: str | None = None, step_cost: str | None = None,
             gpu_profile: str | None = None, gemm_efficiency: str | None = None, seeds: int = 1,
             cache: bool = False) -> SimDocument:
    """Serve a trace (``trace``, default azure-conv) or a synthetic workload (``prompt_lengths`` and
    ``output_lengths``, e.g. "fixed:512", with ``rate`` and ``num_requests``) on the simulated engine, as ``kvledger
    simulate`` does; every setting left None is the command's default. ``seeds`` (1 to 64): as ``--seeds``, the same
    run with seeds ``seed``, ``seed`` + 1, … and each figure's min–max over them under ``seed_spread``; the figures
    stay the first seed's.

    ``cache``: read and keep the run in the on-disk store (``$KVLEDGER_CACHE_DIR``, else ``~/.cache/kvledger``,
    folder ``sims/``), whatever ``KVLEDGER_NO_CACHE`` says; False (the default, as the command) neither reads nor
    writes it. The simulator turns the garbage collector off for the run, process-wide (``dynamics.simulator``).

    Returns:
        SimDocument, the simulate document: ``.summary`` (TTFT/TPOT/ITL/E2E percentiles, throughput, KV usage,
        preemptions), ``.notes`` and ``.to_dict()``, equal to ``kvledger simulate … --json``.

    Raises:
        InputError, UnknownNameError, FormatError: a wrong type, an unknown name, a bad trace or setting;
        DoesNotFitError: the memory plan does not fit (the command's exit 3).
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.sim_ledgers import simulate_document, simulate_run
    from kvledger.cli.simulate_run import SimPrepare, with_seed_spread

    values = {k: v for k, v in locals().items() if k in _SIM_PARAMS}
    with in_python_terms("simulate", _SIM_PARAMS):
        check_ranges("simulate", values)
        args, synthetic = _sim_request(model, gpu, values)
        with sim_cache.using(cache):
            sim = simulate_run(args, synthetic, record_token_times=False)
        doc = simulate_document(sim.setup, sim.result)
        return with_seed_spread(doc, args, seeds, SimPrepare(synthetic, None, None), None)


_SIM_PARAMS = frozenset(inspect.signature(simulate).parameters)


def _sim_request(model: str, gpu: str, values: dict):
    """(SimRequestArgs, SyntheticSpec or None) through the command's own ``sim_request`` (its defaults and checks)."""
    import dataclasses

    from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags
    from kvledger.cli.sim_opts import sim_request

    rename = {"enable_prefix_caching": "prefix_caching", "enable_chunked_prefill": "chunked_prefill"}
    v = {rename.get(k, k): (str(x) if k in ("max_model_len", "max_num_batched_tokens") and x is not None else x)
         for k, x in values.items()}
    groups = [cls(**{f.name: v[f.name] for f in dataclasses.fields(cls) if f.name in v})
              for cls in (WorkloadFlags, EngineFlags)]
    return sim_request(model, gpu, *groups, num_requests_default=v.pop("_num_requests_default", None))


@checked
def goodput(model: str, gpu: str, *, slo: str, target: float | None = None, axis: str = "rate",
            trace: str | None = None, prompt_lengths: str | None = None, output_lengths: str | None = None,
            arrival_cv: float | None = None, rate: float | None = None, rate_scale: float | None = None,
            num_requests: int | None = None, seed: int | None = None, concurrency: int | None = None,
            shared_prefix_tokens: int | None = None, policy: str | None = None, engine_version: str | None = None,
            tp: int | None = None, max_model_len: int | str | None = None,
            gpu_memory_utilization: float | None = None, mem_fraction_static: float | None = None,
            kv_cache_dtype: str | None = None, quantization: str | None = None, block_size: int | None = None,
            max_num_batched_tokens: int | str | None = None, max_num_seqs: int | None = None,
            enable_prefix_caching: bool | None = None, enable_chunked_prefill: bool | None = None,
            long_prefill_token_threshold: int | None = None, long_prefill_token_threshold_adaptive: bool | None = None,
            prefix_cache_retention_interval: int | None = None, replicas: int | None = None,
            router: str | None = None, step_cost: str | None = None,
            gpu_profile: str | None = None, gemm_efficiency: str | None = None, cache: bool = True) -> GoodputResult:
    """Goodput of a simulated run under ``slo`` ("ttft=200ms,tpot=50ms"), as ``kvledger goodput --simulate MODEL
    --gpu GPU --slo SLO`` measures it; with ``target`` (e.g. 0.9) the SLO boundary on ``axis`` ("rate" or
    "concurrency"), one simulation per probe. The workload and engine settings are ``simulate``'s, by the same names
    (``kv_cache_dtype``, ``gpu_memory_utilization``, ``max_num_seqs``, …); left None, the command's default.

    ``cache``: read and keep each simulation in the on-disk store (``$KVLEDGER_CACHE_DIR``, else
    ``~/.cache/kvledger``), as the command does unless ``KVLEDGER_NO_CACHE`` is set; False neither reads nor writes it.

    Returns:
        GoodputResult: ``.to_dict()`` equal to ``kvledger goodput --simulate … --json``; ``.result`` the ledger's.

    Raises:
        InputError, UnknownNameError: a wrong type, an unknown name, a bad SLO or setting; DoesNotFitError.
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS, normalize_axis
    from kvledger.analyses.serving.sim_goodput import simulated_goodput, simulated_goodput_search
    from kvledger.jsonable import to_jsonable
    from kvledger.ledgers.slo import parse_slo

    values = {k: v for k, v in locals().items() if k in _SIM_PARAMS}
    with in_python_terms("goodput", _GOODPUT_PARAMS), sim_cache.using(cache):
        check_ranges("goodput", {**values, "target": target})
        the_slo = parse_slo(slo)
        normalize_axis(axis)  # a misspelt axis is an error with or without target, as the command's --axis
        if target is None:
            args, synthetic = _sim_request(model, gpu, values)
            run = simulated_goodput(args, the_slo, synthetic)
            return GoodputResult(goodput_document([to_jsonable(x) for x in run.lines()]), run.result)
        args, synthetic = _sim_request(model, gpu, {**values, "_num_requests_default": PROBE_NUM_REQUESTS})
        found = simulated_goodput_search(args, the_slo, target, axis, synthetic=synthetic)
        return GoodputResult(goodput_document([to_jsonable(x) for x in found.lines()]), found.search)


_GOODPUT_PARAMS = frozenset(inspect.signature(goodput).parameters)
