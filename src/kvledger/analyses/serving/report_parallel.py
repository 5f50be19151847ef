"""The report's parallelism beyond TP (``kvledger report``'s flags and ``kvledger ui``'s fields, one check for both):
SGLang's --ep-size (refused as cost --simulate refuses it, ``analyses/ep_flags.py``) and DP attention with its
all-to-all backend (sim_sglang_dp.py), vLLM's DP ranks, all-to-all backend (vllm_all2all.py) and pipeline stages
(sim_pp.py), as the engine settings every plan and simulation of the report takes, checked on the path cost --simulate
takes (``sim_parallel.with_dp``) before any work."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["parallel_engine", "check_report_dp"]


def parallel_engine(model: str, policy: str | None, tp: int | None, ep_size: int | None, dp: Any,
                    engine_version: str | None) -> dict[str, Any]:
    """The engine settings of the parallelism flags (``policy``: the simulator's, None for vLLM; ``dp``: the fields of
    ``cli.dp_flags.SimDataParallelFlags``, or None; ``engine_version``: the release, for --attn-dp-size), by
    ``SimRequestArgs`` field name; --ep-size refused where cost --simulate refuses it; SGLang's --attn-dp-size N read
    as --enable-dp-attention --dp-size N (``sim_parallel.fold_attn_dp``).

    Raises:
        InputError: --ep-size off SGLang, or for a dense model (``ep_flags.refuse_ep_flags``' words); what
            ``fold_attn_dp`` refuses (--attn-dp-size under vLLM, before SGLang 0.5.22, with a second DP size).
    """
    out: dict[str, Any] = {}
    if ep_size is not None:  # SGLang's --ep-size: refused off SGLang or where SGLang refuses it (ep_flags.py)
        from kvledger.analyses.ep_flags import refuse_ep_flags
        from kvledger.catalog.models import load_model

        refuse_ep_flags(str(policy or "vllm"), tp or 1, ep_size, None, load_model(model), ("simulation", "report"))
        if ep_size != 1:  # 1: SGLang's default, no expert parallelism
            out["ep_size"] = ep_size
    if dp is None:
        return out
    from kvledger.analyses.serving.sim_parallel import fold_attn_dp

    dp = fold_attn_dp(dp, policy or "vllm", engine_version, tp)  # --attn-dp-size N (accounting/attn_dp.py)
    if dp.enable_dp_attention:  # before the size: the command lines read --enable-dp-attention --dp-size N
        out["enable_dp_attention"] = True
    if (dp.data_parallel_size or 1) > 1:
        out["data_parallel_size"] = dp.data_parallel_size
    if dp.moe_a2a_backend:
        out["moe_a2a_backend"] = dp.moe_a2a_backend.lower()
    if dp.all2all_backend:
        out["all2all_backend"] = dp.all2all_backend
    if (dp.pp or 1) > 1:
        out["pp"] = dp.pp
    return out


def check_report_dp(req: Any, dp: Any) -> None:
    """The ``decision_data.ReportRequest`` ``req``'s DP ranks, DP attention and pipeline stages checked as cost
    --simulate checks them (``sim_parallel.with_dp``), before any simulation; nothing without them.

    Raises:
        InputError: what ``with_dp`` refuses (DP attention without --dp-size above 1, a dense model's DP ranks, …).
    """
    engine = req.engine
    if "data_parallel_size" in engine or "pp" in engine or (dp and (dp.enable_dp_attention or dp.moe_a2a_backend)):
        from kvledger.analyses.serving.decision_data import sim_args
        from kvledger.analyses.serving.sim_parallel import with_dp

        with_dp(dataclasses.replace(sim_args(req), data_parallel_size=None, enable_dp_attention=None,
                                    moe_a2a_backend=None), dp)
