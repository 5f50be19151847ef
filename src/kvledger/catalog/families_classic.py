"""The classic decoders with learned positions and biased LayerNorms: OPT, Falcon, GPT-BigCode (StarCoder).

Layer layouts and tensor shapes follow the transformers modeling files (``modeling_opt.py``,
``modeling_falcon.py``, ``modeling_gpt_bigcode.py``).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family, heads
from kvledger.catalog.layers import FullAttention
from kvledger.catalog.weights import Weight, mat, norm, plain_mlp

__all__ = ["opt", "falcon", "gpt_bigcode"]


def opt(c: Cfg) -> Family:
    """OPT: MHA with biases, learned positions (offset 2), LayerNorms with bias, ReLU fc1/fc2, tied head."""
    h, nh, nkv, hd = heads(c)
    n, ffn, v = c.int("num_hidden_layers"), c.int("ffn_dim"), c.int("vocab_size")
    proj = c.int("word_embed_proj_dim", h)
    b = c.get("enable_bias", True) is True
    w = [Weight("model.decoder.embed_tokens.weight", v, proj, 1, False, "shard"),
         Weight("model.decoder.embed_positions.weight", c.int("max_position_embeddings") + 2, h, 1, False, "replicate")]
    if proj != h:
        w += mat("model.decoder.project_in", h, proj, tp="replicate") + mat("model.decoder.project_out", proj, h,
                                                                            tp="replicate")
    if not c.bool("tie_word_embeddings", True):
        w.append(Weight("lm_head.weight", v, proj, 1, False, "shard"))
    fam = Family([], w)
    for i in range(n):
        p = f"model.decoder.layers.{i}"
        fam.layers.append(FullAttention(nkv, hd, hd, nh))
        w += (mat(f"{p}.self_attn.q_proj", h, h, bias=b) + mat(f"{p}.self_attn.k_proj", h, h, bias=b, tp="kv")
              + mat(f"{p}.self_attn.v_proj", h, h, bias=b, tp="kv") + mat(f"{p}.self_attn.out_proj", h, h, bias=b,
                                                                          bias_tp="replicate"))
        w += norm(f"{p}.self_attn_layer_norm", h, bias=True) + norm(f"{p}.final_layer_norm", h, bias=True)
        w += plain_mlp(p, h, ffn, bias=b, names=("fc1", "fc2"))
    if c.get("do_layer_norm_before", True) is True and not c.get("_remove_final_layer_norm", False):
        w += norm("model.decoder.final_layer_norm", h, bias=True)
    return fam


def falcon(c: Cfg) -> Family:
    """Falcon: fused query_key_value, MQA when ``multi_query`` (one KV head), parallel attention/MLP, LayerNorms with
    bias, tied head."""
    h, nh, n = c.int("hidden_size"), c.int("num_attention_heads"), c.int("num_hidden_layers")
    new_arch = c.get("new_decoder_architecture", False) is True
    nkv = c.int("num_kv_heads") if new_arch else (1 if c.get("multi_query", True) is True else nh)
    hd = h // nh
    b = c.get("bias", False) is True
    ffn = c.int("ffn_hidden_size", 4 * h)
    w = [Weight("transformer.word_embeddings.weight", c.int("vocab_size"), h, 1, False, "shard")]
    if not c.bool("tie_word_embeddings", True):
        w.append(Weight("lm_head.weight", c.int("vocab_size"), h, 1, False, "shard"))
    fam = Family([], w)
    if nkv == 1:
        fam.notes.append("multi_query: one KV head shared by all attention heads (MQA)")
    for i in range(n):
        p = f"transformer.h.{i}"
        fam.layers.append(FullAttention(nkv, hd, hd, nh))
        w += mat(f"{p}.self_attention.query_key_value", (nh + 2 * nkv) * hd, h, bias=b)
        w += mat(f"{p}.self_attention.dense", h, h, bias=b, bias_tp="replicate")
        w += plain_mlp(f"{p}.mlp", h, ffn, bias=b, names=("dense_h_to_4h", "dense_4h_to_h"))
        lns = ("ln_attn", "ln_mlp") if new_arch else (("input_layernorm",) if c.get("parallel_attn",
                                                                                    True) is True else ("input_layernorm", "post_attention_layernorm"))
        for ln in lns:
            w += norm(f"{p}.{ln}", h, bias=True)
    w += norm("transformer.ln_f", h, bias=True)
    return fam


def gpt_bigcode(c: Cfg) -> Family:
    """GPT-BigCode (StarCoder, SantaCoder): fused c_attn with one KV head when ``multi_query``, learned positions,
    biases, tied head."""
    h, nh, nkv, hd = heads(c)
    n, v = c.int("num_hidden_layers"), c.int("vocab_size")
    inner = c.int("n_inner", None) or 4 * h
    w = [Weight("transformer.wte.weight", v, h, 1, False, "shard"),
         Weight("transformer.wpe.weight", c.int("max_position_embeddings"), h, 1, False, "replicate")]
    if not c.bool("tie_word_embeddings", True):
        w.append(Weight("lm_head.weight", v, h, 1, False, "shard"))
    fam = Family([], w)
    for i in range(n):
        p = f"transformer.h.{i}"
        fam.layers.append(FullAttention(nkv, hd, hd, nh))
        w += norm(f"{p}.ln_1", h, bias=True) + norm(f"{p}.ln_2", h, bias=True)
        w += mat(f"{p}.attn.c_attn", h + 2 * nkv * hd, h, bias=True) + mat(f"{p}.attn.c_proj", h, h, bias=True,
                                                                           bias_tp="replicate")
        w += plain_mlp(f"{p}.mlp", h, inner, bias=True, names=("c_fc", "c_proj"))
    w += norm("transformer.ln_f", h, bias=True)
    return fam
