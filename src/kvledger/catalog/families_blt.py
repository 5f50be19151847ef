"""The Byte Latent Transformer layout (``model_type`` "blt"): three byte- and patch-level stacks and an entropy patcher.

Source: transformers 5.24 ``models/blt/modeling_blt.py``. ``BltConfig`` has no decoder fields of its own; it holds
``encoder_config`` (the byte-level local encoder), ``global_config`` (the patch-level global transformer),
``decoder_config`` (the byte-level local decoder) and, with ``patch_in_forward``, ``patcher_config`` (the small
byte-level entropy model that cuts the bytes into patches). Every stack is a run of ``BltTransformerLayer``s
(``BltSelfAttention``: q/k/v/o without bias, head size = hidden_size // num_attention_heads whatever ``head_dim``
says; a gated MLP; two RMSNorms). The local stacks add ``BltCrossAttention`` layers (q/k/v/o and q/k norms of the
stack's width; one in the encoder, one per layer when ``cross_attn_all_layers``) that attend between bytes and
patches, and ``patch_embedding_projection``s; ``BltModel`` adds the hash n-gram embedding
(``encoder_hash_byte_group_vocab`` × ``len(encoder_hash_byte_group_size)`` × ``encoder_hash_byte_group_nb_functions``
rows of the encoder's width) and ``BltForCausalLM`` an untied LM head of the decoder's width.

KV per byte, as the meta-device oracle counts it: each self-attention layer of every stack, K and V of its KV heads.
This is an upper bound of what a cache holds per byte: the global transformer runs over patches, so a cache of it
holds one entry per patch (a patch averages several bytes; transformers 5.24's ``BltModel.forward`` gives it no cache
at all and recomputes it over every patch), and the local stacks and the patcher attend within a sliding window.
No engine serves BLT (vLLM 0.33's model registry has no Blt class).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family
from kvledger.catalog.layers import FullAttention, SlidingWindowAttention
from kvledger.catalog.weights import Weight, gated_mlp, mat, norm, std_attention

__all__ = ["blt"]


def _sub(c: Cfg, key: str) -> Cfg:
    return Cfg(c.dict(key), c.source, f"{c.prefix}{key}.")


def _stack(s: Cfg, p: str, window: int | None, fam: Family) -> tuple[int, int, int, int]:
    """Append one stack's self-attention layers and tensors; return (layers, KV heads, head size, hidden)."""
    h, nh, n = s.int("hidden_size"), s.int("num_attention_heads"), s.int("num_hidden_layers")
    nkv = s.int("num_key_value_heads", nh)
    hd = h // nh  # BltSelfAttention: config.hidden_size // num_attention_heads
    if hd == 0 or nh % nkv:
        raise s.error("num_key_value_heads", f"{nkv} KV heads and {nh} heads cannot split hidden_size {h}")
    inter = s.int("intermediate_size")
    for i in range(n):
        q = f"{p}.layers.{i}"
        fam.layers.append(SlidingWindowAttention(nkv, hd, hd, nh,
                                                 window_tokens=window) if window else FullAttention(nkv, hd, hd, nh))
        fam.weights += (std_attention(f"{q}.self_attn", h, nh, nkv, hd) + gated_mlp(f"{q}.mlp", h, inter)
                        + norm(f"{q}.input_layernorm", h) + norm(f"{q}.post_attention_layernorm", h))
    return n, nkv, hd, h


def _cross(s: Cfg, p: str, fam: Family) -> None:
    """BltCrossAttention layers of a local stack: one, or one per layer with ``cross_attn_all_layers``."""
    h, nh = s.int("hidden_size"), s.int("num_attention_heads")
    nkv, hd = s.int("num_key_value_heads", nh), h // nh
    for i in range(s.int("num_hidden_layers") if s.bool("cross_attn_all_layers", False) else 1):
        q = f"{p}.cross_attn_layers.{i}"
        fam.weights += std_attention(q, h, nh, nkv, hd) + norm(f"{q}.q_norm", h) + norm(f"{q}.k_norm", h)


def blt(c: Cfg) -> Family:
    """BLT: self-attention layers of the local encoder, global transformer, local decoder and patcher, every tensor."""
    enc, glb, dec = _sub(c, "encoder_config"), _sub(c, "global_config"), _sub(c, "decoder_config")
    window = c.int("local_attention_window_len", None)
    fam = Family([], [])
    parts = []
    n, nkv, hd, he = _stack(enc, "model.local_encoder", window, fam)
    parts.append(f"local encoder {n} × 2 × {nkv} × {hd}")
    fam.weights += mat("model.local_encoder.patch_embedding_projection", he * enc.int("cross_attn_k", 2), he)
    fam.weights.append(Weight("model.local_encoder.embed_tokens.weight", enc.int("vocab_size"), he, 1, False))
    _cross(enc, "model.local_encoder", fam)
    n, nkv, hd, fam.hidden_size = _stack(glb, "model.global_transformer", None, fam)
    parts.append(f"global transformer {n} × 2 × {nkv} × {hd} (per patch in a cache: at most this per byte)")
    if glb.has("encoder_cross_output_size"):
        fam.weights += mat("model.global_transformer.token_embedding_projection", glb.int("hidden_size"),
                           glb.int("encoder_cross_output_size"))
    n, nkv, hd, hd_dec = _stack(dec, "model.local_decoder", window, fam)
    parts.append(f"local decoder {n} × 2 × {nkv} × {hd}")
    fam.weights += mat("model.local_decoder.patch_embedding_projection", hd_dec * dec.int("cross_attn_k", 2),
                       dec.int("hidden_size_global"))
    fam.weights += norm("model.local_decoder.norm", hd_dec)
    _cross(dec, "model.local_decoder", fam)
    groups = len(c.list("encoder_hash_byte_group_size")) * c.int("encoder_hash_byte_group_nb_functions", 1)
    fam.weights.append(Weight("model.encoder_hash_tok_embedding.weight",
                              c.int("encoder_hash_byte_group_vocab") * groups, he, 1, False))
    if c.bool("patch_in_forward", False):
        pc = _sub(c, "patcher_config")
        n, nkv, hd, hp = _stack(pc, "model.patcher", pc.int("sliding_window", None), fam)
        parts.append(f"entropy patcher {n} × 2 × {nkv} × {hd}")
        v = pc.int("vocab_size")
        fam.weights += ([Weight("model.patcher.embed_tokens.weight", v, hp, 1, False)] + norm("model.patcher.norm", hp)
                        + mat("model.patcher.lm_head", v, hp))
    fam.weights += mat("lm_head", c.int("vocab_size"), hd_dec)
    fam.notes.append(
        "KV per byte, an upper bound (Byte Latent Transformer): every self-attention stack summed as if each cached "
        "one "
        "entry per byte ("
        + "; ".join(parts) + "); the global transformer runs over patches, so a cache of it holds one entry "
        f"per patch (entropy patching cuts the bytes into patches of several bytes; patch_size "
        f"{c.get('patch_size', None)}; transformers 5.24's BltModel gives it no "
        "cache and recomputes it), and the local stacks and the patcher attend within a sliding window; the "
        "cross-attention layers attend between bytes and patches and keep no per-byte cache here. No engine serves BLT "
        "(vLLM 0.33's registry has no Blt class)")
    return fam
