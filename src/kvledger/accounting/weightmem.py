"""Weight memory per GPU: the stored bytes of every tensor, split over TP ranks by each tensor's rule.

Column- and row-parallel linears, experts and the vocab-parallel embedding/lm_head divide by
TP; norms, router gates and MLA's ``q_a_proj``/``kv_a_proj_with_mqa`` (vLLM ``ReplicatedLinear``)
are whole on every rank; K/V projections divide by KV heads and stop shrinking once each rank
holds one head. vLLM also counts its rotary cos/sin cache as weight memory (one buffer per model).
"""

from __future__ import annotations

from kvledger.catalog.layers import kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["weight_bytes_per_gpu"]


def weight_bytes_per_gpu(model: ModelSpec, tp: int = 1, *, include_rope_cache: bool = True) -> tuple[float, str]:
    """Per-GPU weight bytes as an engine loads them, B, with the arithmetic as text."""
    q, db = model.quant, model.dtype_bytes
    total = 0.0
    kv_share = kv_heads_per_gpu(model.num_kv_heads, tp) / model.num_kv_heads if model.num_kv_heads else 1 / tp
    for w in model.weights:
        b = q.bytes_of(w, db)
        total += b / tp if w.tp == "shard" else (b * kv_share if w.tp == "kv" else b)
    rope = model.rope_cache_bytes if include_rope_cache else 0
    n = model.num_params
    how = f"{n:,} params ({model.quant.description}; {model.dtype} = {db} B)"
    if tp > 1:
        how += f", split over TP {tp} by tensor (replicated norms/gates/KV heads counted whole)"
    if rope:
        how += f" + {rope:,} B RoPE cos/sin cache (vLLM buffer)"
    return total + rope, how
