"""The Python API's ``cost``: the self-host-versus-API ledger of a benchmark file or a simulation, through the same
checks and request as ``kvledger cost`` (``cli.cost_boundary``) and the same computation
(``analyses.serving.cost_compute``), each parameter named as the command's flag with underscores, so ``to_dict()`` is
the command's ``--json`` for the same inputs."""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kvledger.api.results import CostResult, in_python_terms, python_document
from kvledger.argtypes import checked
from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY

__all__ = ["cost"]

PathLike = str | os.PathLike


@checked
def cost(path: PathLike | Sequence[PathLike] | None = None, *, simulate: str | None = None, slo: str,
         api: str | None = None, utilization: float | None = None, gpu: str | None = None,
         gpu_provider: str | None = None, instance: str | None = None, gpu_usd_per_hour: float | str | None = None,
         num_gpus: int | None = None, model: str | None = None, max_utilization: float = 0.8,
         prefill_share: float | None = None, batch_share: float = 0.0, cache_hit_rate: float = 0.0,
         cache_write_rate: float = 0.0, engineer_months_per_month: float | None = None,
         engineer_usd_per_month: float | None = None, monthly_tokens: float | str | None = None,
         peak_to_mean: float = 1.0, monthly_requests: float | str | None = None,
         monthly_input_tokens: float | str | None = None, monthly_output_tokens: float | str | None = None,
         gpu_capex_usd: float | None = None, amortization_months: float = 36.0, annual_interest: float = 0.0,
         pue: float = 1.3, usd_per_kwh: float = 0.12, hosting_usd_per_gpu_month: float = 0.0,
         board_power_w: float | None = None, idle_power_w: float | None = None, kv_tier_host: float | str | None = None,
         kv_tier_nvme: float | str | None = None, host_memory_usd_per_gib_month: float | None = None,
         nvme_usd_per_gib_month: float | None = None, data_sovereignty: str = "not_required",
         model_control: str = "any", team_capability: str = DEFAULT_TEAM_CAPABILITY, run: int | None = None,
         format: str | None = None, at_offered_load: bool = False, target: float | None = None, seeds: int = 1,  # noqa: A002
         trace: str | None = None, rate: float | None = None, rate_scale: float | None = None,
         num_requests: int | None = None, seed: int | None = None, concurrency: int | None = None,
         think_time: float | None = None, prompt_lengths: str | None = None, output_lengths: str | None = None,
         arrival_cv: float | None = None, shared_prefix_tokens: int | None = None, document_pool: str | None = None,
         engine_version: str | None = None, tp: int | None = None, enable_expert_parallel: bool | None = None,
         max_model_len: int | str | None = None, gpu_memory_utilization: float | None = None,
         mem_fraction_static: float | None = None, kv_cache_dtype: str | None = None, quantization: str | None = None,
         block_size: int | None = None, max_num_batched_tokens: int | str | None = None,
         max_num_seqs: int | None = None, num_gpu_blocks_override: int | None = None, ep_size: int | None = None,
         enable_prefix_caching: bool | None = None, enable_chunked_prefill: bool | None = None,
         long_prefill_token_threshold: int | None = None, long_prefill_token_threshold_adaptive: bool | None = None,
         max_num_partial_prefills: int | None = None, max_long_partial_prefills: int | None = None,
         prefix_cache_retention_interval: int | None = None, prefix_caching_policy: str | None = None,
         scheduling_policy: str | None = None, batching: str | None = None, kv_allocation: str | None = None,
         async_scheduling: bool | None = None, enforce_eager: bool | None = None, wddm: bool | None = None,
         mxfp4_backend: str | None = None, replicas: int | None = None, router: str | None = None,
         step_cost: str | None = None, disable_hybrid_kv_cache_manager: bool | None = None,
         mamba_ssm_cache_dtype: str | None = None, cpu_overhead: str | None = None, client_latency: str | None = None,
         policy: str | None = None, achievable_flops_fraction: float | None = None, attn_dp_size: int | None = None,
         achievable_bandwidth_fraction: float | None = None, allreduce_link_share: float | None = None,
         inter_node_link: str | None = None, gpu_profile: str | None = None, gemm_efficiency: str | None = None,
         data_parallel_size: int | None = None, all2all_backend: str | None = None, enable_dp_attention: bool = False,
         pp: int | None = None, moe_a2a_backend: str | None = None, cache: bool = True) -> CostResult:
    """Self-host versus API, as ``kvledger cost`` prices it: ``path`` (a benchmark output or records file; a rate
    sweep's several at their SLO capacity) or ``simulate=MODEL`` with ``gpu`` (at the SLO capacity a rate search finds,
    unless ``at_offered_load``). Each other parameter is the flag of its name (``run``: ``--run``, ``model``: FILE's
    ``--model``, ``data_parallel_size``: a MoE's DP ranks), its default when left; ``cache``: the store, as goodput's.

    Returns:
        CostResult: ``.to_dict()`` equal to ``kvledger cost … --json``; ``.report`` the itemised ledgers.
    Raises:
        InputError, UnknownNameError, FormatError: a wrong type, an unknown name, a bad file or setting;
        NoAnswerError: no request met ``slo`` (``.payload``: the command's JSON, exit 1); DoesNotFitError: no fit.
    """
    from kvledger.analyses.serving import sim_cache
    from kvledger.cli.cost_boundary import check_seeds_given, cost_outcome, cost_request

    values = {k: v for k, v in locals().items() if k in _COST_PARAMS and k not in ("path", "simulate", "cache")}
    files = _files(path, simulate)  # the source, in the call's words; then --seeds and the rest as the command's
    with in_python_terms("cost", _COST_PARAMS), sim_cache.using(cache):
        args = _with_dp(_args(files, simulate, _as_flags(values)), values)
        check_seeds_given(args)
        out = cost_outcome(cost_request(args))
    return CostResult(python_document(out.document, _COST_PARAMS), out.report, out.capacity)  # notes: parameters


_COST_PARAMS = frozenset(inspect.signature(cost).parameters)
_TEXT = ("gpu_usd_per_hour", "kv_tier_host", "kv_tier_nvme", "max_model_len", "max_num_batched_tokens")
_COUNTS = ("monthly_tokens", "monthly_requests", "monthly_input_tokens", "monthly_output_tokens")


def _files(path: Any, simulate: str | None) -> list[Path] | None:
    """The paths to read, or None; one of ``path`` and ``simulate``, not both nor neither."""
    from kvledger.errors import InputError

    if (path is None) == (simulate is None):
        raise InputError("kvledger.cost: give either path (a benchmark output or records file) or simulate=MODEL "
                         "(with gpu), not " + ("both" if path is not None else "neither"))
    if path is None:
        return None
    paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
    if not paths:
        raise InputError("kvledger.cost(path=...): an empty sequence; give one path or more")
    return [Path(p) for p in paths]


def _args(files: list[Path] | None, simulate: str | None, values: dict[str, Any]) -> Any:
    """The command's arguments (``cost_boundary.CostArgs``): each parameter is the flag of the same name with
    underscores (``--max-model-len``: ``max_model_len``), so its field is found through the command's flags (read from
    its signature once, ``cost_cmd.flag_names``)."""
    from kvledger.cli.cost_boundary import args_of
    from kvledger.cli.cost_cmd import flag_names

    flags = flag_names()
    by_field = {f: values[name] for f, flag in flags.items() if (name := flag.lstrip("-").replace("-", "_")) in values}
    return args_of(files, simulate, by_field, flags)


def _with_dp(args: Any, values: dict[str, Any]) -> Any:
    """``args`` with the command's DP group (``SimDataParallelFlags``: SGLang's DP attention and pipeline stages
    refused) built from the call's values; refused with a FILE, as the command refuses it (``refuse_dp_on_files``)."""
    import dataclasses

    from kvledger.cli.dp_flags import SimDataParallelFlags, refuse_dp_on_files

    dp = SimDataParallelFlags(**{f.name: values[f.name] for f in dataclasses.fields(SimDataParallelFlags)})
    if args.files:
        refuse_dp_on_files(dp)
    return dataclasses.replace(args, dp=dp)


def _as_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The values as the command parses its flags: a size, a price list or a token count as text, a monthly volume
    through the flag's own parser (3e9, "3B"; more than 0)."""
    from kvledger.ledgers.volume_rate import volume_option

    out = {}
    for k, v in values.items():
        if v is not None and k in _TEXT:
            v = str(v)
        elif v is not None and k in _COUNTS:
            v = volume_option("--" + k.replace("_", "-"), positive=k in ("monthly_tokens", "monthly_requests"))(str(v))
        out[k] = v
    return out
