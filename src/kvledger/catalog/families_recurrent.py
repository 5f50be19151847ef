"""Recurrent language models vLLM 0.19 does not serve (RWKV-4, xLSTM, RecurrentGemma): a fixed state per sequence, no
per-token K/V except RecurrentGemma's local-attention layers.

No engine rule sizes these, so each state is the one transformers' own cache keeps (``modeling_rwkv.py``: five
``hidden``-wide vectors per layer; ``modeling_xlstm.py`` ``xLSTMCache``: the mLSTM matrix memory ``C``, normaliser
``n`` and stabiliser ``m`` per head; ``modeling_recurrent_gemma.py``: the RG-LRU state and the ``conv1d_width − 1``
convolution columns), and the plan says it follows no engine. The states are sized at the model dtype (transformers
keeps RWKV's and RG-LRU's recurrent parts in float32: pass ``--mamba-ssm-cache-dtype float32`` to size them so).
Tensor shapes follow the same modeling files.
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.family_base import Family
from kvledger.catalog.layers import SlidingWindowAttention, StateLayer
from kvledger.catalog.weights import Weight, mat, norm, vec

__all__ = ["rwkv", "xlstm", "recurrent_gemma"]

_NO_ENGINE = ("{}: vLLM 0.19 does not serve it; the per-sequence state is the one transformers' cache keeps, "
              "sized at the model dtype; no per-token K/V")


def rwkv(c: Cfg) -> Family:
    """RWKV-4: per layer the token-shift inputs of time and channel mixing (2 × hidden, conv-like) and the WKV
    numerator, denominator and running maximum (3 × hidden)."""
    h, n, v = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    ah, inter = c.int("attention_hidden_size", h), c.int("intermediate_size", None) or 4 * h
    w = [Weight("rwkv.embeddings.weight", v, h, 1, False, "shard")]
    fam = Family([], w, notes=[_NO_ENGINE.format("RWKV")])
    for i in range(n):
        p = f"rwkv.blocks.{i}"
        if i == 0:
            w += norm(f"{p}.pre_ln", h, bias=True)
        fam.layers.append(StateLayer("rwkv", 2 * h, 3 * ah))
        w += norm(f"{p}.ln1", h, bias=True) + norm(f"{p}.ln2", h, bias=True)
        a = f"{p}.attention"
        for t in ("time_decay", "time_first", "time_mix_key", "time_mix_value", "time_mix_receptance"):
            w += vec(f"{a}.{t}", ah if t.startswith("time_") and not t.startswith("time_mix") else h)
        w += mat(f"{a}.key", ah, h) + mat(f"{a}.value", ah, h) + mat(f"{a}.receptance", ah, h) + mat(f"{a}.output", h,
            ah)
        f = f"{p}.feed_forward"
        w += vec(f"{f}.time_mix_key", h) + vec(f"{f}.time_mix_receptance", h)
        w += mat(f"{f}.key", inter, h) + mat(f"{f}.receptance", h, h) + mat(f"{f}.value", h, inter)
    w += norm("rwkv.ln_out", h, bias=True)
    if not c.bool("tie_word_embeddings", False):
        w.append(Weight("head.weight", v, h, 1, False, "shard"))
    return fam


def _round_up(x: float, multiple: int) -> int:
    return int(-(-x // multiple) * multiple)


def xlstm(c: Cfg) -> Family:
    """xLSTM (mLSTM blocks): per layer and head the ``qk_head_dim × v_head_dim`` matrix memory, a ``qk_head_dim``
    normaliser and one stabiliser; ``qk_dim = ⌈hidden × qk_dim_factor⌉₆₄``, ``v_dim = ⌈hidden × v_dim_factor⌉₆₄``."""
    h, n, v, heads = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size"), c.int("num_heads")
    qk = _round_up(h * c.float("qk_dim_factor", 0.5, minimum=0.0, maximum=64.0), 64)
    vd = _round_up(h * c.float("v_dim_factor", 1.0, minimum=0.0, maximum=64.0), 64)
    ffn = _round_up(h * c.float("ffn_proj_factor", 2.667, minimum=0.0, maximum=64.0),
                    c.int("ffn_round_up_to_multiple_of", 64))
    if qk % heads or vd % heads:
        raise c.error("num_heads", f"{heads} heads must divide qk_dim {qk} and v_dim {vd}")
    b = c.get("use_bias", False) is True
    w = [Weight("backbone.embeddings.weight", v, h, 1, False, "shard")]
    fam = Family([], w, notes=[_NO_ENGINE.format("xLSTM")])
    for i in range(n):
        p = f"backbone.blocks.{i}"
        fam.layers.append(StateLayer("mlstm", 0, heads * (qk // heads) * (vd // heads) + heads * (qk // heads) + heads))
        m = f"{p}.mlstm_layer"
        w += norm(f"{p}.norm_mlstm", h, bias=b) + mat(f"{m}.q", qk, h, bias=b) + mat(f"{m}.k", qk, h,
                                                                                     bias=b) + mat(f"{m}.v", vd, h,
                                                                                         bias=b)
        w += mat(f"{m}.ogate_preact", vd, h, bias=b) + mat(f"{m}.igate_preact", heads, h, bias=True, tp="replicate")
        w += mat(f"{m}.fgate_preact", heads, h, bias=True, tp="replicate") + norm(f"{m}.multihead_norm", vd, bias=b)
        w += mat(f"{m}.out_proj", h, vd, bias=b) + norm(f"{p}.norm_ffn", h, bias=b)
        w += mat(f"{p}.ffn.proj_up_gate", ffn, h, bias=b) + mat(f"{p}.ffn.proj_up", ffn, h,
                                                                bias=b) + mat(f"{p}.ffn.proj_down", h, ffn, bias=b)
    w += norm("backbone.out_norm", h, bias=b)
    if not c.bool("tie_word_embeddings", False):
        w.append(Weight("lm_head.weight", v, h, 1, False, "shard"))
    return fam


def recurrent_gemma(c: Cfg) -> Family:
    """RecurrentGemma (Griffin): ``block_types`` cycled over the layers; ``attention`` layers are local attention over
    the last ``attention_window_size`` tokens (K/V like a sliding window), ``recurrent`` layers keep an RG-LRU state of
    ``lru_width`` and ``conv1d_width − 1`` convolution columns."""
    h, n, v = c.int("hidden_size"), c.int("num_hidden_layers"), c.int("vocab_size")
    nh, nkv, hd = c.int("num_attention_heads"), c.int("num_key_value_heads"), c.int("head_dim")
    lru, width, window = c.int("lru_width", h), c.int("conv1d_width"), c.int("attention_window_size")
    inter = c.int("intermediate_size") // 2  # transformers RecurrentGemmaMlp: intermediate_size // 2 per projection
    types = c.list("block_types")
    if not types or any(t not in ("recurrent", "attention") for t in types):
        raise c.error("block_types", "must list 'recurrent' / 'attention' block types")
    w = [Weight("model.embed_tokens.weight", v, h, 1, False, "shard")]
    fam = Family([], w, notes=[_NO_ENGINE.format("RecurrentGemma").replace("; no per-token K/V", "") +
                               f"; its local-attention layers hold the last {window:,} tokens' K/V"])
    for i in range(n):
        p, t = f"model.layers.{i}", types[i % len(types)]
        w += norm(f"{p}.temporal_pre_norm", h)
        tb = f"{p}.temporal_block"
        if t == "attention":
            fam.layers.append(SlidingWindowAttention(nkv, hd, hd, nh, window_tokens=window))
            w += mat(f"{tb}.q_proj", nh * hd, h) + mat(f"{tb}.k_proj", nkv * hd, h, tp="kv") + mat(f"{tb}.v_proj",
                nkv * hd, h, tp="kv")
            w += mat(f"{tb}.o_proj", h, nh * hd, bias=True, bias_tp="replicate")
        else:
            fam.layers.append(StateLayer("rg_lru", lru * (width - 1), lru))
            w += mat(f"{tb}.linear_y", lru, h, bias=True) + mat(f"{tb}.linear_x", lru, h, bias=True)
            w += mat(f"{tb}.linear_out", h, lru, bias=True, bias_tp="replicate")
            w += [Weight(f"{tb}.conv_1d.weight", lru, width, 1, False)] + vec(f"{tb}.conv_1d.bias", lru, tp="shard")
            w += vec(f"{tb}.rg_lru.recurrent_param", lru, tp="shard")
            for g in ("input_gate", "recurrent_gate"):
                w += [Weight(f"{tb}.rg_lru.{g}_weight", lru // nh, lru // nh, nh, False)] + vec(f"{tb}.rg_lru.{g}_bias",
                    lru, tp="shard")
        w += norm(f"{p}.channel_pre_norm", h)
        w += mat(f"{p}.mlp_block.gate_proj", inter, h, bias=True) + mat(f"{p}.mlp_block.up_proj", inter, h, bias=True)
        w += mat(f"{p}.mlp_block.down_proj", h, inter, bias=True, bias_tp="replicate")
    w += norm("model.final_norm", h)
    return fam
