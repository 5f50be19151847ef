"""``kvledger search --csv``: one row per candidate, in rank order (the unranked ones after, in ledger order), each
engine setting as the candidate ran it, and the KV tier's share of an ``--offload`` variant's bill.

A fresh-user trial found the rows in ledger order, the default candidates' max_num_seqs, max_num_batched_tokens and
enable_prefix_caching empty although the launch line sets the first two, and an offload row's rental_usd_per_month
above its GPUs' rent with no column saying by what: ``kv_tier_usd_per_month`` is that, so GPUs billed × $/GPU-h × 730 +
kv_tier_usd_per_month = rental_usd_per_month.

A disaggregated unit's row names both pools (it gave the prefill side's alone: ``tp`` and ``num_gpu_blocks`` are the
prefill engine's): ``prefill_replicas`` × ``tp`` + ``decode_replicas`` × ``decode_tp`` = ``num_gpus_per_unit``, and
``decode_num_gpu_blocks`` the decode engine's KV blocks; blank for a colocated candidate, whose unit is one engine of
``tp`` GPUs."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["CSV_COLUMNS", "csv_rows"]

CSV_COLUMNS = ["rank", "id", "layout", "gpu_id", "tp", "num_gpus_per_unit", "prefill_replicas", "prefill_gpus",
               "decode_replicas", "decode_tp", "decode_gpus", "kv_cache_dtype", "max_num_seqs",
               "max_num_batched_tokens", "enable_prefix_caching", "status", "reason", "detail", "usd_per_gpu_hour",
               "price_provider", "num_gpu_blocks", "decode_num_gpu_blocks", "goodput_req_per_s",
               "slo_capacity_req_per_s", "output_tok_per_s_per_gpu", "tok_per_s_per_user", "usd_per_mtok_input",
               "usd_per_mtok_output", "usd_per_1k_requests", "utilization", "replicas", "num_gpus",
               "kv_tier_usd_per_month", "rental_usd_per_month", "pareto"]


def _plain_attention(model_id: str) -> bool:
    """Whether every layer of the model is plain attention over the whole context (no window, state or sparse
    index): vLLM's prefix caching is then on by default and the simulator runs it so; a hybrid layout's is decided per
    workload (``serving.sim_setup``), left blank here."""
    from kvledger.catalog.layers import FullAttention, MLAAttention
    from kvledger.catalog.models import load_model

    return all(type(x) is FullAttention or (type(x) is MLAAttention and not x.window_tokens and not x.index_topk)
               for x in load_model(model_id).layers)


def _settings(e: dict[str, Any], plan: dict[str, Any], plain: bool) -> dict[str, Any]:
    """The candidate's engine settings as it ran: a default (None) filled with the plan's value, which the launch line
    passes (``launch``: --max-num-seqs, --max-num-batched-tokens); prefix caching on by default for a plain-attention
    model, colocated (a disaggregated unit's decode pool runs without it: left blank)."""
    pc = e["enable_prefix_caching"]
    if pc is None and plain and plan and not e.get("decode_tp"):
        pc = True
    return {"max_num_seqs": e["max_num_seqs"] if e["max_num_seqs"] is not None else plan.get("max_num_seqs"),
            "max_num_batched_tokens": (e["max_num_batched_tokens"] if e["max_num_batched_tokens"] is not None
                                       else plan.get("max_num_batched_tokens")),
            "enable_prefix_caching": pc}


def _pools(e: dict[str, Any]) -> dict[str, Any]:
    """GPUs per deployment unit and, for a disaggregated unit, each pool's engines, TP and GPUs (None: colocated)."""
    tp = e["tp"]
    if not e.get("decode_tp"):
        return {"num_gpus_per_unit": e.get("num_gpus_per_unit", tp), "prefill_replicas": None, "prefill_gpus": None,
                "decode_replicas": None, "decode_tp": None, "decode_gpus": None, "decode_num_gpu_blocks": None}
    p, d, dtp = e["prefill_replicas"], e["decode_replicas"], e["decode_tp"]
    return {"num_gpus_per_unit": p * tp + d * dtp, "prefill_replicas": p, "prefill_gpus": p * tp,
            "decode_replicas": d, "decode_tp": dtp, "decode_gpus": d * dtp,
            "decode_num_gpu_blocks": (e.get("decode_plan") or {}).get("num_gpu_blocks")}


def _row(e: dict[str, Any], rank: int | None, pareto: bool | None, plain: bool) -> dict[str, Any]:
    cap, cost, siz = e.get("capacity") or {}, e.get("cost") or {}, e.get("sizing") or {}
    price, plan = e.get("price") or {}, e.get("plan") or {}
    tier = (siz["replicas"] * siz["tier_usd_per_month_per_unit"]
            if siz.get("replicas") is not None and siz.get("tier_usd_per_month_per_unit") is not None else None)
    # the layout as the table and --json name it (``Candidate.layout``: tp2+ep, a disaggregated unit's pools)
    r = {"rank": rank, "id": e["id"], "layout": e.get("layout", f"tp{e['tp']}"), "gpu_id": e["gpu_id"], "tp": e["tp"],
         **_pools(e), "kv_cache_dtype": e["kv_cache_dtype"], **_settings(e, plan, plain),
         "status": e["status"], "reason": e.get("reason"), "detail": e.get("detail"),
         "usd_per_gpu_hour": price.get("usd_per_gpu_hour"), "price_provider": price.get("provider"),
         "num_gpu_blocks": plan.get("num_gpu_blocks"), "goodput_req_per_s": cap.get("goodput_req_per_s"),
         "slo_capacity_req_per_s": cap.get("slo_capacity_req_per_s"),
         "output_tok_per_s_per_gpu": cap.get("goodput_output_tok_per_s_per_gpu"),
         "tok_per_s_per_user": cap.get("tok_per_s_per_user"), "usd_per_mtok_input": cost.get("usd_per_mtok_input"),
         "usd_per_mtok_output": cost.get("usd_per_mtok_output"), "usd_per_1k_requests": cost.get("usd_per_1k_requests"),
         "utilization": cost.get("utilization"), "replicas": siz.get("replicas"), "num_gpus": siz.get("num_gpus"),
         "kv_tier_usd_per_month": tier, "rental_usd_per_month": siz.get("rental_usd_per_month"), "pareto": pareto}
    return {k: ("" if v is None or (isinstance(v, float) and not math.isfinite(v)) else v) for k, v in r.items()}


def csv_rows(result: Any) -> list[dict[str, Any]]:
    """One row per candidate under ``CSV_COLUMNS``, ranked ones first in rank order, then the rest in ledger order;
    blank where a figure does not apply."""
    rank = {cid: n for n, cid in enumerate(result.ranking, start=1)}
    front = {p["id"] for p in result.frontier}
    plain = any(e.get("plan") for e in result.entries) and _plain_attention(result.spec.model)
    ordered = sorted(result.entries, key=lambda e: rank.get(e["id"], len(rank) + 1))  # stable: ledger order after
    return [_row(e, rank.get(e["id"]), e["id"] in front if e["status"] == "feasible" else None, plain)
            for e in ordered]
