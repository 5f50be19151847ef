"""The first pass over every candidate, before any simulation: its memory plan and its rental price, or the reason it
is rejected, with the numbers.

Rejection reasons (the ledger's ``reason`` field):

- ``does not fit``: the vLLM memory plan leaves no KV block (weights, activation peak and the
  other deductions exceed ``gpu_memory_utilization`` × the device);
- ``max_model_len``: the pool exists but one request of ``max_model_len`` tokens needs more blocks
  than it holds (vLLM refuses to start);
- ``engine refuses to start``: the engine release refuses the candidate's checkpoint on its GPU (a quantization
  method below its minimum compute capability), with the engine's words;
- ``invalid setting``: the engine would refuse the settings (a TP that does not divide the heads, an
  unknown KV dtype), with the planner's message;
- ``no price row``: no rental row for the GPU (of ``--gpu-provider`` when given).

Later passes add ``SLO not met at any rate`` (no probed rate meets the target), ``SLO met only within the run's
noise`` (met even near idle only within its sampling noise: ``serving.idle_edge``), both in ``reasons``, and
``simulation error`` / ``worker failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvledger.accounting.vllm_rules import version_tuple
from kvledger.analyses.search.instance_bill import engine_groups
from kvledger.analyses.search.reasons import ENGINE_REFUSES, NO_INSTANCE, NO_INSTANCE_DP, NO_PRICE_ROW
from kvledger.analyses.search.spec import Candidate, SearchSpec
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.catalog.quant_rules import deprecated_method_note
from kvledger.errors import EngineRefusalError, KvLedgerError, UnknownNameError
from kvledger.ledgers.instances import POD_MAX_GPUS

__all__ = ["sim_args", "screen_candidate", "price_row", "price_rows", "cheapest", "plan_figures", "price_dict",
           "packing_price"]


def sim_args(spec: SearchSpec, cand: Candidate) -> SimRequestArgs:
    """The simulation (and plan) inputs of one candidate: the spec's workload and fixed settings, the candidate's
    axes; ``--gpu-profile FILE`` prices the candidates on the GPU it was fitted on (the others keep their default);
    ``--client-latency``, the same for every candidate (``latency.latency_arg``); ``--allreduce-link-share``, every
    candidate's TP all-reduces (and so the bounds, which price this simulation's step cost: ``bounds.py``)."""
    from kvledger.accounting.gpu_profile_search import choice_for_gpu
    from kvledger.analyses.search.latency import latency_arg
    from kvledger.catalog.gpu_file import resolve_gpu

    profile = spec.gpu_profile and choice_for_gpu(spec.gpu_profile, resolve_gpu(cand.gpu_id).name)
    dpa = bool(spec.enable_dp_attention) and cand.tp > 1  # SGLang's DP attention: dp = ep = tp (sim_sglang_dp.py)
    return SimRequestArgs(model=spec.model, gpu=cand.gpu_id, trace=spec.trace, num_requests=spec.num_requests,
                          seed=spec.seed, shared_prefix_tokens=spec.shared_prefix_tokens,
                          document_pool=spec.document_pool,
                          engine_version=spec.engine_version, tp=cand.tp,
                          max_model_len=spec.max_model_len, gpu_memory_utilization=spec.gpu_memory_utilization,
                          mem_fraction_static=spec.mem_fraction_static,
                          kv_cache_dtype=cand.kv_cache_dtype, max_num_batched_tokens=cand.max_num_batched_tokens,
                          max_num_seqs=cand.max_num_seqs, enable_prefix_caching=cand.enable_prefix_caching,
                          step_cost=spec.step_cost, cpu_overhead=spec.cpu_overhead, gpu_profile=profile or None,
                          gemm_efficiency=spec.gemm_efficiency, allreduce_link_share=spec.allreduce_link_share,
                          wddm=spec.wddm or None, quantization=spec.quantization,
                          client_latency=latency_arg(spec), enable_expert_parallel=cand.enable_expert_parallel,
                          mamba_ssm_cache_dtype=spec.mamba_ssm_cache_dtype or "auto",
                          inter_node_link=spec.inter_node_link,
                          prefix_cache_retention_interval=spec.prefix_cache_retention_interval,
                          data_parallel_size=cand.tp if dpa else cand.data_parallel_size,  # ranks in lock-step
                          all2all_backend=spec.all2all_backend if cand.data_parallel_size else None,
                          ep_size=cand.tp if dpa else None, enable_dp_attention=True if dpa else None,
                          policy=spec.engine)  # "sglang": SGLang's plan and scheduler, as cost --simulate runs it


def price_rows(gpu_id: str, provider: str | None, usd_per_gpu_hour: float | Mapping[str, float] | None = None,
               gpus_per_replica: int = 1) -> tuple[Any, ...]:
    """The rental rows that may price ``gpu_id`` (of ``provider`` when given) and hold a replica of
    ``gpus_per_replica`` GPUs on one instance (an instance of that many GPUs or more, or a one-GPU row that rents
    several per replica: ``kvledger.ledgers.instances.holds_replica``), in file order; the user's price
    (--gpu-usd-per-hour: one number, or a list with ``gpu_id``'s) alone when given; () when there is none (a GPU file
    has none)."""
    from kvledger.catalog.given_prices import given_source, given_usd
    from kvledger.catalog.prices import GpuPrice, find_gpu_prices

    usd = given_usd(usd_per_gpu_hour, gpu_id)
    if usd is not None:
        return (GpuPrice("given", "user", gpu_id, gpu_id, "--gpu-usd-per-hour", 1, usd, usd, "user input", "", "",
                         given_source(usd_per_gpu_hour, gpu_id, provider), "user input", ""),)
    try:
        rows = find_gpu_prices(gpu_id, provider)
    except UnknownNameError:
        return ()
    from kvledger.ledgers.instances import holds_replica

    return tuple(r for r in rows
                 if holds_replica(r.gpus_per_instance, r.per_gpu, gpus_per_replica))


def price_row(gpu_id: str, provider: str | None, usd_per_gpu_hour: float | Mapping[str, float] | None = None,
              gpus_per_replica: int = 1) -> Any:
    """The cheapest per GPU-hour of ``price_rows`` (ties go to the first in the file), or None when there is none.
    The monthly bill and the tokens are priced on the cheapest packing of ``price_rows`` (``evaluate``)."""
    return cheapest(price_rows(gpu_id, provider, usd_per_gpu_hour, gpus_per_replica))


def cheapest(rows: tuple[Any, ...]) -> Any:
    """The row of ``rows`` cheapest per GPU-hour (ties: the first in the file), or None when there is none: a planned
    candidate's price and the rate whose options ``evaluate`` packs (``price_row``)."""
    return min(rows, key=lambda r: r.usd_per_gpu_hour) if rows else None


def plan_figures(plan: Any) -> dict[str, Any]:
    """The memory-plan figures the ledger keeps for a candidate (what ``kvledger plan`` prints for the same flags)."""
    m = plan.memory
    low = (m.ranges or {}).get("max_concurrency", (None,))[0]  # the plan's range: one max_model_len request may not fit
    return {**({"max_concurrency_low": low} if low is not None and low < 1 else {}),
            "engine": m.engine, "engine_version": m.engine_version, m.fraction_name: m.fraction,
            "kv_bytes_per_token_per_gpu": plan.kv.bytes_per_token,
            "weight_bytes_model": round(plan.model.weight_bytes()),  # B, a whole number (the sum is a float)
            "weight_bytes_per_gpu": next((round(d.bytes) for d in m.deductions if d.name == "weights"), None),
            "available_kv_bytes": m.available_kv_bytes, "num_gpu_blocks": m.num_gpu_blocks,
                "usable_blocks": m.usable_blocks,
            "block_size": m.block_size, "max_model_len": m.max_model_len,
                "max_num_batched_tokens": m.max_num_batched_tokens,
            "max_num_seqs": m.max_num_seqs, "kv_cache_dtype": plan.settings.kv_cache_dtype,
            "source": f"kvledger.accounting.plan.build_plan ({'SGLang' if m.engine == 'sglang' else 'vLLM'} memory "
                      "rules)",  # mem_fraction_static for SGLang (its max_num_seqs: max_running_requests)
            **({"wddm": True} if plan.settings.wddm else {}),  # --wddm: the check line plans it so
            **({"quantization": q} if (q := plan.settings.quantization) else {}),  # -q fp8: every launch line
            **({"allow_deprecated_quantization": True} if _deprecated(plan) else {}),  # fbgemm_fp8 from vLLM 0.14
            **({"mamba_ssm_cache_dtype": d} if (d := plan.settings.mamba_ssm_cache_dtype) != "auto" else {}),
            **({"enable_expert_parallel": True} if plan.settings.enable_expert_parallel else {}),  # vLLM's lines
            **({"nnodes": n} if (n := plan.settings.nnodes) > 1 else {}),  # past one node: launch.py's node lines
            **_dp_figures(plan),  # vLLM's DP ranks: their count and the nodes they span
            **({"startup": m.startup.to_dict()} if m.startup is not None else {})}  # --wddm: does vLLM start


def _deprecated(plan: Any) -> bool:
    """Whether vLLM starts the plan's checkpoint only with --allow-deprecated-quantization (quant_rules.py)."""
    ver = version_tuple(plan.memory.engine_version)
    return plan.memory.engine == "vllm" and ver is not None and bool(deprecated_method_note(plan.model.quant, ver))


def _dp_figures(plan: Any) -> dict[str, Any]:
    """``data_parallel_size`` (above 1) and the ``nnodes`` its DP × TP GPUs span (``dp_axis.dp_nnodes``, past one)."""
    dp = plan.settings.data_parallel_size or 1
    if plan.settings.enable_dp_attention:  # SGLang's DP attention: dp ranks inside one TP group of tp GPUs
        return {"enable_dp_attention": True, "dp_size": dp, "ep_size": plan.settings.ep_size or dp}
    if dp == 1:
        return {}
    from kvledger.analyses.search.dp_axis import dp_nnodes

    n = max(plan.settings.nnodes, dp_nnodes(plan.gpu, plan.settings.tp, dp))
    return {"data_parallel_size": dp, **({"nnodes": n} if n > 1 else {}),
            **({"all2all_backend": b} if (b := plan.settings.all2all_backend) else {})}  # vLLM's lines and the plan


def price_dict(row: Any) -> dict[str, Any]:
    """A price row as a candidate's ``price``: its USD per GPU-hour, provider, instance, date, confidence, source."""
    return {"usd_per_gpu_hour": row.usd_per_gpu_hour, "provider": row.provider, "instance_type": row.instance_type,
            "pricing_model": row.pricing_model, "as_of": row.as_of, "confidence": row.confidence,
            "source": row.source if row.provider_type == "user" else f"gpu_prices.csv {row.key}; {row.source}"}


def packing_price(rows: tuple[Any, ...], packing: Any) -> dict[str, Any]:
    """A candidate's ``price``: the price row its packing rents (``screen.price_dict``), or for a mix of rows the
    first row's with the mix's USD per billed GPU-hour (the bill ÷ the GPUs billed, as its ledgers price), every row
    (``rows``: key, instances, GPUs per instance, USD per GPU-hour) and the lowest confidence among them."""
    from kvledger.ledgers.packings import packing_rows

    by_key = {r.key: r for r in rows}
    first = by_key.get(packing.rate.key, rows[0])
    if not packing.mixed:
        return price_dict(first)
    rented = [by_key[r.key] for r, _ in packing.rows if r.key in by_key]
    rank = ("low", "medium", "high")
    worst = min((r.confidence for r in rented), key=lambda c: rank.index(c) if c in rank else len(rank))
    return {**price_dict(first), "usd_per_gpu_hour": packing.usd_per_gpu_hour, "confidence": worst,
            "instance_type": " + ".join(r.instance_type for r in rented),
            "source": "; ".join(f"gpu_prices.csv {r.key}; {r.source}" for r in rented),
            "rows": packing_rows(packing)}


def _reject(cand: Candidate, reason: str, detail: str, **extra: Any) -> dict[str, Any]:
    return {**cand.to_dict(), "status": "rejected", "reason": reason, "detail": detail, **extra}


def _check_plan(spec: SearchSpec, cand: Candidate, tp: int, pool: str) -> tuple[dict[str, Any] | None, Any]:
    """(rejection or None, plan) for one engine of the candidate at TP ``tp``; ``pool`` prefixes the detail."""
    from dataclasses import replace

    from kvledger.analyses.serving.sim_setup import load_plan

    try:
        args = replace(sim_args(spec, cand), tp=tp)
        if args.data_parallel_size:  # what the lock-step simulation does not model (a measured step table)
            from kvledger.analyses.serving.sim_dp import check_dp_request

            check_dp_request(args)
        plan, _ = load_plan(args)
        if args.enable_dp_attention:  # the layouts SGLang's lock-step simulation models (report's check)
            from kvledger.analyses.serving.sim_sglang_dp import check_sglang_dp

            check_sglang_dp(plan)
    except EngineRefusalError as err:  # a valid setting this engine release does not start on the GPU
        return _reject(cand, ENGINE_REFUSES, pool + str(err)), None
    except KvLedgerError as err:
        return _reject(cand, "invalid setting", pool + str(err)), None
    m, figures = plan.memory, plan_figures(plan)
    gib = 2**30
    if not m.fits:
        deductions = ", ".join(f"{d.name} {d.bytes / gib:.2f} GiB" for d in m.deductions)
        budget = (f"{m.fraction_name} {m.fraction:g} × {m.gpu_total_bytes / gib:.2f} GiB" if m.engine != "sglang" else
                  f"SGLang's {m.requested_bytes / gib:.2f} GiB ({m.requested_label})")  # its fraction: a reserve
        return _reject(cand, "does not fit",
                       f"{pool}{budget} is short by "
                       f"{-m.available_kv_bytes / gib:.2f} GiB before any KV cache, per GPU at TP {tp} ({deductions})",
                       plan=figures), plan
    if not plan.fits:
        longest = m.usable_blocks * m.block_size
        return _reject(cand, "max_model_len",
                       f"{pool}one request of max_model_len {m.max_model_len:,} tokens needs "
                       f"{plan.at_max_model_len.blocks_per_request:,} blocks; the pool holds {m.usable_blocks:,} "
                       f"usable "
                       f"blocks of {m.block_size} tokens ({m.available_kv_bytes / gib:.2f} GiB): --max-model-len ≤ "
                       f"about "
                       f"{longest:,} would start", plan=figures), plan
    return None, plan


def screen_candidate(spec: SearchSpec, cand: Candidate) -> dict[str, Any]:
    """The candidate's ledger entry after planning and pricing: ``status`` "rejected" (``reason``, ``detail`` with the
    numbers) or "planned" (``plan`` figures — and ``decode_plan`` for a disaggregated unit — and ``price``), ready for
    the capacity search."""
    rejected, plan = _check_plan(spec, cand, cand.tp, "prefill pool: " if cand.disagg else "")
    if rejected is not None:
        return rejected
    extra: dict[str, Any] = {}
    if cand.disagg:
        rejected, dplan = _check_plan(spec, cand, cand.decode_tp, "decode pool: ")
        if rejected is not None:
            return rejected
        extra["decode_plan"] = _launch_figures(spec, dplan)
    widest = max(k for _, k in engine_groups(cand))  # an engine's GPUs sit on one instance
    price = price_row(cand.gpu_id, spec.gpu_provider, spec.gpu_usd_per_hour, widest)
    if price is None:
        where = f" at {spec.gpu_provider}" if spec.gpu_provider else ""
        what = ("a GPU file has no catalog price; pass --gpu-usd-per-hour" if plan.gpu.gpu_id == "custom" else
                f"gpu_prices.csv has no rental row for {cand.gpu_id}{where}")
        reason = NO_PRICE_ROW
        if plan.gpu.gpu_id != "custom" and price_row(cand.gpu_id, spec.gpu_provider):
            reason = NO_INSTANCE_DP if (cand.data_parallel_size or 1) > 1 else NO_INSTANCE
            what = (f"no rental row for {cand.gpu_id}{where} sells an instance of {widest} GPUs or more (an engine's "
                    f"TP group, or its DP × TP ranks, sits on one instance; a one-GPU VM holds a TP-1 engine only), "
                    "nor per GPU"
                    + (f" (a marketplace pod is one machine, at most {POD_MAX_GPUS} GPUs: {_spans(cand, widest)} "
                       "nodes, and no row sells a multi-node cluster with its interconnect; --gpu-usd-per-hour gives "
                       "its price)" if widest > POD_MAX_GPUS else "") + ": "
                    + "; ".join(f"{r.key} ({_gpus(r.gpus_per_instance)})" for r in price_rows(cand.gpu_id,
                                                                                            spec.gpu_provider)))
        return _reject(cand, reason, what,
                       plan=_launch_figures(spec, plan), **extra)
    return {**cand.to_dict(), "status": "planned", "reason": None, "detail": None, "gpu_name": plan.gpu.name,
            "plan": _launch_figures(spec, plan), **extra, "price": price_dict(price)}


def _gpus(n: int) -> str:
    return f"{n} GPU{'s' * (n != 1)}"


def _spans(cand: Candidate, widest: int) -> str:
    """What spans nodes, in words: a TP group, or a DP × TP engine's ranks."""
    dp = cand.data_parallel_size or 1
    return f"TP {widest} spans" if dp == 1 else f"DP {dp} × TP {widest // dp} ({widest} GPUs) span"


def _launch_figures(spec: SearchSpec, plan: Any) -> dict[str, Any]:
    """``plan_figures`` with the --max-model-len its launch line carries when the range's low end may not start
    (``launch_len.launch_len_figures``) and a --prefix-cache-retention-interval its launch line carries."""
    from kvledger.analyses.search.launch_len import launch_len_figures
    from kvledger.analyses.serving.retention_flag import launch_words

    figures = plan_figures(plan)
    i = spec.prefix_cache_retention_interval  # positive, or 0 before 0.29 (VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0)
    retention = {"prefix_cache_retention_interval": i} if any(launch_words(i, spec.engine_version)) else {}
    return {**figures, **launch_len_figures(spec, plan, figures), **retention}  # the vllm line's flag (launch.py)
