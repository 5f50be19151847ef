"""Pure state-space language models (Mamba-1, Falcon-Mamba, Mamba-2): every layer a mixer with a per-sequence state, no
KV cache.

Tensor shapes follow transformers' ``modeling_mamba.py`` / ``modeling_mamba2.py``; state sizes follow vLLM's
``mamba_utils`` state-shape helpers (the convolution keeps ``kernel − 1`` columns).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family
from kvledger.catalog.layers import StateLayer
from kvledger.catalog.weights import Weight, mat, norm, vec

__all__ = ["ssm"]


def ssm(c: Cfg) -> Family:
    """Mamba-1 (Mamba, Falcon-Mamba) and Mamba-2 language models: every layer a state-space mixer, no KV cache.

    State per sequence (vLLM mamba_utils): Mamba-1 conv ``d_inner × (kernel − 1)`` and SSM ``d_inner × state_size``;
    Mamba-2 conv ``(d_inner + 2·groups·state) × (kernel − 1)`` and SSM ``heads × head_dim × state_size``.
    """
    h, n, v = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    kern, d_state = c.int("conv_kernel", 4), c.int("state_size")
    w = [Weight("backbone.embeddings.weight", v, h, 1, False, "shard")]
    if not c.bool("tie_word_embeddings", True):
        w.append(Weight("lm_head.weight", v, h, 1, False, "shard"))
    fam = Family([], w)
    two = c.has("num_heads") and c.has("head_dim")
    # vLLM models/mamba.py, mamba2.py (0.19, 0.33): use_conv_bias=config.use_conv_bias, use_bias=config.use_bias
    cb, ub = c.get("use_conv_bias", True) is True, c.get("use_bias", False) is True
    for i in range(n):
        m = f"backbone.layers.{i}.mixer"
        w += norm(f"backbone.layers.{i}.norm", h)
        if two:
            heads, hd, groups = c.int("num_heads"), c.int("head_dim"), c.int("n_groups", 1)
            d_inner = heads * hd
            conv_dim = d_inner + 2 * groups * d_state
            fam.layers.append(StateLayer("mamba2", conv_dim * (kern - 1), heads * hd * d_state))
            w += mat(f"{m}.in_proj", 2 * d_inner + 2 * groups * d_state + heads, h, bias=ub) + [Weight(
                f"{m}.conv1d.weight", conv_dim, kern, 1, False)]
            w += (vec(f"{m}.conv1d.bias", conv_dim, tp="shard") if cb else []) + vec(f"{m}.dt_bias", heads,
                                                                                     tp="shard")
            w += vec(f"{m}.A_log", heads, tp="shard") + vec(f"{m}.D", heads, tp="shard") + norm(f"{m}.norm", d_inner)
            w += mat(f"{m}.out_proj", h, d_inner, bias=ub)
        else:
            d_inner = c.int("intermediate_size", None) or c.int("expand", 2) * h
            dt_rank = c.int("time_step_rank", None) or -(-h // 16)
            fam.layers.append(StateLayer("mamba", d_inner * (kern - 1), d_inner * d_state))
            w += mat(f"{m}.in_proj", 2 * d_inner, h, bias=ub) + [Weight(f"{m}.conv1d.weight", d_inner, kern, 1,
                                                                        False)]
            w += vec(f"{m}.conv1d.bias", d_inner, tp="shard") if cb else []
            w += mat(f"{m}.x_proj", dt_rank + 2 * d_state, d_inner, tp="shard") + mat(f"{m}.dt_proj", d_inner, dt_rank,
                                                                                      bias=True)
            w += [Weight(f"{m}.A_log", d_inner, d_state, 1, False)] + vec(f"{m}.D", d_inner,
                                                                          tp="shard") + mat(f"{m}.out_proj", h, d_inner,
                                                                                            bias=ub)
    w += norm("backbone.norm_f", h)
    return fam
