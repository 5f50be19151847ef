"""The Phi-1/1.5/2 layout (``model_type`` "phi"): one LayerNorm per layer, parallel attention and MLP, biases
everywhere.

Sources: transformers ``models/phi/modeling_phi.py`` (``PhiAttention``: q/k/v/dense with bias, optional
q/k LayerNorms of head size; ``PhiMLP``: fc1/fc2 with bias; ``PhiDecoderLayer``: a single
``input_layernorm``; ``PhiModel.final_layernorm``; ``lm_head`` with bias) and vLLM 0.19
``model_executor/models/phi.py`` (the same tensors: ``qkv_proj`` with bias, ``dense``, ``fc1``, ``fc2``,
``input_layernorm``, ``final_layernorm``, ``ParallelLMHead(bias=True)``, never tied). The Llama layout
that an unknown decoder gets would miss 23,040 bias elements per layer of phi-2, its final LayerNorm's
bias and the head's bias (791,040 parameters in all).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family, heads
from kvledger.catalog.layers import FullAttention
from kvledger.catalog.weights import Weight, mat, norm, plain_mlp

__all__ = ["phi"]


def phi(c: Cfg) -> Family:
    """Phi-2 and its family: the per-layer KV spec (full attention) and every parameter tensor."""
    h, nh, nkv, hd = heads(c)
    n, v = c.int("num_hidden_layers"), c.int("vocab_size")
    # MLP width: transformers PhiConfig.intermediate_size; vLLM PhiMLP reads n_inner, else 4 × hidden (equal for phi-2).
    inter = c.int("intermediate_size", None) or c.int("n_inner", None) or 4 * h
    qk_ln = c.get("qk_layernorm", False) is True
    w = [Weight("model.embed_tokens.weight", v, h, 1, False, "shard")]
    fam = Family([], w)
    for i in range(n):
        p = f"model.layers.{i}"
        fam.layers.append(FullAttention(nkv, hd, hd, nh))
        w += (mat(f"{p}.self_attn.q_proj", nh * hd, h, bias=True) + mat(f"{p}.self_attn.k_proj", nkv * hd, h, bias=True,
                                                                        tp="kv")
              + mat(f"{p}.self_attn.v_proj", nkv * hd, h, bias=True, tp="kv")
              + mat(f"{p}.self_attn.dense", h, nh * hd, bias=True, bias_tp="replicate"))
        if qk_ln:
            w += norm(f"{p}.self_attn.q_layernorm", hd, bias=True) + norm(f"{p}.self_attn.k_layernorm", hd, bias=True)
        w += norm(f"{p}.input_layernorm", h, bias=True)
        w += plain_mlp(f"{p}.mlp", h, inter, bias=True, names=("fc1", "fc2"))
    w += norm("model.final_layernorm", h, bias=True)
    w += [Weight("lm_head.weight", v, h, 1, False, "shard"),  # vocab-parallel head with a bias, never tied
          Weight("lm_head.bias", 1, v, 1, False, "shard")]
    return fam
