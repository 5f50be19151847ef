"""The one path ``simulate``, ``goodput --simulate``, ``cost --simulate`` and ``report`` (and ``kvledger ui``'s serving
panel) take to the parallelism beyond TP: vLLM's DP ranks of a MoE model in lock-step (sim_dp.py), SGLang's DP attention
(sim_sglang_dp.py) and vLLM's pipeline stages (sim_pp.py), each checked before any planning. ``dp``: anything with the
fields of ``cli.dp_flags.SimDataParallelFlags`` (data_parallel_size, enable_dp_attention, attn_dp_size,
moe_a2a_backend, all2all_backend, pp), a dataclass; SGLang's --attn-dp-size N (0.5.22 on) read as --enable-dp-attention
--dp-size N (``fold_attn_dp``, ``accounting/attn_dp.py``); the refusals name the CLI's flags (the web app words them
as its fields)."""

from __future__ import annotations

from typing import Any

from kvledger.errors import InputError

__all__ = ["with_dp", "fold_attn_dp"]

_SG_WORKS = ("simulate takes SGLang's DP attention as --engine sglang --tp N --ep-size N --attn-dp-size N "
             "(deprecated: --enable-dp-attention --dp-size N) [--moe-a2a-backend none|deepep]")


def with_dp(args: Any, dp: Any, refused_with: str | None = None) -> Any:
    """``args`` (a ``SimRequestArgs``) with ``--data-parallel-size`` above 1, checked (``sim_dp.check_dp_request``):
    the one path simulate, goodput --simulate and cost --simulate take to vLLM's DP ranks in lock-step; ``args``
    unchanged without it; SGLang's DP attention the same way (``sim_sglang_dp.py``). ``refused_with``: what the command
    runs that the lock-step simulation does not serve (sessions, a host KV tier), refused with the DP ranks.

    Raises:
        InputError: ``refused_with`` given, or what ``check_dp_request`` refuses.
    """
    import dataclasses

    dp = fold_attn_dp(dp, "sglang" if args.policy == "sglang" else "vllm", args.engine_version, args.tp)
    if dp is not None and (dp.enable_dp_attention or dp.moe_a2a_backend):
        args = _with_dp_attention(args, dp)
    if dp is not None and dp.all2all_backend is not None:  # the memory plan's rows (accounting/vllm_all2all.py)
        args = dataclasses.replace(args, all2all_backend=dp.all2all_backend)
    if dp is not None and (dp.pp or 1) > 1:  # vLLM's pipeline stages (analyses/serving/sim_pp.py)
        args = _with_pp(args, dp, refused_with)
    if dp is None or (dp.data_parallel_size or 1) == 1:
        return args

    from kvledger.analyses.serving.sim_dp import check_dp_request

    n = dp.data_parallel_size
    if refused_with:
        raise InputError(f"--data-parallel-size {n} with {refused_with}: the DP ranks' lock-step simulation serves a "
                         "trace or a synthetic workload (open loop or --concurrency) from each rank's GPU pool; drop "
                         f"{refused_with}")
    args = dataclasses.replace(args, data_parallel_size=n)
    check_dp_request(args)
    return args


def fold_attn_dp(dp: Any, engine: str, engine_version: str | None, tp: int | None) -> Any:
    """``dp`` with its --attn-dp-size read as SGLang reads it (``accounting/attn_dp.py``): --enable-dp-attention
    --dp-size N; ``dp`` itself without it (or None).

    Raises:
        InputError: what ``resolve_attn_dp_size`` refuses (vLLM, a release before 0.5.22, two DP sizes).
    """
    if dp is None or dp.attn_dp_size is None:
        return dp
    import dataclasses

    from kvledger.accounting.attn_dp import resolve_attn_dp_size

    on, n = resolve_attn_dp_size(dp.attn_dp_size, dp.enable_dp_attention, dp.data_parallel_size, engine=engine,
                                 engine_version=engine_version, tp=tp)
    return dataclasses.replace(dp, enable_dp_attention=on, data_parallel_size=n, attn_dp_size=None)


def _with_dp_attention(args: Any, dp: Any) -> Any:
    """``args`` with SGLang's DP attention and all-to-all backend (sim_sglang_dp.py)."""
    import dataclasses

    if (dp.data_parallel_size or 1) == 1 or not dp.enable_dp_attention:
        given = ("--enable-dp-attention needs --dp-size above 1" if dp.enable_dp_attention else
                 f"--moe-a2a-backend {dp.moe_a2a_backend} needs DP attention, --attn-dp-size N above 1")
        raise InputError(f"{given}: {_SG_WORKS}")
    return dataclasses.replace(args, enable_dp_attention=True, moe_a2a_backend=dp.moe_a2a_backend)


def _with_pp(args: Any, dp: Any, refused_with: str | None) -> Any:
    """``args`` with ``--pp`` above 1, checked (``sim_pp.check_pp_request``)."""
    import dataclasses

    from kvledger.analyses.serving.sim_pp import check_pp_request

    if refused_with:
        raise InputError(f"--pp {dp.pp} with {refused_with}: the pipeline simulation serves a trace or a synthetic "
                         f"workload (open loop or --concurrency) from the stages' GPU KV pool; drop {refused_with}")
    args = dataclasses.replace(args, pp=dp.pp, data_parallel_size=dp.data_parallel_size)
    check_pp_request(args)
    return args
