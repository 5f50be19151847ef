"""The capacity side of the FP8 KV analysis: the two pools side by side and how long a context each holds at a given
concurrency (the engine's demand rule, ``accounting.plan.concurrency_rows``); apart from ``fp8_kv`` to keep it small."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.plan import Plan, concurrency_rows

__all__ = ["Fp8Capacity", "capacity", "requests_at", "max_context_holding", "default_curve_contexts", "start_up",
           "start_ups"]


def start_up(plan: Plan) -> tuple[dict[str, int | bool], Exception | None]:
    """Whether the engine starts with this plan's pool at its max_model_len (vLLM's start-up check: one request of
    max_model_len must fit the usable blocks, ``EngineConfig._check_pool``): ({starts, need_blocks, usable_blocks},
    the refusal or None). FP8 KV doubles the pool, so a 16-bit plan that does not start may start in fp8."""
    from kvledger.analyses.serving.from_plan import engine_config_from_plan
    from kvledger.errors import DoesNotFitError

    try:
        cfg, _ = engine_config_from_plan(plan)
    except DoesNotFitError as e:
        cause = e if hasattr(e, "need_blocks") else e.__cause__
        if cause is None or not hasattr(cause, "need_blocks"):
            raise
        return {"starts": False, "need_blocks": cause.need_blocks, "usable_blocks": cause.usable_blocks}, e
    need = cfg.blocks_needed(cfg.max_model_len)
    if cfg.step_blocks is not None:
        need = max(need, cfg.step_blocks.admission(cfg.max_model_len))
    return {"starts": True, "need_blocks": need, "usable_blocks": cfg.num_usable_blocks}, None


def start_ups(pb: Plan, pf: Plan) -> dict:
    """Both pools' start-up checks at max_model_len: {max_model_len, bf16, fp8} (``start_up``'s figures).

    Raises:
        DoesNotFitError: not even the fp8 pool holds one request of max_model_len (exit 3), with its figures.
    """
    from kvledger.errors import DoesNotFitError

    (st_b, _), (st_f, err_f) = start_up(pb), start_up(pf)
    if err_f is not None:
        raise DoesNotFitError(f"neither bf16 nor fp8 KV starts {pb.model.name} on {pb.gpu.name}: with fp8 KV "
                              f"{err_f}") from err_f
    return {"max_model_len": pb.memory.max_model_len, "bf16": st_b, "fp8": st_f}


def requests_at(plan: Plan, context_tokens: int) -> int:
    """Whole requests of ``context_tokens`` the plan's pool holds at once (the engine's demand rule), count."""
    return concurrency_rows(plan.memory, plan.layout, plan.kv, plan.inflight_tokens, [context_tokens])[0].max_requests


def max_context_holding(plan: Plan, num_requests: int) -> int:
    """Longest context (≤ max_model_len) at which the pool holds ``num_requests`` whole requests, tokens; 0 if none."""
    top = plan.memory.max_model_len
    if requests_at(plan, 1) < num_requests:
        return 0
    if requests_at(plan, top) >= num_requests:
        return top
    lo, hi = 1, top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if requests_at(plan, mid) >= num_requests:
            lo = mid
        else:
            hi = mid
    return lo


def default_curve_contexts(max_model_len: int) -> list[int]:
    """512 tokens doubling up to max_model_len, and max_model_len itself, tokens."""
    out, c = [], 512
    while c < max_model_len:
        out.append(c)
        c *= 2
    return out + [max_model_len]


@dataclass(frozen=True)
class Fp8Capacity:
    """The two pools side by side (per GPU).

    Attributes:
        bf16 / fp8: blocks, block_size (tokens), bytes_per_block, pool_tokens, available_kv_bytes, elem_bytes (B).
        rows: per context: max_concurrency (engine figure, ×) and max_requests (whole requests) for both.
        target_concurrency: the concurrency asked about, count.
        bf16_max_context_tokens / fp8_max_context_tokens: longest context holding that many whole requests, tokens.
    """

    bf16: dict[str, float]
    fp8: dict[str, float]
    rows: tuple[dict[str, float], ...]
    target_concurrency: int
    bf16_max_context_tokens: int
    fp8_max_context_tokens: int


def _pool(p: Plan) -> dict[str, float]:
    m = p.memory
    return {"num_gpu_blocks": m.num_gpu_blocks, "block_size": m.block_size, "bytes_per_block": m.bytes_per_block,
            "pool_tokens": m.num_gpu_blocks * m.block_size, "available_kv_bytes": m.available_kv_bytes,
            "elem_bytes": p.kv.elem_bytes, "bytes_per_token": p.kv.bytes_per_token}


def capacity(pb: Plan, pf: Plan, n: int) -> Fp8Capacity:
    rows = tuple({"context_tokens": a.context_tokens, "bf16_max_concurrency": a.max_concurrency,
                  "fp8_max_concurrency": b.max_concurrency, "bf16_max_requests": a.max_requests,
                  "fp8_max_requests": b.max_requests} for a, b in zip(pb.concurrency, pf.concurrency))
    return Fp8Capacity(_pool(pb), _pool(pf), rows, n, max_context_holding(pb, n), max_context_holding(pf, n))
