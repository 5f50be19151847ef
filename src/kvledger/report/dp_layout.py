"""The report's words on a data-parallel layout (the plan section's ``data_parallel``, ``accounting/dp_node.py``):
SGLang's DP attention (``--attn-dp-size N``, before 0.5.22 ``--enable-dp-attention --dp-size N``: N DP ranks inside the
one TP group, attention TP tp / N each, SGLang 0.5.23 ``layers/dp_attention.py``) or vLLM's DP ranks of a MoE model
(N × TP GPUs), each rank its own scheduler and KV pool; and the KV concurrency the plan states per rank, with the
total."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.attn_dp import dp_attention_words

__all__ = ["dp_layout_text", "per_rank_words"]


def dp_layout_text(plan: dict[str, Any], model: str) -> str:
    """``; DP attention: …`` for the report's engine line (empty without data parallelism): the ranks, the GPUs they
    share, attention TP, the KV tokens per rank and in all, and SGLang's launch flags for its DP attention."""
    dp = plan.get("data_parallel")
    if not dp:
        return ""
    s, n, gpus = plan["settings"], dp["data_parallel_size"], dp["gpus"]
    per, total = dp["kv_tokens_per_rank"], dp["kv_tokens_total"]
    pools = (f"each its own scheduler and KV pool of {per:,} tokens ({n} × {per:,} = {total:,} tokens in all), "
             "a request routed to one rank")
    if not s.get("enable_dp_attention"):  # vLLM's DP ranks: each a TP group of its own
        return f"; data parallel ({dp['flags']}): {n} DP ranks of TP {s['tp']} on {gpus} GPUs, {pools}"
    ep = f" --ep-size {s['ep_size']}" if s.get("ep_size") else ""
    a2a = f" --moe-a2a-backend {s['moe_a2a_backend']}" if s.get("moe_a2a_backend") else ""
    return (f"; DP attention ({dp['flags']}): {n} DP ranks over the TP group's {gpus} GPUs, attention TP "
            f"{dp['attention_tp']} = {s['tp']} ÷ {n} per rank, {pools} (SGLang 0.5.23 layers/dp_attention.py); "
            f"launched as python -m sglang.launch_server --model-path {model} --tp-size {s['tp']}{ep} "
            f"{dp_attention_words(n, s.get('engine_version'))}{a2a}")  # the release's spelling (attn_dp.py)


def per_rank_words(plan: dict[str, Any], context_tokens: int, requests: str) -> str:
    """The requests held at once at ``context_tokens`` in all ranks' pools, ``152 (2 DP ranks × 76 each)``, under data
    parallelism, where ``requests`` (the plan's count) is one rank's pool; ``requests`` as it is otherwise."""
    dp = plan.get("data_parallel")
    row = next((r for r in (dp or {}).get("requests", ()) if r["context_tokens"] == context_tokens), None)
    if row is None:
        return requests
    return f"{row['total']:,} ({dp['data_parallel_size']} DP ranks × {row['per_rank']:,} each)"
