"""Zamba and Zamba2: Mamba layers throughout, with one shared attention block re-run at the ``hybrid`` layers.

A ``hybrid`` layer is a Mamba layer (its own state) plus a pass through a transformer block whose weights are
shared across the hybrid layers but whose K/V cache is not: vLLM's ``models/zamba2.py`` builds one ``Attention``
per hybrid layer ("KV cache is unique for every attention layer"), so each hybrid layer appears here as two cache
entries, its Mamba state then its attention. Tensor shapes follow transformers' ``modeling_zamba.py`` and
``modeling_zamba2.py``; state sizes follow vLLM's ``MambaStateShapeCalculator`` (the convolution keeps
``kernel − 1`` columns).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family, embed
from kvledger.catalog.layers import FullAttention, StateLayer
from kvledger.catalog.weights import Weight, gated_mlp, mat, norm, vec

__all__ = ["zamba", "zamba2"]


def _block_types(c: Cfg) -> list[str]:
    n = c.int("num_hidden_layers")
    kinds = c.list("layers_block_type")
    if len(kinds) != n or any(k not in ("hybrid", "mamba", "linear_attention") for k in kinds):
        raise c.error("layers_block_type", f"must list {n} entries, each 'hybrid' or 'mamba'/'linear_attention'")
    return kinds


def zamba(c: Cfg) -> Family:
    """Zamba (v1): multi-head Mamba-1 layers; at each hybrid layer the shared block's attention (``num_key_value_heads``
    heads of ``attention_head_dim`` over a 2 × hidden input) and a per-layer linear. vLLM 0.19 does not serve Zamba v1:
    the attention is sized as transformers' ZambaAttention caches it, the state by vLLM's Mamba-1 rule."""
    h, kinds = c.int("hidden_size"), _block_types(c)
    nh, nkv, ahd = c.int("num_attention_heads"), c.int("num_key_value_heads"), c.int("attention_head_dim")
    ah, inter = c.int("attention_hidden_size", 2 * h), c.int("intermediate_size")
    d_inner, d_state, kern = c.int("mamba_expand") * h, c.int("mamba_d_state"), c.int("mamba_d_conv")
    mh = c.int("n_mamba_heads", 1)
    if d_inner % mh:
        raise c.error("n_mamba_heads", f"{mh} Mamba heads do not divide the inner width {d_inner}")
    mhd, dt_rank = d_inner // mh, c.int("mamba_dt_rank")
    w, _ = embed(c, h, tied_default=True)
    fam = Family([], w)
    fam.notes.append("Zamba (v1): vLLM 0.19 does not serve it; hybrid layers' attention sized as transformers caches "
                     "it, "
                     "Mamba state by vLLM's Mamba-1 rule (conv d_inner × (d_conv − 1), SSM d_inner × d_state)")

    def mamba(m: str) -> list[Weight]:
        out = mat(f"{m}.in_proj", 2 * d_inner, h, bias=c.get("mamba_proj_bias", False) is True)
        out += [Weight(f"{m}.conv1d.weight", d_inner, kern, 1, False)]
        out += vec(f"{m}.conv1d.bias", d_inner, tp="shard") if c.get("mamba_conv_bias", True) is True else []
        out += [Weight(f"{m}.x_proj_weight", dt_rank + 2 * d_state, mhd, mh, False), Weight(f"{m}.dt_proj_weight", mhd,
            dt_rank, mh, False),
                Weight(f"{m}.dt_proj_bias", 1, mhd, mh, False), Weight(f"{m}.A_log", mhd, d_state, mh, False),
                Weight(f"{m}.D", 1, mhd, mh, False)]
        return out + mat(f"{m}.out_proj", h, d_inner, bias=c.get("mamba_proj_bias", False) is True)

    shared = False
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        fam.layers.append(StateLayer("mamba", d_inner * (kern - 1), d_inner * d_state))
        if kind != "hybrid":
            w += mamba(f"{p}.mamba") + norm(f"{p}.input_layernorm", h)
            continue
        fam.layers.append(FullAttention(nkv, ahd, ahd, nh))
        w += mamba(f"{p}.mamba_decoder.mamba") + norm(f"{p}.mamba_decoder.input_layernorm", h) + mat(f"{p}.linear", h,
            h)
        if not shared:  # one transformer block, its weights shared by every hybrid layer
            s = f"{p}.shared_transf"
            w += (mat(f"{s}.self_attn.q_proj", nh * ahd, ah) + mat(f"{s}.self_attn.k_proj", nkv * ahd, ah, tp="kv")
                  + mat(f"{s}.self_attn.v_proj", nkv * ahd, ah, tp="kv") + mat(f"{s}.self_attn.o_proj", h, nh * ahd))
            w += gated_mlp(f"{s}.feed_forward", h, inter) + norm(f"{s}.input_layernorm",
                                                                 ah) + norm(f"{s}.pre_ff_layernorm", h)
            shared = True
    w += norm("model.final_layernorm", h)
    return fam


def zamba2(c: Cfg) -> Family:
    """Zamba2: Mamba-2 layers; ``num_mem_blocks`` shared blocks cycled over the hybrid layers, each hybrid layer with
    its own attention cache, linear and LoRA adapters.

    Cache as vLLM 0.19 sizes it (``models/zamba2.py``): ``Attention(num_attention_heads, attention_head_dim)`` with
    no separate KV-head count (MHA), and ``get_mamba_state_shape_from_config``'s Mamba-2 state over
    ``mamba_expand × hidden`` channels, ``n_mamba_heads`` heads of ``mamba_headdim``.
    """
    h, kinds = c.int("hidden_size"), _block_types(c)
    nh, ahd = c.int("num_attention_heads"), c.int("attention_head_dim")
    ah, inter, blocks = c.int("attention_hidden_size", 2 * h), c.int("intermediate_size"), c.int("num_mem_blocks", 1)
    d_inner, d_state, kern = c.int("mamba_expand") * h, c.int("mamba_d_state"), c.int("mamba_d_conv")
    mh, groups, rank = c.int("n_mamba_heads"), c.int("mamba_ngroups", 1), c.int("adapter_rank", 128)
    mhd = c.int("mamba_headdim", d_inner // mh)
    conv_dim = d_inner + 2 * groups * d_state
    bias = c.get("add_bias_linear", False) is True
    w, _ = embed(c, h, tied_default=True)
    fam = Family([], w)
    if nh * ahd != ah:
        raise c.error("attention_head_dim", f"{nh} heads × {ahd} must equal attention_hidden_size {ah} (vLLM "
                                            f"Zamba2Attention)")

    def mamba(m: str) -> list[Weight]:
        out = mat(f"{m}.in_proj", 2 * d_inner + 2 * groups * d_state + mh, h, bias=bias)
        out += [Weight(f"{m}.conv1d.weight", conv_dim, kern, 1, False)]
        out += vec(f"{m}.conv1d.bias", conv_dim, tp="shard") if c.get("use_conv_bias", True) is True else []
        out += vec(f"{m}.dt_bias", mh, tp="shard") + vec(f"{m}.A_log", mh, tp="shard") + vec(f"{m}.D", mh, tp="shard")
        return out + norm(f"{m}.norm", d_inner) + mat(f"{m}.out_proj", h, d_inner, bias=bias)

    hybrid = 0
    for i, kind in enumerate(kinds):
        p = f"model.layers.{i}"
        fam.layers.append(StateLayer("mamba2", conv_dim * (kern - 1), mh * mhd * d_state))
        if kind != "hybrid":
            w += mamba(f"{p}.mamba") + norm(f"{p}.input_layernorm", h)
            continue
        fam.layers.append(FullAttention(nh, ahd, ahd, nh))
        w += mamba(f"{p}.mamba_decoder.mamba") + norm(f"{p}.mamba_decoder.input_layernorm", h) + mat(f"{p}.linear", h,
            h)
        s = f"{p}.shared_transformer"
        if hybrid < blocks:  # the shared blocks' own weights, counted once each
            w += (mat(f"{s}.self_attn.q_proj", ah, ah) + mat(f"{s}.self_attn.k_proj", ah, ah, tp="kv")
                  + mat(f"{s}.self_attn.v_proj", ah, ah, tp="kv") + mat(f"{s}.self_attn.o_proj", h, ah))
            w += mat(f"{s}.feed_forward.gate_up_proj", 2 * inter, h, bias=bias) + mat(f"{s}.feed_forward.down_proj", h,
                                                                                      inter, bias=bias)
            w += norm(f"{s}.input_layernorm", ah) + norm(f"{s}.pre_ff_layernorm", h)
        # one un-shared LoRA adapter per hybrid layer on the MLP's gate/up (and on q, k, v when enabled)
        w += mat(f"{s}.feed_forward.gate_up_proj_adapter.{hybrid}.0", rank,
                 h) + mat(f"{s}.feed_forward.gate_up_proj_adapter.{hybrid}.1", 2 * inter, rank)
        if c.get("use_shared_attention_adapter", False) is True:
            for x in "qkv":
                w += mat(f"{s}.self_attn.linear_{x}_adapter.{hybrid}.0", rank,
                         ah) + mat(f"{s}.self_attn.linear_{x}_adapter.{hybrid}.1", ah, rank)
        hybrid += 1
    fam.notes.append(f"Zamba2: {hybrid} hybrid layers each keep a Mamba-2 state and their own K/V ({nh} heads of "
                     f"{ahd}, as vLLM's Zamba2Attention); the attention weights are shared by {blocks} block(s)")
    w += norm("model.final_layernorm", h)
    return fam
