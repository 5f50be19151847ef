"""Attention's share of a step's roofline: FLOPs per (query, key) pair and the KV bytes a step reads, per layer kind.

Softmax attention costs 4·H_q·d FLOPs per pair (QK and PV) and reads every cached token; absorbed MLA decode
scores the latent (+ rope) and sums over the latent, MLA prefill runs MHA over ``qk_nope + qk_rope`` with the
cached context re-expanded through ``kv_b_proj`` (vLLM ``mla_attention.py``); windowed layers see at most their
window; DeepSeek-V4 layers see their raw window and their compressed entries, at ratio 4 only the indexer's top-k;
DeepSeek-V3.2's sparse MLA layers (DSA) score every cached token with the indexer and attend only its top-k latent
entries (``_sparse_mla``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.accounting.kvcache import KVLedger
from kvledger.catalog.compressed_mla import FP8_DS_MLA_ENTRY_BYTES, CompressedMLAAttention
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["AttentionTerms", "attention_terms"]


@dataclass
class AttentionTerms:
    """Attributes:
        full: FLOPs per (decode query, key) pair over the layers that see the whole context, FLOP.
        windows: [(FLOPs per pair, B per token, window tokens)] for each windowed term, each query seeing at most the
            window.
        prefill: FLOPs per prefill pair over the unbounded layers, FLOP.
        upproj: MLA's FLOPs per cached-context token of a prefill chunk (``kv_b_proj`` re-expansion), FLOP.
        growing_read_bytes: KV bytes a step reads per context token outside the window terms, B/token.
        window_state_bytes: per-request fixed bytes the window terms read instead of the state term, B.
    """

    full: float
    windows: list[tuple[float, float, int]]
    prefill: float
    upproj: float
    growing_read_bytes: float
    window_state_bytes: float = 0.0


def attention_terms(model: ModelSpec, kv: KVLedger, tp: int, indexer_rate: float = 1.0) -> AttentionTerms:
    """The attention coefficients of ``model`` at TP ``tp`` with this KV ledger (per GPU). ``indexer_rate``: the
    attention dtype's peak ÷ the FP8 peak, which turns DeepSeek-V3.2's FP8 indexer FLOPs into FLOPs at the attention
    dtype's rate (1 where the attention runs in FP8 or the GPU has no FP8 peak)."""
    t = AttentionTerms(0.0, [], 0.0, 0.0, kv.growing_bytes_per_token)
    mla = _mla_head_dims(model)
    for g in kv.groups:
        sp = g.spec
        if g.kind == "state":
            continue
        heads = sp.num_attention_heads / tp
        if isinstance(sp, CompressedMLAAttention):
            _compressed(t, sp, g.num_layers, heads)
            continue
        if isinstance(sp, MLAAttention) and sp.index_topk and not sp.window_tokens:
            _sparse_mla(t, sp, g.num_layers, heads, g.bytes_per_token, indexer_rate)
            continue
        if isinstance(sp, MLAAttention):  # absorbed MLA: QK over (latent + rope), PV over the latent
            per_pair = 2 * heads * (sp.kv_lora_rank + sp.qk_rope_head_dim) + 2 * heads * sp.kv_lora_rank
            if mla is not None:  # prefill: MHA over qk_nope + qk_rope dims, PV over v_head_dim
                nope, v = mla
                t.prefill += (2 * heads * (nope + sp.qk_rope_head_dim) + 2 * heads * v) * g.num_layers
                t.upproj += 2 * sp.kv_lora_rank * heads * (nope + v) * g.num_layers
            else:
                t.prefill += per_pair * g.num_layers
        else:
            per_pair = 2 * heads * sp.head_dim + 2 * heads * sp.v_head_dim
            if g.kind in ("full", "mla"):
                t.prefill += per_pair * g.num_layers
        if g.kind in ("full", "mla"):
            t.full += per_pair * g.num_layers
        else:
            window = getattr(sp, "window_tokens", 0) or getattr(sp, "chunk_tokens", 0)
            t.windows.append((per_pair * g.num_layers, g.bytes_per_token, window))
    return t


def _compressed(t: AttentionTerms, sp: CompressedMLAAttention, n: int, heads: float) -> None:
    """DeepSeek-V4 layers: every query attends its raw window (K = V: QK and PV over head_dim) and the compressed
    entries, at ratio 4 only the ``index_topk`` the indexer picks after scoring every indexer key
    (``index_n_heads × index_head_dim`` per key). The window entries and the top-k entries are read through window
    terms, so they leave the state and growing terms; the compressors' state stays per-request fixed bytes."""
    per_pair = 4 * heads * sp.head_dim
    t.windows.append((per_pair * n, FP8_DS_MLA_ENTRY_BYTES * n, sp.swa_window_tokens))
    t.window_state_bytes += sp.swa_window_tokens * FP8_DS_MLA_ENTRY_BYTES * n
    r = sp.compress_ratio
    if r == 4:  # top-k of the compressed entries: min(context / 4, topk) entries = min(context, 4·topk) / 4
        entry = FP8_DS_MLA_ENTRY_BYTES / 4
        t.windows.append((per_pair / 4 * n, entry * n, 4 * sp.index_topk))
        t.growing_read_bytes -= entry * n
        score = 2 * sp.index_n_heads * sp.index_head_dim / 4 * n
        t.full += score
        t.prefill += score
    elif r > 1:
        t.full += per_pair / r * n
        t.prefill += per_pair / r * n


def _sparse_mla(t: AttentionTerms, sp: MLAAttention, n: int, heads: float, group_bytes: float, rate: float) -> None:
    """DeepSeek-V3.2 sparse attention (vLLM 0.33 ``deepseek_v2.py`` ``Indexer``, ``layers/sparse_attn_indexer.py``,
    ``v1/attention/backends/mla/flashmla_sparse.py``): per layer the indexer scores every cached token for each query
    with ``index_n_heads`` FP8 dot products of ``index_head_dim`` plus a weighted sum over the heads, 2·H_I·(d_I + 1)
    FLOPs per (query, key) pair, the heads whole on every TP rank (``wq_b`` is a ``ReplicatedLinear``), reading every
    token's indexer key (``indexer_bytes_per_token``: it stays in the growing term); then the absorbed MLA kernel
    attends the ``index_topk`` selected latent entries only — a window term of ``index_topk`` tokens over the latent
    bytes, with absorbed per-pair FLOPs for prefill too (the sparse kernel is MQA over the latent; vLLM runs dense MHA
    only for prefills no longer than ``index_topk``, where sparse and dense see the same pairs). No ``kv_b_proj``
    re-expansion of the context, so no up-projection term."""
    per_pair = 2 * heads * (sp.kv_lora_rank + sp.qk_rope_head_dim) + 2 * heads * sp.kv_lora_rank
    latent_bytes = group_bytes - sp.indexer_bytes_per_token * n
    t.windows.append((per_pair * n, latent_bytes, sp.index_topk))
    t.growing_read_bytes -= latent_bytes
    score = 2 * sp.index_n_heads * (sp.index_head_dim + 1) * n * rate
    t.full += score
    t.prefill += score


def _mla_head_dims(model: ModelSpec) -> tuple[int, int] | None:
    """MLA's (qk_nope_head_dim, v_head_dim) from the first layer's ``kv_b_proj`` (rows H·(nope + v)) and ``o_proj``
    (cols H·v) weights; None when the model has no such weights."""
    kvb = next((w for w in model.weights if w.path.endswith("self_attn.kv_b_proj.weight")), None)
    if kvb is None:
        return None
    prefix = kvb.path[: -len("kv_b_proj.weight")]
    o = next((w for w in model.weights if w.path == prefix + "o_proj.weight"), None)
    H = model.num_attention_heads
    if o is None or o.cols % H or kvb.rows % H:
        return None
    v = o.cols // H
    return kvb.rows // H - v, v
