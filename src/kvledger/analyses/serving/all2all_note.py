"""The simulation's note on vLLM's ``--all2all-backend``, as ``kvledger plan`` states it (``dp_attention``): which
backend runs, the MoE rows the DP ranks' memory plan counts for it (``vllm_all2all``), and what the simulation does not
model: the lock-step step cost (``dp_lockstep_cost``) prices every backend's MoE communication as the default
allgather_reducescatter's all-gather and reduce-scatter, so another backend's dispatch and combine (DeepEP, pplx, mori,
NIXL, FlashInfer kernels) and their buffers are not priced; a given backend where vLLM runs none is said to change
nothing, as the plan says it.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.dp_attention import a2a_rows_words, unused_all2all_note
from kvledger.accounting.vllm_all2all import settings_choice

__all__ = ["all2all_note"]


def all2all_note(plan: Any) -> str | None:
    """The note for a vLLM plan's all2all backend; None where vLLM runs none and none was given, or off vLLM."""
    s, dp = plan.settings, plan.data_parallel
    if s.engine != "vllm":
        return None
    if dp is None or not dp.moe_profile_tokens:  # DP 1 or no expert parallelism: vLLM runs no all2all backend
        return unused_all2all_note(s) if s.all2all_backend else None
    a2a = settings_choice(plan.memory.engine_version, s.all2all_backend)
    t, rows = plan.memory.max_num_batched_tokens, dp.moe_profile_tokens
    how = f"DP {dp.ranks} × {t:,}" if rows == dp.ranks * t else f"DP {dp.ranks} × min({t:,}, 256)"
    priced = ("the step cost prices its all-gather and reduce-scatter (the data-parallel note)"
              if a2a.backend == "allgather_reducescatter" else
              f"the step cost prices the MoE layers' communication as allgather_reducescatter's all-gather and "
              f"reduce-scatter (the data-parallel note), not {a2a.backend}'s dispatch and combine kernels, whose "
              "time and buffers are not modelled")
    return (f"all2all backend {a2a.backend}: the memory plan's profile run (kvledger plan's rows) works on "
            f"{a2a_rows_words(s, dp.ranks)}: {how} = {rows:,} rows per GPU; {priced}")
