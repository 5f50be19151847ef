"""Weight memory per GPU: the stored bytes of every tensor, split over TP ranks by each tensor's rule.

Column- and row-parallel linears, experts and the vocab-parallel embedding/lm_head divide by
TP; norms, router gates and MLA's ``q_a_proj``/``kv_a_proj_with_mqa`` (vLLM ``ReplicatedLinear``)
are whole on every rank; K/V projections divide by KV heads and stop shrinking once each rank
holds one head. vLLM also counts its rotary cos/sin cache as weight memory (one buffer per model).
"""

from __future__ import annotations

from kvledger.catalog.expert_placement import expert_share, local_experts
from kvledger.catalog.layers import kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["weight_bytes_per_gpu", "expert_bytes_per_gpu"]


def weight_bytes_per_gpu(model: ModelSpec, tp: int = 1, *, include_rope_cache: bool = True,
                         ep: int = 1) -> tuple[float, str]:
    """Per-GPU weight bytes as an engine loads them, B, with the arithmetic as text; ``ep`` > 1: vLLM's expert
    parallelism, whole routed experts over ``ep`` ranks (the busiest rank's, expert_placement.py)."""
    q, db = model.quant, model.dtype_bytes
    total = 0.0
    kv_share = kv_heads_per_gpu(model.num_kv_heads, tp) / model.num_kv_heads if model.num_kv_heads else 1 / tp
    for w in model.weights:
        b = q.bytes_of(w, db)
        if w.expert and ep > 1:
            total += b * expert_share(model, tp, ep)
        else:
            total += b / tp if w.tp == "shard" else (b * kv_share if w.tp == "kv" else b)
    rope = model.rope_cache_bytes if include_rope_cache else 0
    n = model.num_params
    how = f"{n:,} params ({model.quant.description}; {model.dtype} = {db} B)"
    if tp > 1:
        how += f", split over TP {tp} by tensor (replicated norms/gates/KV heads counted whole)"
    if ep > 1 and model.num_experts:
        e = model.num_experts
        how += f"; routed experts whole over EP {ep}: {local_experts(e, ep)} of {e} on rank 0"
    if rope:
        how += f" + {rope:,} B RoPE cos/sin cache (vLLM buffer)"
    return total + rope, how


def expert_bytes_per_gpu(model: ModelSpec, tp: int = 1, ep: int = 1, scale: float = 1.0) -> float:
    """The routed experts' stored bytes on the busiest GPU × ``scale``, B: 1/TP of every expert, or with expert
    parallelism over ``ep`` ranks rank 0's whole experts (expert_placement.py)."""
    total = scale * sum(model.quant.bytes_of(w, model.dtype_bytes) for w in model.weights if w.expert)
    return total / tp if ep <= 1 else total * expert_share(model, tp, ep)
