"""Architecture families: from a config, each layer's KV spec and the full weight inventory.

One function per family whose layout genuinely differs (decoder-only softmax attention
with dense or MoE MLP; DeepSeek MLA; Qwen3-Next; Jamba; Nemotron-H; OPT; Phi in ``families_phi``). Layer layouts
follow the Hugging Face modeling files named in each docstring.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from kvledger.catalog.cfg import Cfg
from kvledger.catalog.families_mlp import VERIFIED_DECODERS as _VERIFIED_DECODERS
from kvledger.catalog.families_mlp import decoder_mlp, moe_counts
from kvledger.catalog.family_base import Family, embed, heads
from kvledger.catalog.hfread import KV_HEAD_KEYS
from kvledger.catalog.layers import ChunkedLocalAttention, FullAttention, LayerSpec, SlidingWindowAttention
from kvledger.catalog.layerwise import (
    hybrid_kinds,
    hybrid_layer,
    layer_overrides,
    loop_copies,
    mimo_v2_layer,
    per_layer_embedding_weights,
    qsa_indexer,
    qsa_layer,
)
from kvledger.catalog.weights import mat, norm, std_attention, vec

__all__ = ["Family", "FAMILY_OF", "build_family", "decoder_mlp", "moe_counts"]


_LAYER_KINDS = {"full_attention": "full", "attention": "full", "indexed_attention": "full",
                "qwen_sparse_attention": "full", "global_attention": "full", "sliding_attention": "sliding",
                "local_attention": "sliding", "chunked_attention": "chunked", "conv": "conv",
                    "linear_attention": "linear",
                "mamba": "mamba", "mlp": "mlp"}


def _attn_kinds(c: Cfg, mt: str, n: int, notes: list[str]) -> list[str]:
    """Per-layer kind ("full", "sliding", "chunked", or a state kind) for softmax-attention families."""
    if c.has("layer_types"):
        lt = c.list("layer_types")
        if len(lt) != n:
            raise c.error("layer_types", f"has {len(lt)} entries for {n} layers")
        known = {**_LAYER_KINDS, **hybrid_kinds(c)}
        bad = [t for t in lt if not isinstance(t, str) or t not in known]
        if bad:
            raise c.error("layer_types", f"unsupported layer type {bad[0]!r} (known: {', '.join(known)})")
        return [known[t] for t in lt]
    # Bamba: attention at these indices (null: all Mamba-2). Falcon-H1 configs carry the key too, null, but every
    # Falcon-H1 layer runs attention beside its Mamba-2 mixer (vLLM models/falcon_h1.py): not Bamba's layout
    if c.has("mamba_n_heads") and mt != "falcon_h1" and (mt == "bamba" or isinstance(c.get("attn_layer_indices",
                                                                                            None), list)):
        idx = set(x for x in (c.list("attn_layer_indices", []) or []) if isinstance(x, int))
        return ["full" if i in idx else "mamba" for i in range(n)]
    if c.has("full_attn_idxs"):  # LFM2: attention at these indices, short convolutions elsewhere
        idx = set(x for x in c.list("full_attn_idxs") if isinstance(x, int))
        return ["full" if i in idx else "conv" for i in range(n)]
    if c.has("attention_chunk_size"):
        nrl = c.list("no_rope_layers", [])
        # transformers Llama4TextConfig: empty means every no_rope_layer_interval-th layer (default 4) is NoPE
        if not nrl:
            every = c.int("no_rope_layer_interval", 4)
            nrl = [int((i + 1) % every != 0) for i in range(n)]
        if nrl:  # Llama-4: RoPE layers are chunked-local, NoPE layers (0) are global
            if len(nrl) != n:
                raise c.error("no_rope_layers", f"has {len(nrl)} entries for {n} layers")
            return ["chunked" if x else "full" for x in nrl]
        return ["chunked"] * n
    window = c.get("sliding_window", None)
    if not window or c.get("use_sliding_window", True) is False:
        return ["full"] * n  # Qwen2.5 ships sliding_window=131072 with use_sliding_window=false: inert
    if mt in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
        mwl = c.int("max_window_layers", n, minimum=0)
        return ["sliding" if i >= mwl else "full" for i in range(n)]
    if mt == "gemma2":
        return ["sliding" if i % 2 == 0 else "full" for i in range(n)]  # HF Gemma2: even layers local
    if mt in ("gemma3", "gemma3_text", "cohere2"):
        pat = c.int("sliding_window_pattern", 6 if mt != "cohere2" else 4)
        return ["full" if (i + 1) % pat == 0 else "sliding" for i in range(n)]
    if mt not in ("mistral", "mixtral", "phi3", "starcoder2"):
        notes.append(f"sliding_window={window} with no layer_types: every layer uses the window, as in vLLM, whose "
                     "CacheConfig.sliding_window applies it to every attention layer of a model that is not "
                     "interleaved "
                     "(engine/arg_utils.py, layers/attention/attention.py)")
    return ["sliding"] * n  # the window applies to every layer (rolling buffer)


def _attn_spec(c: Cfg, kind: str, nh: int, nkv: int, hd: int) -> LayerSpec:
    """One attention layer's cache spec; ``v_head_dim`` when V differs from K, ``global_head_dim`` for the
    full layers of Gemma-4 (vLLM models/gemma4.py)."""
    vd = c.int("v_head_dim", hd)
    if kind == "sliding":
        return SlidingWindowAttention(nkv, hd, vd, nh, window_tokens=c.int("sliding_window"))
    if kind == "chunked":
        return ChunkedLocalAttention(nkv, hd, vd, nh, chunk_tokens=c.int("attention_chunk_size"))
    if c.has("global_head_dim"):
        g = c.int("global_head_dim")
        return FullAttention(nkv, g, g, nh)
    return FullAttention(nkv, hd, vd, nh)


# Qwen2's layout: q/k/v biases, no o bias (transformers Qwen2Attention; the VL text models are built the same way)
_QKV_BIAS_TYPES = ("qwen2", "qwen2_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text")


@dataclass(frozen=True)
class _Shape:
    """A decoder's config-wide facts its layers are built from: hidden size, heads, KV heads, head size, layers, the
    last layers reusing earlier K/V (count), the cross-attention layers, and the q/k/v and o projection biases."""

    h: int
    nh: int
    nkv: int
    hd: int
    n: int
    shared: int
    cross: set[int]
    qkv_bias: bool
    o_bias: bool


def decoder(c: Cfg, mt: str) -> Family:
    """Decoder-only softmax attention with a dense or MoE MLP: Llama, Mistral, Qwen, Phi-3, Gemma, gpt-oss, Llama-4
    text, StarCoder2, LFM2 — and any config with the standard decoder fields.

    Sources: transformers ``models/<family>/modeling_<family>.py`` (attention biases, q/k norms,
    Gemma's four norms per layer, gpt-oss sinks and expert biases). For a family not listed the
    inventory is the Llama layout with the config's biases and MLP kind, and the notes say so.
    """
    h, nh, nkv, hd = heads(c)
    n = c.int("num_hidden_layers")
    fam = Family([], [])
    if nkv == nh and not any(c.has(k) for k in KV_HEAD_KEYS) and c.get("multi_query", False) is not True:
        fam.notes.append(f"the config names no KV head count (num_key_value_heads): sized with {nh} KV heads, one per "
                         "attention head (MHA), as vLLM's get_total_num_kv_heads falls back to num_attention_heads")
    kinds = _attn_kinds(c, mt, n, fam.notes)
    bias_all = any(c.get(k, False) is True for k in ("attention_bias", "bias", "use_bias", "add_bias_linear"))
    gemma = mt in ("gemma", "gemma2", "gemma3", "gemma3_text") or mt.startswith("gemma4")
    layer_norm = mt in ("starcoder2",)  # LayerNorm with bias
    w, _ = embed(c, h, tied_default=True)
    w += per_layer_embedding_weights(c, h, n)
    fam.weights = w
    E, k = moe_counts(c, mt)
    fam.num_experts, fam.experts_per_token = E, k
    shape = _Shape(h, nh, nkv, hd, n, c.int("num_kv_shared_layers", 0, minimum=0, maximum=n),
                   set(x for x in (c.list("cross_attention_layers", []) or []) if isinstance(x, int)),
                   mt in _QKV_BIAS_TYPES or bias_all or c.get("qkv_bias", False) is True,
                   bias_all and mt not in _QKV_BIAS_TYPES)
    _decoder_notes(mt, shape, fam.notes, _parsed_parts(c, kinds, E, k))
    starts = []
    for i in range(n):
        p = f"model.layers.{i}"
        starts.append(len(fam.layers))
        if kinds[i] in ("conv", "linear", "mamba", "mlp"):
            from kvledger.catalog.statelayers import state_layer  # lazy: hybrid layouts only (see _FAMILY_FUNCS)

            spec, sw = state_layer(c, kinds[i], mt, p, h, nh, hd)
            fam.layers.append(spec)
            w += sw
        else:
            w += _attention_layer(c, mt, i, kinds[i], shape, fam)
        norms = ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                 "post_feedforward_layernorm") if gemma and mt != "gemma" else ("input_layernorm",
                                                                                "post_attention_layernorm")
        for nm in norms:
            w += norm(f"{p}.{nm}", h, bias=layer_norm)
        w += decoder_mlp(c, mt, p, h, i, E)
    extra, why = loop_copies(c, fam.layers, starts)
    fam.layers += extra
    fam.notes += [why] if why else []
    w += norm("model.norm", h, bias=layer_norm)
    return fam


_STATE_WORDS = {"mamba": "Mamba-2", "linear": "linear-attention", "conv": "short-convolution", "mlp": "MLP-only"}


def _parsed_parts(c: Cfg, kinds: list[str], E: int, k: int) -> str:
    """ "; 36 Mamba-2 + 4 attention layers; 72 routed experts (10 per token) + a shared MLP of 8,192": the parts an
    unknown model_type was read with beyond attention and a dense MLP, "" when none."""
    state = {w: sum(1 for x in kinds if x == kd) for kd, w in _STATE_WORDS.items() if kd in kinds}
    parts = ([" + ".join(f"{n} {w}" for w, n in state.items()) + f" + {len(kinds) - sum(state.values())} attention "
              "layers"] if state else [])
    shared = c.int("shared_intermediate_size", 0, minimum=0) or c.int("shared_expert_intermediate_size", 0, minimum=0)
    if E:
        parts.append(f"{E} routed experts ({k} per token)" + (f" + a shared MLP of {shared:,}" if shared else "")
                     + (f" + {c.int('n_shared_experts')} shared experts" if c.get("n_shared_experts", None) else ""))
    return "".join(f"; {x}" for x in parts)


def _decoder_notes(mt: str, s: _Shape, notes: list[str], parts: str = "") -> None:
    """Append the notes on an unverified model_type, cross-layer KV sharing and cross-attention layers."""
    if mt not in _VERIFIED_DECODERS:
        how = "read from its standard fields" if parts else "read as a standard decoder from its fields"
        notes.append(f"model_type {mt!r}: {how} (hidden {s.h}, {s.n} layers, {s.nh} heads, {s.nkv} KV heads of {s.hd}"
                     f"{parts}); KV per token follows vLLM's rules, the parameter count lays out each part as the "
                     "known families do and may differ from the checkpoint by the family's extra tensors")
    # Gemma-3n: the last layers reuse earlier layers' K/V (vLLM kv_sharing_target_layer_name): no cache of their own
    if 0 < s.shared < s.n:
        notes.append(f"cross-layer KV sharing: the last {s.shared} of {s.n} layers reuse earlier layers' K/V and keep "
                     f"no cache")
    if s.cross:  # Mllama: these layers attend to the image tokens' K/V (fixed per request), not to the text
        notes.append(f"{len(s.cross)} cross-attention layers keep the image tokens' K/V, not a per-token text cache")


def _attention_layer(c: Cfg, mt: str, i: int, kind: str, s: _Shape, fam: Family) -> list:
    """Append layer ``i``'s attention (and any state mixer beside it) to ``fam.layers``; return its weights."""
    p, w = f"model.layers.{i}", []
    lc = layer_overrides(c, i)
    _, lnh, lkv, lhd = heads(lc) if lc is not c else (s.h, s.nh, s.nkv, s.hd)
    no_cache = i >= s.n - s.shared or i in s.cross
    if mt == "mimo_v2_flash":
        lc, lkv, lhd = mimo_v2_layer(c, kind, s.nkv, s.hd, fam.notes if i == 0 else [])
    if "+" in kind:  # Inkling, ZAYA: attention and a convolution state in one layer
        lc, lkv, lhd, conv = hybrid_layer(c, kind, s.nh, s.nkv, s.hd)
        fam.layers.append(conv)
    # attention and a Mamba-2 mixer side by side in every layer (vLLM models/falcon_h1.py)
    if mt == "falcon_h1":
        from kvledger.catalog.statelayers import state_layer  # lazy: hybrid layouts only

        spec, sw = state_layer(c, "mamba", mt, p, s.h, s.nh, s.hd)
        fam.layers.append(spec)
        w += sw
    spec = None if no_cache else _attn_spec(lc, kind.split("+")[0], lnh, lkv, lhd)
    if spec is not None and qsa_layer(c, mt, i):
        spec, qsa_w = qsa_indexer(c, spec, f"{p}.self_attn.indexer", s.h, fam.notes if not any(
            getattr(layer, "indexer_bytes_per_token", 0) for layer in fam.layers if layer is not None) else [])
        w += qsa_w
    fam.layers.append(spec)
    # a draft reading its target's K/V (Gemma-4's assistant): query-only attention, no k/v or k_norm
    if s.shared == s.n:
        w += mat(f"{p}.self_attn.q_proj", lnh * lhd, s.h) + mat(f"{p}.self_attn.o_proj", s.h, lnh * lhd)
    else:
        w += std_attention(f"{p}.self_attn", s.h, lnh, lkv, lhd, qkv_bias=s.qkv_bias, o_bias=s.o_bias)
    if mt in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text", "lfm2") or mt.startswith("gemma4"):
        w += norm(f"{p}.self_attn.q_norm", lhd) + ([] if s.shared == s.n else norm(f"{p}.self_attn.k_norm", lhd))
    if mt == "gpt_oss":
        w += vec(f"{p}.self_attn.sinks", s.nh, tp="shard")
    return w


FAMILY_OF: dict[str, str] = {"deepseek_v2": "mla", "deepseek_v3": "mla", "kimi_k2": "mla", "qwen3_next": "qwen3_next",
                             "jamba": "jamba", "nemotron_h": "nemotron_h", "opt": "opt", "falcon": "falcon",
                             "gpt_bigcode": "gpt_bigcode", "mamba": "ssm", "mamba2": "ssm", "falcon_mamba": "ssm",
                             "minicpm3": "mla", "phi": "phi", "zamba": "zamba", "zamba2": "zamba2", "rwkv": "rwkv",
                             "xlstm": "xlstm", "recurrent_gemma": "recurrent_gemma", "blt": "blt",
                             "deepseek_v4": "deepseek_v4"}
"""model_types whose layout departs from the standard decoder; every other model_type is read as a decoder."""

# vLLM ModelArchConfigConvertorBase.is_deepseek_mla: these types cache the MLA latent when kv_lora_rank is set.
_MLA_TYPES = ("deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "glm_moe_dsa", "glm4_moe_lite", "kimi_k2",
              "kimi_linear", "longcat_flash", "pangu_ultra_moe", "bailing_hybrid", "AXK1")


def family_of(c: Cfg, mt: str) -> str:
    """Which family function reads this config."""
    if (
        c.has("kv_lora_rank")
        and c.has("qk_rope_head_dim")
        and (mt in _MLA_TYPES or mt == "minicpm3" or mt not in FAMILY_OF)
    ):
        return "mla"  # vLLM's MLA types, and any other config with a latent (transformers caches the latent)
    if mt in FAMILY_OF and FAMILY_OF[mt] != "mla":
        return FAMILY_OF[mt]
    if (c.has("compress_rates") or c.has("compress_ratios")) and c.has("o_groups"):
        return "deepseek_v4"  # vLLM get_compress_ratios: a DeepSeek-V4 layout under another model_type
    if c.has("hybrid_override_pattern") or (c.has("layers_block_type") and c.has("mamba_num_heads")):
        return "nemotron_h"
    return "decoder"


def build_family(c: Cfg, mt: str) -> Family:
    """Dispatch on the family of ``mt`` (see family_of)."""
    kind = family_of(c, mt)
    if kind == "decoder":
        return decoder(c, mt)
    module, name = _FAMILY_FUNCS[kind]
    return getattr(importlib.import_module(f"kvledger.catalog.{module}"), name)(c)


# family → (catalog module, function), imported when a model of that family is read: the standard decoder (most
# models) needs none of these modules, each a few hundred lines of layouts (docs/performance.md §2.10)
_FAMILY_FUNCS = {"mla": ("families_hybrid", "mla"), "qwen3_next": ("families_hybrid", "qwen3_next"),
                 "jamba": ("families_hybrid", "jamba"), "nemotron_h": ("families_hybrid", "nemotron_h"),
                 "opt": ("families_classic", "opt"), "falcon": ("families_classic", "falcon"),
                 "gpt_bigcode": ("families_classic", "gpt_bigcode"), "ssm": ("families_ssm", "ssm"),
                 "phi": ("families_phi", "phi"), "zamba": ("families_zamba", "zamba"),
                 "zamba2": ("families_zamba", "zamba2"), "rwkv": ("families_recurrent", "rwkv"),
                 "xlstm": ("families_recurrent", "xlstm"), "recurrent_gemma": ("families_recurrent", "recurrent_gemma"),
                 "blt": ("families_blt", "blt"), "deepseek_v4": ("families_dsv4", "deepseek_v4")}
