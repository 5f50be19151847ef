"""Families whose layout departs from the plain decoder: DeepSeek MLA (and MiniCPM3, Kimi-Linear), Qwen3-Next, Jamba,
Nemotron-H (OPT, Falcon, GPT-BigCode: families_classic.py).

Layer layouts and tensor shapes follow the transformers modeling files
(``modeling_deepseek_v3.py``, ``modeling_qwen3_next.py``, ``modeling_jamba.py``,
``modeling_nemotron_h.py``); recurrent-state shapes follow vLLM's
``mamba_utils`` state-shape helpers (conv state keeps ``kernel − 1`` columns).
"""

from __future__ import annotations

import math

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.families_mlp import decoder_mlp, moe_counts
from kvledger.catalog.family_base import Family, embed, heads
from kvledger.catalog.layers import FullAttention, MLAAttention, StateLayer
from kvledger.catalog.layerwise import layer_overrides
from kvledger.catalog.statelayers import state_layer
from kvledger.catalog.weights import Weight, gated_mlp, mat, moe_experts, norm, plain_mlp, std_attention, vec


def mla(c: Cfg) -> Family:
    """DeepSeek-V2/V3/R1 and Kimi-K2: MLA attention, dense first layers then MoE with shared experts.

    The KV cache is the latent (kv_lora_rank + qk_rope_head_dim), never num_key_value_heads × head_dim.
    """
    h, nh, n = c.int("hidden_size"), c.int("num_attention_heads"), c.int("num_hidden_layers")
    kv_lora, rope, nope = c.int("kv_lora_rank"), c.int("qk_rope_head_dim"), c.int("qk_nope_head_dim")
    v_hd, q_lora = c.int("v_head_dim"), c.int("q_lora_rank", None)
    bias = c.get("attention_bias", False) is True
    E, k = moe_counts(c, c.get("model_type", ""))  # n_routed_experts (DeepSeek) or num_experts (Kimi-Linear), and top-k
    first_dense, freq = c.int("first_k_dense_replace", 0, minimum=0), c.int("moe_layer_freq", 1)
    w, _ = embed(c, h, tied_default=False)
    fam = Family([], w, E, k)
    fam.notes.append(f"MLA: num_key_value_heads={c.get('num_key_value_heads', None)} is not what the cache holds; "
                     f"the cache holds a {kv_lora}+{rope}-element latent per layer per token")
    mt = c.get("model_type", "")
    if mt == "longcat_flash":
        fam.notes.append("LongCat-Flash: each decoder layer runs two MLA attentions, each with its own latent cache "
                         "(vLLM longcat_flash.py)")
    indexer = 0
    # DeepSeek-V3.2 sparse attention (vLLM deepseek_v2.py: is_v32 = hasattr(config, "index_topk"))
    if c.has("index_topk"):
        ihd = c.int("index_head_dim", 128)
        indexer = ihd + ihd // 128 * 4
        fam.notes.append(f"DeepSeek sparse attention: each layer also caches {indexer} B of indexer keys per token "
                         f"({ihd} FP8 values + an fp32 scale per 128; vLLM DeepseekV32IndexerCache)")
    kinds = c.list("layer_types", None) or ["full_attention"] * n
    if len(kinds) != n:
        raise c.error("layer_types", f"has {len(kinds)} entries for {n} layers")
    for i in range(n):
        # transformers 5 per_layer_config (dots3's sliding layers: other widths and head counts)
        lc = layer_overrides(c, i)
        nh, nope = lc.int("num_attention_heads"), lc.int("qk_nope_head_dim")
        kv_lora, v_hd = lc.int("kv_lora_rank"), lc.int("v_head_dim")
        if kinds[i] == "linear_attention":  # Kimi-Linear: KDA layers between the MLA ones
            spec, sw = state_layer(c, "linear", mt, f"model.layers.{i}", h, nh, nope + rope)
            fam.layers.append(spec)
            w += sw + norm(f"model.layers.{i}.input_layernorm", h) + norm(f"model.layers.{i}.post_attention_layernorm",
                                                                          h)
            w += _mla_mlp(c, f"model.layers.{i}", h, i, E, first_dense, freq)
            continue
        # vLLM longcat_flash.py: two MLA attentions per layer, each with its cache
        subs = 2 if mt == "longcat_flash" else 1
        for j in range(subs):
            p = f"model.layers.{i}.self_attn" + (f".{j}" if subs > 1 else "")
            if mt == "minicpm3":  # vLLM MiniCPM3Attention caches decompressed K/V: num_heads heads of qk_head_dim
                fam.layers.append(FullAttention(nh, nope + rope, nope + rope, nh))
            else:
                fam.layers.append(_mla_spec(c, i, kinds[i], rope, indexer, "indexed_attention" in kinds))
            w += _mla_weights(c, p, h, (nh, nope, rope, v_hd, kv_lora, q_lora), bias, indexer)
        lp = f"model.layers.{i}"
        w += norm(f"{lp}.input_layernorm", h) + norm(f"{lp}.post_attention_layernorm", h)
        w += _mla_mlp(c, lp, h, i, E, first_dense, freq)
    w += norm("model.norm", h)
    return fam


def _mla_weights(c: Cfg, p: str, h: int, dims: tuple, bias: bool, indexer: int) -> list[Weight]:
    """One MLA attention's projections under prefix ``p``: q (low-rank when ``q_lora_rank``), the DSA indexer's when
    ``indexer``, the latent's kv_a/kv_b and o; ``dims``: heads, nope, rope, v head dims, kv_lora_rank, q_lora_rank."""
    nh, nope, rope, v_hd, kv_lora, q_lora = dims
    w: list[Weight] = []
    if q_lora:
        w += mat(f"{p}.q_a_proj", q_lora, h, bias=bias, tp="replicate") + norm(f"{p}.q_a_layernorm", q_lora)
        w += mat(f"{p}.q_b_proj", nh * (nope + rope), q_lora)
    else:
        w += mat(f"{p}.q_proj", nh * (nope + rope), h)
    if indexer:  # the indexer's projections (transformers DeepseekV32Indexer): wq_b, wk, k_norm, weights_proj
        ihd, inh = c.int("index_head_dim", 128), c.int("index_n_heads", 64)
        w += mat(f"{p}.indexer.wq_b", inh * ihd, q_lora or h, tp="replicate") + mat(f"{p}.indexer.wk", ihd, h,
            tp="replicate")
        w += norm(f"{p}.indexer.k_norm", ihd, bias=True) + mat(f"{p}.indexer.weights_proj", inh, h,
                                                               tp="replicate", linear=False)
    w += mat(f"{p}.kv_a_proj_with_mqa", kv_lora + rope, h, bias=bias,
             tp="replicate") + norm(f"{p}.kv_a_layernorm", kv_lora)
    w += mat(f"{p}.kv_b_proj", nh * (nope + v_hd), kv_lora) + mat(f"{p}.o_proj", h, nh * v_hd, bias=bias)
    return w


def _mla_spec(c: Cfg, i: int, kind: str, rope: int, indexer: int, indexed_kinds: bool) -> MLAAttention:
    """Layer ``i``'s latent cache: its own ``kv_lora_rank`` (transformers 5 ``per_layer_config``: dots3's sliding layers
    keep a 1024-wide latent), a window on ``sliding_attention`` layers, and the DSA indexer keys on the layers that
    have an indexer (``indexed_attention`` ones where the config names them, else every layer, as DeepSeek-V3.2)."""
    lc = layer_overrides(c, i)
    nope = c.int("qk_nope_head_dim")  # vLLM reads it off hf_text_config, not per layer (platforms/cuda.py)
    idx = indexer if (kind == "indexed_attention" or not indexed_kinds) else 0
    if kind == "sliding_attention":
        return MLAAttention(lc.int("kv_lora_rank"), rope, lc.int("num_attention_heads"), "sliding_window", idx,
                            c.int("sliding_window"), qk_nope_head_dim=nope)
    # the indexer's scoring shape (vLLM 0.33 deepseek_v2.py Indexer: index_topk / index_n_heads / index_head_dim)
    topk = (c.int("index_topk"), c.int("index_n_heads", 64), c.int("index_head_dim", 128)) if idx else (0, 0, 0)
    return MLAAttention(lc.int("kv_lora_rank"), rope, lc.int("num_attention_heads"), indexer_bytes_per_token=idx,
                        index_topk=topk[0], index_n_heads=topk[1], index_head_dim=topk[2], qk_nope_head_dim=nope)


def _mla_mlp(c: Cfg, lp: str, h: int, i: int, E: int, first_dense: int, freq: int) -> list[Weight]:
    """DeepSeek-style MLP of layer ``i``: dense for the first layers, then routed experts with shared experts."""
    if E and i >= first_dense and i % freq == 0:
        w = mat(f"{lp}.mlp.gate", E, h, tp="replicate", linear=False)
        if c.get("topk_method", None) == "noaux_tc":
            w += vec(f"{lp}.mlp.gate.e_score_correction_bias", E)
        inter = c.int("moe_intermediate_size")
        w += moe_experts(f"{lp}.mlp", h, inter, E)
        shared = c.int("n_shared_experts", None,
                       minimum=0) if c.has("n_shared_experts") else c.int("num_shared_experts", 0, minimum=0)
        if shared:
            w += gated_mlp(f"{lp}.mlp.shared_experts", h, inter * shared)
        return w
    return gated_mlp(f"{lp}.mlp", h, c.int("intermediate_size"))


def qwen3_next(c: Cfg) -> Family:
    """Qwen3-Next: every ``full_attention_interval``-th layer gated softmax attention, the rest Gated DeltaNet."""
    h, nh, nkv, hd = heads(c)
    n = c.int("num_hidden_layers")
    lt = c.list("layer_types", None)
    if lt is not None and len(lt) != n:
        raise c.error("layer_types", f"has {len(lt)} entries for {n} layers")
    interval = None if lt is not None else c.int("full_attention_interval")
    full = [t == "full_attention" for t in lt] if lt is not None else [(i + 1) % interval == 0 for i in range(n)]
    nk, nv = c.int("linear_num_key_heads"), c.int("linear_num_value_heads")
    dk, dv, kern = c.int("linear_key_head_dim"), c.int("linear_value_head_dim"), c.int("linear_conv_kernel_dim")
    key_dim, value_dim = nk * dk, nv * dv
    conv_dim = 2 * key_dim + value_dim
    w, _ = embed(c, h, tied_default=False)
    E, k = moe_counts(c, "qwen3_next")
    fam = Family([], w, E, k)
    if interval:
        fam.notes.append(f"layout from full_attention_interval={interval}: layer i is full attention when (i+1) % "
                         f"{interval} == 0")
    for i in range(n):
        p = f"model.layers.{i}"
        if full[i]:
            fam.layers.append(FullAttention(nkv, hd, hd, nh))
            w += std_attention(f"{p}.self_attn", h, nh, nkv, hd, q_mult=2)
            w += norm(f"{p}.self_attn.q_norm", hd) + norm(f"{p}.self_attn.k_norm", hd)
        else:
            fam.layers.append(StateLayer("gated_deltanet", conv_dim * (kern - 1), nv * dk * dv))
            la = f"{p}.linear_attn"
            w += mat(f"{la}.in_proj_qkvz", 2 * key_dim + 2 * value_dim, h) + mat(f"{la}.in_proj_ba", 2 * nv, h)
            w += [Weight(f"{la}.conv1d.weight", conv_dim, kern, 1, False, "shard")]
            w += vec(f"{la}.dt_bias", nv, tp="shard") + vec(f"{la}.A_log", nv, tp="shard") + norm(f"{la}.norm", dv)
            w += mat(f"{la}.out_proj", h, value_dim)
        w += norm(f"{p}.input_layernorm", h) + norm(f"{p}.post_attention_layernorm", h)
        w += decoder_mlp(c, "qwen3_next", p, h, i, E)
    w += norm("model.norm", h)
    return fam


def jamba(c: Cfg) -> Family:
    """Jamba: attention at ``i % attn_layer_period == attn_layer_offset``, Mamba-1 elsewhere; MoE every other layer."""
    h, nh, nkv, hd = heads(c)
    n = c.int("num_hidden_layers")
    ap, ao = c.int("attn_layer_period"), c.int("attn_layer_offset", minimum=0)
    ep, eo = c.int("expert_layer_period"), c.int("expert_layer_offset", minimum=0)
    E, k = c.int("num_experts", 1), c.int("num_experts_per_tok", 1)
    d_inner, d_state, d_conv = c.int("mamba_expand") * h, c.int("mamba_d_state"), c.int("mamba_d_conv")
    dt_rank = c.get("mamba_dt_rank")
    dt_rank = math.ceil(h / 16) if dt_rank == "auto" else c.int("mamba_dt_rank")
    pb, cb = c.get("mamba_proj_bias", False) is True, c.get("mamba_conv_bias", True) is True
    w, _ = embed(c, h, tied_default=False)
    fam = Family([], w, E if E > 1 else 0, k if E > 1 else 0)
    for i in range(n):
        p = f"model.layers.{i}"
        if i % ap == ao:
            fam.layers.append(FullAttention(nkv, hd, hd, nh))
            w += std_attention(f"{p}.self_attn", h, nh, nkv, hd)
        else:
            fam.layers.append(StateLayer("mamba", d_inner * (d_conv - 1), d_inner * d_state))
            m = f"{p}.mamba"
            w += mat(f"{m}.in_proj", 2 * d_inner, h, bias=pb) + [Weight(f"{m}.conv1d.weight", d_inner, d_conv, 1,
                                                                        False)]
            w += vec(f"{m}.conv1d.bias", d_inner, tp="shard") if cb else []
            w += mat(f"{m}.x_proj", dt_rank + 2 * d_state, d_inner, tp="shard") + mat(f"{m}.dt_proj", d_inner, dt_rank,
                                                                                      bias=True)
            w += [Weight(f"{m}.A_log", d_inner, d_state, 1, False)] + vec(f"{m}.D", d_inner, tp="shard")
            w += mat(f"{m}.out_proj", h, d_inner, bias=pb)
            w += norm(f"{m}.dt_layernorm", dt_rank) + norm(f"{m}.b_layernorm", d_state) + norm(f"{m}.c_layernorm",
                d_state)
        if E > 1 and i % ep == eo:
            w += mat(f"{p}.feed_forward.router", E, h, tp="replicate", linear=False)
            w += moe_experts(f"{p}.feed_forward", h, c.int("intermediate_size"), E)
        else:
            w += gated_mlp(f"{p}.feed_forward", h, c.int("intermediate_size"))
        w += norm(f"{p}.input_layernorm", h) + norm(f"{p}.pre_ff_layernorm", h)
    w += norm("model.final_layernorm", h)
    return fam


def nemotron_h(c: Cfg) -> Family:
    """Nemotron-H: one mixer per layer from ``hybrid_override_pattern`` (M Mamba-2, * attention, - MLP)."""
    h, nh, nkv, hd = heads(c)
    if c.has("hybrid_override_pattern"):
        pattern = c.str("hybrid_override_pattern")
        n = c.int("num_hidden_layers")
    else:  # transformers 5 spells the layout as layers_block_type names, one per layer
        blocks = c.list("layers_block_type")
        n = c.int("num_hidden_layers", len(blocks))
        code = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-", "moe": "E"}
        pattern = "".join(code.get(b, "?") if isinstance(b, str) else "?" for b in blocks)
    if len(pattern) != n:
        raise c.error("hybrid_override_pattern", f"has {len(pattern)} characters for {n} layers")
    heads_m, hd_m, d_state = c.int("mamba_num_heads"), c.int("mamba_head_dim"), c.int("ssm_state_size")
    groups, kern = c.int("n_groups"), c.int("conv_kernel")
    d_inner = heads_m * hd_m
    conv_dim = d_inner + 2 * groups * d_state
    ub, cb = c.get("use_bias", False) is True, c.get("use_conv_bias", True) is True
    w = [Weight("backbone.embeddings.weight", c.int("vocab_size"), h, 1, False, "shard")]
    if not c.bool("tie_word_embeddings", False):
        w.append(Weight("lm_head.weight", c.int("vocab_size"), h, 1, False, "shard"))
    fam = Family([], w)
    for i, ch in enumerate(pattern):
        p = f"backbone.layers.{i}"
        w += norm(f"{p}.norm", h)
        if ch == "M":
            fam.layers.append(StateLayer("mamba2", conv_dim * (kern - 1), heads_m * hd_m * d_state))
            m = f"{p}.mixer"
            w += mat(f"{m}.in_proj", 2 * d_inner + 2 * groups * d_state + heads_m, h, bias=ub)
            w += [Weight(f"{m}.conv1d.weight", conv_dim, kern, 1, False)] + (vec(f"{m}.conv1d.bias", conv_dim,
                                                                                 tp="shard") if cb else [])
            w += vec(f"{m}.dt_bias", heads_m, tp="shard") + vec(f"{m}.A_log", heads_m, tp="shard") + vec(f"{m}.D",
                heads_m, tp="shard")
            w += norm(f"{m}.norm", d_inner) + mat(f"{m}.out_proj", h, d_inner, bias=ub)
        elif ch == "*":
            fam.layers.append(FullAttention(nkv, hd, hd, nh))
            b = c.get("attention_bias", False) is True
            w += std_attention(f"{p}.mixer", h, nh, nkv, hd, qkv_bias=b, o_bias=b)
        elif ch == "-":
            fam.layers.append(None)
            w += plain_mlp(f"{p}.mixer", h, c.int("intermediate_size"), bias=c.get("mlp_bias", False) is True)
        elif ch == "E":  # MoE layer (Nemotron-3): relu² routed experts and a shared expert, no cache
            fam.layers.append(None)
            E, inter = c.int("n_routed_experts"), c.int("moe_intermediate_size")
            fam.num_experts, fam.experts_per_token = E, c.int("num_experts_per_tok", maximum=E)
            w += mat(f"{p}.mixer.gate", E, h, tp="replicate",
                     linear=False) + vec(f"{p}.mixer.gate.e_score_correction_bias", E)
            w += [Weight(f"{p}.mixer.experts.*.up_proj.weight", inter, h, E, True, "shard", True),
                  Weight(f"{p}.mixer.experts.*.down_proj.weight", h, inter, E, True, "shard", True)]
            w += plain_mlp(f"{p}.mixer.shared_experts", h, c.int("moe_shared_expert_intermediate_size", inter))
        else:
            raise c.error("hybrid_override_pattern", f"layer {i} has block type {ch!r}; supported: M (Mamba-2), * "
                                                     f"(attention), - (MLP), E (MoE)")
    w += norm("backbone.norm_f", h)
    return fam
