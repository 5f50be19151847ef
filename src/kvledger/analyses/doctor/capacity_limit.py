"""The capacity finding's --max-model-len option (capacity.py): half the logged limit, planned on the logged pool."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.context import DoctorContext, plan_with, stand_in_gpu

__all__ = ["shorter_limit_option"]


def shorter_limit_option(ctx: DoctorContext, base: Plan, budget: int,
                         per_req: float | None) -> tuple[str, Any, int, str]:
    """--max-model-len at half the logged limit: paged KV frees no memory by it, so it is planned on the logged pool
    (its block count where the log gives it, not the budget re-divided: the 2-decimal GiB would move it a block or
    two); below the size observed at saturation it would refuse those requests, and says so."""
    L, n = base.memory.max_model_len, ctx.log_blocks_plan and base.memory.num_gpu_blocks
    pool = {"num_gpu_blocks_override": n} if n else {"available_kv_memory_bytes": budget}
    half = plan_with(ctx.model, stand_in_gpu(ctx.log, ctx.gpu, ctx.settings), ctx.settings, max_model_len=L // 2,
                     **pool)
    refused = per_req is not None and per_req > L // 2
    v0 = " On V0 without chunked prefill it also shrinks the profile run (fewer activation bytes)" if (
        ctx.log.generation == "v0") else ""
    why = (f"it would refuse the requests observed (≈{per_req:,.0f} tokens each at saturation, above {L // 2:,}): "
           "none of them fits, so it is no remedy for this traffic; " if refused else "")
    return (f"--max-model-len {L // 2}", half, base.settings.tp,
            why + "the engine figure is for shorter requests; paged KV allocates blocks as tokens arrive, so this "
            "frees no KV memory: it only refuses requests longer than the new limit (worth it when a few long "
            "requests fill the cache)." + v0)
